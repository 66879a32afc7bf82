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

static inline void sf_set_site(sf_site *site, int64_t position, int64_t dim, int64_t value) {
  if (site != NULL) {
    site->position = position;
    site->dim = dim;
    site->value = value;
  }
}

#endif /* SF_INTERNAL_H */
