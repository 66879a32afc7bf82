// ops/common/row_ranges.h -- the one place where CPU kernels use threads:
// rows (or segments) split into ranges of equal work over torch's intra-op
// threads, the C core called once per range (for_row_ranges); work already
// cut into independent chunks -- a merge's, a reduction's partials or slot
// ranges, element ranges -- one chunk per thread (for_chunks).
#pragma once

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "ops/common/status.h"

namespace sparsefill {

// Runs f(row_begin, row_end) -> sf_status over rows [0, m) on torch's
// intra-op threads, in ranges of about equal work (stored elements times
// work_per_row, plus one unit per row; prefix(r) = the stored elements of
// rows [0, r), non-decreasing for valid data), and raises the first non-OK
// status. Small inputs run on the calling thread. Results must not depend on
// the split: each row is written by exactly one range.
// The bounds (chunks + 1 of them, from 0 to m) of `chunks` row ranges of
// about equal work, prefix(r) + r, over rows [0, m); prefix as below.
template <class Prefix>
std::vector<int64_t> range_bounds(Prefix prefix, int64_t m, int64_t chunks) {
  const int64_t nse = prefix(m);
  std::vector<int64_t> bound(chunks + 1, m);
  bound[0] = 0;
  // prefix(i) + i is non-decreasing for valid data; for invalid data the
  // split is merely uneven and the C core reports the error.
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t target = (nse + m) * c / chunks;
    int64_t lo = bound[c - 1], hi = m;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (prefix(mid) + mid < target) lo = mid + 1; else hi = mid;
    }
    bound[c] = lo;
  }
  return bound;
}

template <class Prefix, class F>
void for_ranges_by(Prefix prefix, int64_t m, int64_t work_per_row, const char* what, F f) {
  const int64_t nse = prefix(m);
  const int64_t total = nse * std::max<int64_t>(work_per_row, 1) + m;
  const int64_t threads = at::get_num_threads();
  if (threads <= 1 || total < 32768 || m < 2) {
    check_status(f(0, m), what);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads * 4, m);
  const std::vector<int64_t> bound = range_bounds(prefix, m, chunks);
  std::atomic<int> first_error{SF_OK};
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      if (bound[c] >= bound[c + 1]) continue;
      const sf_status st = f(bound[c], bound[c + 1]);
      int expected = SF_OK;
      if (st != SF_OK) first_error.compare_exchange_strong(expected, (int)st);
    }
  });
  check_status(static_cast<sf_status>(first_error.load()), what);
}

// The rows [0, m) of a CSR-like pointer array (crow_indices, or the segment
// pointers of a reduction):
//   for_row_ranges(crow, m, n, "spmm operands", [&](int64_t r0, int64_t r1) {
//     return sf_csr_spmm_f32(..., r0, r1); });
template <class F>
void for_row_ranges(const int64_t* ptr, int64_t m, int64_t work_per_row, const char* what, F f) {
  for_ranges_by([ptr](int64_t r) { return ptr[r]; }, m, work_per_row, what, f);
}

// The rows [0, nbatch * m) of nbatch copies of one pattern (row r is row
// r % m of copy r / m), as the batched attention kernels number them.
template <class F>
void for_batched_row_ranges(const int64_t* ptr, int64_t m, int64_t nbatch, int64_t work_per_row,
                            const char* what, F f) {
  if (m == 0 || nbatch == 0) return;
  for_ranges_by([ptr, m](int64_t r) { return (r / m) * ptr[m] + ptr[r % m]; }, nbatch * m,
                work_per_row, what, f);
}

// How many chunks a merge of `total` input elements is cut into: one per
// thread, or one for small inputs (not worth a thread's start).
inline int64_t merge_chunks(int64_t total) {
  const int64_t threads = at::get_num_threads();
  return (threads <= 1 || total < 65536) ? 1 : threads;
}

// The first element of chunk c when [0, total) is cut into `chunks` ranges
// of sizes differing by at most one (chunk_begin(total, chunks, chunks) ==
// total), without overflow.
inline int64_t chunk_begin(int64_t total, int64_t chunks, int64_t c) {
  return total / chunks * c + total % chunks * c / chunks;
}

// Runs f(c) -> sf_status for every chunk c in [0, chunks) on torch's intra-op
// threads and returns each chunk's status (check_chunks raises the first
// failing one's: the same error for any number of threads). For work already
// cut into independent items: a merge's chunks, a reduction's partials, its
// ranges of output slots, each item's result independent of the split.
//   auto status = for_chunks(chunks, [&](int64_t c) {
//     return sf_crow_from_rows_range(..., chunk_begin(nse, chunks, c),
//                                    chunk_begin(nse, chunks, c + 1)); });
//   check_chunks(status, "row indices");
template <class F>
std::vector<sf_status> for_chunks(int64_t chunks, F f) {
  std::vector<sf_status> status(chunks, SF_OK);
  if (chunks == 1) {
    status[0] = f(0);
    return status;
  }
  at::parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) status[c] = f(c);
  });
  return status;
}

// Raises the first failing chunk's status (chunk order), naming `what`.
inline void check_chunks(const std::vector<sf_status>& status, const char* what) {
  for (auto st : status) check_status(st, what);
}

}  // namespace sparsefill
