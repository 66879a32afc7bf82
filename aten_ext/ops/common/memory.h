// ops/common/memory.h -- large outputs that a CPU kernel writes in full,
// asked for transparent huge pages before their first touch.
//
// Why: a fresh buffer costs a page fault per 4 KiB page on its first write.
// On the machines measured (docs/design.md#reductions-implementation) writing a fresh 40 MB tensor took
// 5-10x as long as writing one already touched, most of a 10M-element
// softmax; with huge pages (one fault per 2 MiB) the gap mostly closes.
// torch's own allocator does the same under THP_MEM_ALLOC_ENABLE=1; this
// asks for it only for the buffers our kernels fill. madvise is a hint: where
// transparent huge pages are off, or off Linux, nothing changes.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <cstddef>
#include <cstdint>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace sparsefill {

// Asks for huge pages under the 2 MiB-aligned interior of t's CPU storage
// (nothing outside t's bytes is touched or advised), for tensors of 32 MiB
// and more; meant for a fresh tensor nothing has written yet. Only those:
// glibc maps a block that large afresh on every allocation (its mmap
// threshold rises to 32 MiB at most), so its first writes fault; a smaller
// block is usually memory of the heap already written, where the hint buys
// nothing and can cost a compaction (an ewise_add with 19 MB outputs took
// 52 ms with it, 43 ms without; the union's 80 MB outputs 86-121 ms with it,
// 176-193 ms without: make bench's graph rows, Intel Xeon, 2 threads).
inline void prefer_huge_pages(const at::Tensor& t) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const size_t bytes = t.nbytes();
  if (!t.device().is_cpu() || bytes < 16 * kHuge) return;
  const uintptr_t p = reinterpret_cast<uintptr_t>(t.const_data_ptr());
  const uintptr_t lo = (p + kHuge - 1) & ~(kHuge - 1), hi = (p + bytes) & ~(kHuge - 1);
  if (hi > lo) (void)madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
#else
  (void)t;
#endif
}

// at::empty for an output the kernel writes in full: see above.
//   Tensor out = empty_output(values.sizes(), values.options());
inline at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
  at::Tensor t = at::empty(sizes, options);
  prefer_huge_pages(t);
  return t;
}

}  // namespace sparsefill
