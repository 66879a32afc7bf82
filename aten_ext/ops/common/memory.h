// ops/common/memory.h -- large outputs that a CPU kernel writes in full:
// asked for transparent huge pages before their first touch, and kept for the
// next output when their tensor dies (memory.cpp).
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

#include <cstdint>

namespace sparsefill {

// at::empty for a CPU output the kernel writes in full: every element, since
// a kept block holds the bytes of a dead output (or zeros), never a fresh
// mapping's zeros to rely on (test/ops/test_output_cache.py poisons them).
// A block of 32 MiB and more is 2 MiB-aligned, asked for huge pages before
// its first touch (one fault per 2 MiB), and comes back to a small cache when
// its tensor dies, for the next output of about its size (memory.cpp says
// why): glibc maps a block that large afresh on every allocation (its mmap
// threshold rises to 32 MiB at most), so its first writes fault; a smaller
// block is usually
// memory of the heap already written, where the hint buys nothing and can
// cost a compaction (an ewise_add with 19 MB outputs took 52 ms with it,
// 43 ms without; the union's 80 MB outputs 86-121 ms with it, 176-193 ms
// without: make bench's graph rows, Intel Xeon, 2 threads).
//   Tensor out = empty_output(values.sizes(), values.options());
at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options);

// The cache's state: bytes kept, its limit, and the large allocations it
// served from a kept block (hits) or a fresh one (misses).
struct OutputCacheInfo {
  int64_t kept_bytes, limit, hits, misses;
};
OutputCacheInfo output_cache_info();

// Sets the bytes the cache may keep (0: none; the kept blocks over it are
// unmapped now); returns the previous limit.
int64_t set_output_cache_limit(int64_t limit);

}  // namespace sparsefill
