/* sf_internal.h -- helpers shared by the C core's files (not installed). */
#ifndef SF_INTERNAL_H
#define SF_INTERNAL_H

#include "../sparsefill_core.h"

/* Return `status` from the enclosing function when `cond` holds. */
#define SF_FAIL_IF(cond, status) \
  do {                           \
    if (cond) return (status);   \
  } while (0)

/* A pointer argument may be NULL only when its length is 0. */
#define SF_NEED(ptr, len) SF_FAIL_IF((ptr) == NULL && (len) > 0, SF_ERR_NULL_POINTER)

/* The same for a length a * b (a, b >= 0), without forming the product,
 * which could overflow int64 for arbitrary arguments. */
#define SF_NEED2(ptr, a, b) \
  SF_FAIL_IF((ptr) == NULL && (a) > 0 && (b) > 0, SF_ERR_NULL_POINTER)

static inline void sf_set_site(sf_site *site, int64_t position, int64_t dim, int64_t value) {
  if (site != NULL) {
    site->position = position;
    site->dim = dim;
    site->value = value;
  }
}

#endif /* SF_INTERNAL_H */
