// ops/common/status.h -- a C core's sf_status becomes a TORCH_CHECK error
// (a Python RuntimeError) that names what the core was validating.
#pragma once

#include <c10/util/Exception.h>

#include <string>

#include "sparsefill_core.h"

namespace sparsefill {

// Raises for any status but SF_OK. `what` names the argument(s) the core was
// validating; `site` (optional) says where it found the error.
inline void check_status(sf_status status, const char* what, const sf_site* site = nullptr) {
  if (status == SF_OK) return;
  std::string where;
  if (site != nullptr && site->position >= 0) {
    where = " (at position " + std::to_string(site->position);
    if (site->dim >= 0) where += ", dimension " + std::to_string(site->dim);
    where += ", value " + std::to_string(site->value) + ")";
  }
  TORCH_CHECK(status != SF_ERR_NO_MEMORY, "sparsefill: out of memory while processing ", what);
  TORCH_CHECK(false, "sparsefill: invalid ", what, ": ", sf_status_string(status), where);
}

}  // namespace sparsefill
