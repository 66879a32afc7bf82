// ops/common/memory.cpp -- the CPU output cache behind empty_output
// (memory.h; docs/design.md#cpu-output-cache says why and what it measured).
//
// glibc maps every block of 32 MiB and more afresh and unmaps it on free, so
// each call of an op with large outputs pays their page faults again: on a VM
// that hands free memory back to its host, most of a 10M-element union (140 ms
// a call in a full make bench, 62-65 ms on reused memory). This keeps freed
// output blocks for the next output of about their size, as torch's CUDA
// caching allocator keeps device memory, within a limit
// (sf.memory.set_cache_limit). A kept block is advised MADV_FREE: the kernel
// may drop its pages under memory pressure (a reuse then faults as a fresh
// block would), so a kept block holds no memory another program needs.
#include "ops/common/memory.h"

#include <ATen/EmptyTensor.h>
#include <ATen/ops/empty.h>
#include <c10/core/CPUAllocator.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <vector>

#if defined(__linux__)
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace sparsefill {
namespace {

constexpr size_t kHuge = size_t(1) << 21;

#if defined(__linux__)
struct Block {
  void* base;
  size_t bytes;      // a multiple of kHuge; base is kHuge-aligned
  size_t requested;  // what the tensor asked for (the profiler's size)
};

struct Cache {
  std::mutex mu;
  std::vector<Block> kept;  // oldest first
  size_t kept_bytes = 0;
  size_t live_bytes = 0;  // requested by the outputs alive now
  size_t limit;
  int64_t hits = 0, misses = 0;
  Cache() {
    // An eighth of the memory, at most 1 GiB: the outputs of a few calls.
    const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    const size_t phys = pages > 0 && page > 0 ? size_t(pages) * size_t(page) : 0;
    limit = std::min(size_t(1) << 30, phys / 8);
    // A fork while another thread holds the lock must not leave it held in
    // the child (DataLoader workers are forks).
    pthread_atfork([] { cache().mu.lock(); }, [] { cache().mu.unlock(); },
                   [] { cache().mu.unlock(); });
  }
  static Cache& cache() {
    static Cache* c = new Cache();  // never destroyed: deleters may run at exit
    return *c;
  }
  // The oldest kept blocks leave (into `leaving`, to unmap outside the lock)
  // until at most `budget` bytes are kept; mu held.
  void evict_to(size_t budget, std::vector<Block>& leaving) {
    while (kept_bytes > budget) {
      leaving.push_back(kept.front());
      kept_bytes -= kept.front().bytes;
      kept.erase(kept.begin());
    }
  }
};

// A fresh kHuge-aligned anonymous mapping of `bytes`, asked for huge pages;
// nullptr when the system has no memory for it.
void* map_block(size_t bytes) {
  void* p = mmap(nullptr, bytes + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                 -1, 0);
  if (p == MAP_FAILED) return nullptr;
  const uintptr_t raw = reinterpret_cast<uintptr_t>(p);
  const uintptr_t base = (raw + kHuge - 1) & ~(kHuge - 1);
  if (base > raw) munmap(p, base - raw);
  if (raw + kHuge > base) munmap(reinterpret_cast<void*>(base + bytes), raw + kHuge - base);
#if defined(MADV_HUGEPAGE)
  (void)madvise(reinterpret_cast<void*>(base), bytes, MADV_HUGEPAGE);
#endif
  return reinterpret_cast<void*>(base);
}

void unmap_all(const std::vector<Block>& blocks) {
  for (const Block& b : blocks) munmap(b.base, b.bytes);
}

// torch.profiler(profile_memory=True) sees these blocks as it sees torch's
// CPU allocations (a no-op unless it is recording).
void report(void* base, int64_t bytes, size_t live, size_t reserved) {
  c10::reportMemoryUsageToProfiler(base, bytes, live, reserved, c10::Device(c10::DeviceType::CPU));
}

// The deleter of a block's DataPtr: keep it for the next output, the oldest
// kept ones leaving to make room, or unmap it when the limit is smaller.
void release(void* ctx) {
  Block* block = static_cast<Block*>(ctx);
  const Block b = *block;
  delete block;
  Cache& c = Cache::cache();
#if defined(MADV_FREE)
  // While the block is still this deleter's alone: advised after another
  // thread had taken it and written it, its pages could come back as zeros.
  (void)madvise(b.base, b.bytes, MADV_FREE);
#endif
  std::vector<Block> leaving;
  size_t live, reserved;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    c.live_bytes -= b.requested;
    if (b.bytes <= c.limit) {
      c.evict_to(c.limit - b.bytes, leaving);
      c.kept.push_back(b);
      c.kept_bytes += b.bytes;
    } else {
      leaving.push_back(b);
    }
    live = c.live_bytes;
    reserved = live + c.kept_bytes;
  }
  report(b.base, -int64_t(b.requested), live, reserved);
  unmap_all(leaving);
}

// Blocks of 32 MiB and more (the size glibc maps afresh): a kept block at
// most a quarter larger than asked, else a fresh one.
struct OutputAllocator final : c10::Allocator {
  c10::DataPtr allocate(size_t n) override {
    if (n < 16 * kHuge) return c10::GetCPUAllocator()->allocate(n);
    const size_t bytes = (n + kHuge - 1) & ~(kHuge - 1);
    Cache& c = Cache::cache();
    void* base = nullptr;
    size_t have = 0;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      auto best = c.kept.end();
      for (auto it = c.kept.begin(); it != c.kept.end(); ++it)
        if (it->bytes >= bytes && it->bytes <= bytes + bytes / 4 &&
            (best == c.kept.end() || it->bytes < best->bytes))
          best = it;
      if (best != c.kept.end()) {
        base = best->base;
        have = best->bytes;
        c.kept_bytes -= have;
        c.kept.erase(best);
        ++c.hits;
      } else {
        ++c.misses;
      }
    }
    if (base == nullptr) {
      base = map_block(bytes);
      have = bytes;
      if (base == nullptr) return c10::GetCPUAllocator()->allocate(n);  // its OOM error
    }
    size_t live, reserved;
    {
      std::lock_guard<std::mutex> lock(c.mu);
      c.live_bytes += n;
      live = c.live_bytes;
      reserved = live + c.kept_bytes;
    }
    report(base, int64_t(n), live, reserved);
    return {base, new Block{base, have, n}, &release, c10::Device(c10::DeviceType::CPU)};
  }
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
};

OutputAllocator* output_allocator() {
  static OutputAllocator a;
  return &a;
}
#endif

}  // namespace

at::Tensor empty_output(at::IntArrayRef sizes, const at::TensorOptions& options) {
#if defined(__linux__)
  if (options.device().is_cpu() && options.layout() == at::kStrided)
    return at::detail::empty_generic(sizes, output_allocator(),
                                     c10::DispatchKeySet(c10::DispatchKey::CPU),
                                     c10::typeMetaToScalarType(options.dtype()), std::nullopt);
#endif
  return at::empty(sizes, options);
}

OutputCacheInfo output_cache_info() {
#if defined(__linux__)
  Cache& c = Cache::cache();
  std::lock_guard<std::mutex> lock(c.mu);
  return {int64_t(c.kept_bytes), int64_t(c.limit), c.hits, c.misses};
#else
  return {0, 0, 0, 0};
#endif
}

int64_t set_output_cache_limit(int64_t limit) {
#if defined(__linux__)
  Cache& c = Cache::cache();
  std::vector<Block> leaving;
  int64_t previous;
  {
    std::lock_guard<std::mutex> lock(c.mu);
    previous = int64_t(c.limit);
    c.limit = size_t(limit);
    c.evict_to(c.limit, leaving);
  }
  unmap_all(leaving);
  return previous;
#else
  (void)limit;
  return 0;
#endif
}

}  // namespace sparsefill
