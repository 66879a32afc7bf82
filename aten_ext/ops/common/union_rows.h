// ops/common/union_rows.h -- the first pass of every union of two CSR
// patterns (ewise_merge; union_binop, whose COO rows become row pointers
// first): each row's union size on torch's threads, then the running sum,
// the result's crow_indices. The write pass (the C core's
// sf_csr_ewise_union_*) splits rows by the result's work.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstdint>
#include <vector>

#include "ops/common/row_ranges.h"
#include "sparsefill_core.h"

namespace sparsefill {

// crow (m + 1, int64) of the union of A (cra, col_a) and B (crb, col_b),
// both m x ncols; checks both operands (the C core's sf_csr_union_row_nse;
// errors name `what`). Rows split by A + B's work. Each range marks columns
// in a bitmap of its own where one is small next to the work (ncols up to
// 2^21, 256 KiB; and at most an eighth of the elements, so that clearing
// it costs little), else merges.
//   Tensor crow = union_crow(cra, col_a, nse_a, crb, col_b, nse_b, m, ncols, "ewise_merge operands");
inline at::Tensor union_crow(const int64_t* cra, const int64_t* col_a, int64_t nse_a,
                             const int64_t* crb, const int64_t* col_b, int64_t nse_b, int64_t m,
                             int64_t ncols, const char* what) {
  at::Tensor crow = at::empty({m + 1}, at::TensorOptions().dtype(at::kLong));
  int64_t* cr = crow.data_ptr<int64_t>();
  cr[0] = 0;
  const int64_t words = ncols / 64 + 1;
  const bool marked = ncols <= (int64_t(1) << 21) && words <= (nse_a + nse_b) / 8 + 512;
  auto both = [cra, crb](int64_t r) { return cra[r] + crb[r]; };
  for_ranges_by(both, m, 1, what, [&](int64_t r0, int64_t r1) {
    std::vector<uint64_t> marks(marked ? words : 0);  // this range's, zeroed
    return sf_csr_union_row_nse(cr + 1, marked ? marks.data() : nullptr, cra, col_a, nse_a, crb,
                                col_b, nse_b, m, ncols, r0, r1);
  });
  for (int64_t i = 0; i < m; ++i) cr[i + 1] += cr[i];
  return crow;
}

}  // namespace sparsefill
