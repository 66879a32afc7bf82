// sf_cuda_reduce.cu -- softmax and reductions over segments on the device
// (the CUDA twin of ../cpu/sf_reduce.c), behind the C ABI of
// sparsefill_cuda.h. No torch headers.
//
// A segment s is one slice: the stored rows values[seg_ptr[s] .. seg_ptr[s+1])
// (each w wide) plus u = n - (seg_ptr[s+1] - seg_ptr[s]) unspecified elements
// equal to the fill row fill[s * fill_stride ..]. Work item (s, c) is one
// column of one segment; a group of G threads reduces it:
//   G == 1        one thread walks the rows in order: the CPU's own order of
//                 operations (wide dense parts: neighbouring threads take
//                 neighbouring columns, so reads coalesce; very short segments);
//   G == 32       a warp, lanes striding over the rows (the common case);
//   G == kThreads a block, for long segments.
// Group results are combined with commutative operations (IEEE + and * are
// commutative), so every lane of a group holds the same bits afterwards and
// results are deterministic. Each formula follows the CPU kernel's, term by
// term: the fill's share is added after the stored rows, and only when u > 0.
// Sums and products of more than one row are taken in tree order, so they
// match the CPU's sequential order to rounding only (exactly with G == 1).

#include <cmath>
#include <type_traits>

#include "sf_cuda_internal.cuh"

using namespace sf_cuda;

namespace {

// ---- group reductions ----------------------------------------------------------

__device__ inline double shfl_xor(double x, int o) { return __shfl_xor_sync(0xffffffffu, x, o); }
__device__ inline float shfl_xor(float x, int o) { return __shfl_xor_sync(0xffffffffu, x, o); }
__device__ inline int64_t shfl_xor(int64_t x, int o) {
  return (int64_t)__shfl_xor_sync(0xffffffffu, (long long)x, o);
}

// A candidate extreme: value and stored position (k < 0: none).
template <class T>
struct Best {
  T v;
  int64_t k;
};
template <class T>
__device__ inline Best<T> shfl_xor(Best<T> x, int o) {
  return {shfl_xor(x.v, o), shfl_xor(x.k, o)};
}

template <int G>
struct Group {
  static_assert(G == 1 || G == 32 || G == kThreads, "a group is a thread, a warp or a block");
  __device__ static int lane() { return G == 1 ? 0 : (int)(threadIdx.x % G); }
  __device__ static int64_t first() { return ((int64_t)blockIdx.x * blockDim.x + threadIdx.x) / G; }
  __device__ static int64_t stride() { return (int64_t)gridDim.x * blockDim.x / G; }

  // Every thread of the group gets op over the group's x. Called by all
  // threads of the group (uniform control flow: the work item is uniform).
  template <class T, class Op>
  __device__ static T reduce(T x, Op op) {
    if constexpr (G == 1) {
      return x;
    } else {
      for (int o = 16; o > 0; o >>= 1) x = op(x, shfl_xor(x, o));
      if constexpr (G == 32) {
        return x;
      } else {
        __shared__ T part[kThreads / 32];
        __syncthreads();  // the previous call's readers are done with part
        if (threadIdx.x % 32 == 0) part[threadIdx.x / 32] = x;
        __syncthreads();
        T y = part[0];  // the same order in every thread: the same bits
        for (int i = 1; i < kThreads / 32; ++i) y = op(y, part[i]);
        return y;
      }
    }
  }
};

struct Add {
  template <class T>
  __device__ T operator()(T a, T b) const { return a + b; }
};
struct Mul {
  template <class T>
  __device__ T operator()(T a, T b) const { return a * b; }
};
struct Min64 {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a < b ? a : b; }
};

__device__ inline bool is_nan(double x) { return isnan(x); }
__device__ inline bool is_nan(float x) { return isnan(x); }
__device__ inline bool is_nan(int64_t) { return false; }

__device__ inline double dev_exp(double x) { return exp(x); }
__device__ inline float dev_exp(float x) { return expf(x); }
__device__ inline double dev_log(double x) { return log(x); }
__device__ inline float dev_log(float x) { return logf(x); }
__device__ inline double dev_pow(double x, double y) { return pow(x, y); }
__device__ inline float dev_pow(float x, float y) { return powf(x, y); }

// Max with NaN winning (softmax's shift; which NaN does not matter).
// Between +0 and -0 it takes +0 whatever the order (commutative: the lanes
// of a warp agree to the bit).
struct NanMax {
  template <class T>
  __device__ T operator()(T a, T b) const {
    if (is_nan(a)) return a;
    if (is_nan(b)) return b;
    if (a == b) return signbit(a) ? b : a;
    return b > a ? b : a;
  }
};

// seg_max's choice between two candidates, as the CPU's sequential scan
// decides: NaN wins, then the larger (smaller for min) value, ties to the
// earlier position. Commutative and associative, so any tree gives the
// CPU's winner.
template <class T>
struct Extreme {
  bool is_min;
  __device__ Best<T> operator()(Best<T> a, Best<T> b) const {
    if (a.k < 0) return b;
    if (b.k < 0) return a;
    const bool an = is_nan(a.v), bn = is_nan(b.v);
    if (an || bn) {
      if (an && bn) return a.k < b.k ? a : b;
      return an ? a : b;
    }
    if (a.v == b.v) return a.k < b.k ? a : b;
    return (is_min ? a.v < b.v : a.v > b.v) ? a : b;
  }
};

// ---- segments ------------------------------------------------------------------

struct Segs {
  const int64_t* seg_ptr;
  int64_t nseg, nse, w, n;
};

// Rows [lo, hi) of segment s. False for a segment that breaks the contract
// (sf_cuda_segments_check reports it): it is skipped, so a bad seg_ptr never
// leads outside values[0 .. nse).
__device__ inline bool seg_rows(const Segs& a, int64_t s, int64_t* lo, int64_t* hi) {
  *lo = a.seg_ptr[s];
  *hi = a.seg_ptr[s + 1];
  return *lo >= 0 && *lo <= *hi && *hi <= a.nse && *hi - *lo <= a.n;
}

#define SF_SEG_ITEMS(G, a, item, s, c, lo, hi)                                          \
  for (int64_t item = Group<G>::first(); item < (a).nseg * (a).w; item += Group<G>::stride()) \
    if (const int64_t s = item / (a).w, c = item - s * (a).w; true)                      \
      if (int64_t lo = 0, hi = 0; seg_rows((a), s, &lo, &hi))

template <int G, class T, class ACC>
__global__ void seg_sum_kernel(T* out, const T* values, const T* fill, int64_t fill_stride,
                               Segs a) {
  const int lane = Group<G>::lane();
  SF_SEG_ITEMS(G, a, item, s, c, lo, hi) {
    const int64_t u = a.n - (hi - lo);
    ACC acc = 0;
    for (int64_t k = lo + lane; k < hi; k += G) acc += (ACC)values[k * a.w + c];
    acc = Group<G>::reduce(acc, Add());
    if (lane == 0) {
      if (u > 0) acc += (ACC)u * (ACC)fill[s * fill_stride + c];
      out[item] = (T)acc;
    }
  }
}

// prod(values) * fill^u; lane 0 starts from fill^u, so G == 1 multiplies in
// the CPU's order.
template <int G, class T>
__global__ void seg_prod_kernel(T* out, const T* values, const T* fill, int64_t fill_stride,
                                Segs a) {
  const int lane = Group<G>::lane();
  SF_SEG_ITEMS(G, a, item, s, c, lo, hi) {
    const int64_t u = a.n - (hi - lo);
    T p = (lane == 0 && u > 0) ? dev_pow(fill[s * fill_stride + c], (T)u) : (T)1;
    for (int64_t k = lo + lane; k < hi; k += G) p *= values[k * a.w + c];
    p = Group<G>::reduce(p, Mul());
    if (lane == 0) out[item] = p;
  }
}

template <int G, class T>
__global__ void seg_max_kernel(T* out, int64_t* winner, int64_t* index, const T* values,
                               const T* fill, int64_t fill_stride, const int64_t* coord, Segs a,
                               bool is_min) {
  const int lane = Group<G>::lane();
  const Extreme<T> op{is_min};
  SF_SEG_ITEMS(G, a, item, s, c, lo, hi) {
    const int64_t u = a.n - (hi - lo);
    Best<T> b{(T)0, -1};
    for (int64_t k = lo + lane; k < hi; k += G) b = op(b, Best<T>{values[k * a.w + c], k});
    b = Group<G>::reduce(b, op);
    const int64_t best = b.k;
    T bv = best < 0 ? (T)0 : b.v;
    int64_t win = best;
    if (u > 0) {
      const T x = fill[s * fill_stride + c];
      // With coordinates, an unspecified position precedes the stored
      // winner exactly when some coordinate below coord[best] is missing
      // (coordinates increase within a segment): the CPU's gap < coord[best].
      const bool fill_first = coord != nullptr && best >= 0 && coord[best] > best - lo;
      bool fill_wins;
      if (best < 0) {
        fill_wins = true;
      } else if (is_nan(bv)) {
        fill_wins = is_nan(x) && fill_first;
      } else if (is_nan(x)) {
        fill_wins = true;
      } else if (x == bv) {  // a tie: the first occurrence wins
        fill_wins = fill_first;
      } else {
        fill_wins = is_min ? x < bv : x > bv;
      }
      if (fill_wins) {
        win = -1;
        bv = x;
      }
    }
    // The first unspecified coordinate: the first position j of the segment
    // whose coordinate is not j (all lanes agree on win, so all take part).
    int64_t gap = -1;
    if (coord != nullptr && u > 0 && win < 0) {
      const int64_t cnt = hi - lo;
      gap = cnt;
      for (int64_t k = lo + lane; k < hi; k += G) {
        if (coord[k] != k - lo) {
          gap = k - lo;
          break;  // later positions of this lane are larger
        }
      }
      gap = Group<G>::reduce(gap, Min64());
    }
    if (lane == 0) {
      out[item] = bv;
      if (winner != nullptr) winner[item] = win;
      if (index != nullptr) index[item] = coord == nullptr ? 0 : (win >= 0 ? coord[win] : gap);
    }
  }
}

// m = max(values, fill if u > 0) with NaN winning, z = sum exp(v - m) +
// u exp(f - m); the outputs as sf_seg_softmax_*. exp is recomputed in the
// last pass instead of stored and rescaled: one write per element.
template <int G, class T>
__global__ void seg_softmax_kernel(T* out_values, T* out_fill, const T* values, const T* fill,
                                   int64_t fill_stride, Segs a, bool log_softmax) {
  const int lane = Group<G>::lane();
  SF_SEG_ITEMS(G, a, item, s, c, lo, hi) {
    const int64_t u = a.n - (hi - lo);
    const T f = fill[s * fill_stride + c];
    T m = -INFINITY;
    for (int64_t k = lo + lane; k < hi; k += G) {
      const T x = values[k * a.w + c];
      if (x > m || is_nan(x)) m = x;
    }
    m = Group<G>::reduce(m, NanMax());
    if (u > 0) m = NanMax()(f, m);  // the CPU starts from f: NaN or the larger wins
    T z = 0;
    for (int64_t k = lo + lane; k < hi; k += G) z += dev_exp(values[k * a.w + c] - m);
    z = Group<G>::reduce(z, Add());
    const T ef = u > 0 ? dev_exp(f - m) : (T)0;
    z += (T)u * ef;
    if (log_softmax) {
      const T lz = dev_log(z);
      for (int64_t k = lo + lane; k < hi; k += G) {
        out_values[k * a.w + c] = values[k * a.w + c] - m - lz;
      }
      if (lane == 0) out_fill[item] = u > 0 ? f - m - lz : (T)0;
    } else {
      const T inv = (T)1 / z;
      for (int64_t k = lo + lane; k < hi; k += G) {
        out_values[k * a.w + c] = dev_exp(values[k * a.w + c] - m) * inv;
      }
      if (lane == 0) out_fill[item] = u > 0 ? ef * inv : (T)0;
    }
  }
}

// out_fill, g_fill, grad_fill: one row per segment (stride w), as the CPU's.
template <int G, class T>
__global__ void seg_softmax_backward_kernel(T* grad_values, T* grad_fill, const T* out_values,
                                            const T* out_fill, const T* g_values,
                                            const T* g_fill, Segs a, bool log_softmax) {
  const int lane = Group<G>::lane();
  SF_SEG_ITEMS(G, a, item, s, c, lo, hi) {
    const int64_t u = a.n - (hi - lo);
    T acc = 0;  // softmax: sum g*y over the slice; log_softmax: sum g
    for (int64_t k = lo + lane; k < hi; k += G) {
      const T g = g_values[k * a.w + c];
      acc += log_softmax ? g : g * out_values[k * a.w + c];
    }
    acc = Group<G>::reduce(acc, Add());
    if (u > 0) acc += log_softmax ? g_fill[item] : g_fill[item] * out_fill[item];
    for (int64_t k = lo + lane; k < hi; k += G) {
      const T y = out_values[k * a.w + c], g = g_values[k * a.w + c];
      grad_values[k * a.w + c] = log_softmax ? g - dev_exp(y) * acc : y * (g - acc);
    }
    if (lane == 0) {
      if (u > 0) {
        const T y = out_fill[item];
        grad_fill[item] = log_softmax ? g_fill[item] - (T)u * dev_exp(y) * acc
                                      : y * (g_fill[item] - (T)u * acc);
      } else {
        grad_fill[item] = 0;
      }
    }
  }
}

// ---- launching -----------------------------------------------------------------

sf_status seg_prepare(Segs* a, const int64_t* seg_ptr, int64_t nseg, int64_t nse, int64_t w,
                      int64_t n) {
  SF_CUDA_FAIL_IF(nseg < 0 || nse < 0 || w < 0 || n < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(seg_ptr == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 && INT64_MAX / nseg < w, SF_ERR_OVERFLOW);
  *a = Segs{seg_ptr, nseg, nse, w, n};
  return SF_OK;
}

// Threads per work item, from what the host knows: the mean segment length.
int group_size(const Segs& a) {
  const int64_t items = a.nseg * a.w;
  const int64_t mean = a.nseg > 0 ? a.nse / a.nseg : 0;
  if (a.w >= 32 && items >= 65536) return 1;  // enough columns: one thread each, coalesced
  if (mean <= 4) return 1;                     // a warp would idle on short segments
  if (mean >= 4096) return kThreads;
  return 32;
}

unsigned blocks_for_items(const Segs& a, int g) {
  const int64_t items = a.nseg * a.w;
  // items * g threads, capped by blocks_for (threads then stride)
  return blocks_for(items > INT64_MAX / kThreads ? INT64_MAX / kThreads : items * g);
}

// Launch kernel<G> for the group size `a` calls for; F maps G to a launch.
template <class F>
sf_status launch_groups(const Segs& a, F launch) {
  if (a.nseg == 0 || a.w == 0) return SF_OK;
  const int g = group_size(a);
  if (g == 1) {
    launch(std::integral_constant<int, 1>(), blocks_for_items(a, 1));
  } else if (g == 32) {
    launch(std::integral_constant<int, 32>(), blocks_for_items(a, 32));
  } else {
    launch(std::integral_constant<int, kThreads>(), blocks_for_items(a, kThreads));
  }
  return launched();
}

}  // namespace

// ---- the typed entry points ----------------------------------------------------------
// One template per entry; generated/sf_cuda_reduce_entries.inc (from
// tools/codegen/native.yaml) defines the C ABI's _f32 / _f64 / _i64 twins
// that call them. Floats sum in double, as the CPU kernel does (half and
// bfloat16 arrive as float): results then agree with the CPU's to the last
// bit almost always.

namespace entry {

template <class T>
using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;

template <class T>
sf_status seg_sum(T* out, const T* values, const T* fill, int64_t fill_stride,
                  const int64_t* seg_ptr, int64_t nseg, int64_t nse, int64_t w, int64_t n,
                  void* stream) {
  Segs a;
  SF_CUDA_TRY(seg_prepare(&a, seg_ptr, nseg, nse, w, n));
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 && (out == nullptr || fill == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && w > 0 && values == nullptr, SF_ERR_NULL_POINTER);
  return launch_groups(a, [&](auto g, unsigned blocks) {
    seg_sum_kernel<decltype(g)::value, T, Acc<T>>
        <<<blocks, kThreads, 0, as_stream(stream)>>>(out, values, fill, fill_stride, a);
  });
}

template <class T>
sf_status seg_max(T* out, int64_t* winner, int64_t* index, const T* values, const T* fill,
                  int64_t fill_stride, const int64_t* coord, const int64_t* seg_ptr, int64_t nseg,
                  int64_t nse, int64_t w, int64_t n, int is_min, void* stream) {
  Segs a;
  SF_CUDA_TRY(seg_prepare(&a, seg_ptr, nseg, nse, w, n));
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 && (out == nullptr || fill == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && w > 0 && values == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(index != nullptr && coord == nullptr && nse > 0, SF_ERR_NULL_POINTER);
  return launch_groups(a, [&](auto g, unsigned blocks) {
    seg_max_kernel<decltype(g)::value, T><<<blocks, kThreads, 0, as_stream(stream)>>>(
        out, winner, index, values, fill, fill_stride, coord, a, is_min != 0);
  });
}

template <class T>
sf_status seg_prod(T* out, const T* values, const T* fill, int64_t fill_stride,
                   const int64_t* seg_ptr, int64_t nseg, int64_t nse, int64_t w, int64_t n,
                   void* stream) {
  Segs a;
  SF_CUDA_TRY(seg_prepare(&a, seg_ptr, nseg, nse, w, n));
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 && (out == nullptr || fill == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && w > 0 && values == nullptr, SF_ERR_NULL_POINTER);
  return launch_groups(a, [&](auto g, unsigned blocks) {
    seg_prod_kernel<decltype(g)::value, T>
        <<<blocks, kThreads, 0, as_stream(stream)>>>(out, values, fill, fill_stride, a);
  });
}

template <class T>
sf_status seg_softmax(T* out_values, T* out_fill, const T* values, const T* fill,
                      int64_t fill_stride, const int64_t* seg_ptr, int64_t nseg, int64_t nse,
                      int64_t w, int64_t n, int log_softmax, void* stream) {
  Segs a;
  SF_CUDA_TRY(seg_prepare(&a, seg_ptr, nseg, nse, w, n));
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 && (out_fill == nullptr || fill == nullptr),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && w > 0 && (values == nullptr || out_values == nullptr),
                  SF_ERR_NULL_POINTER);
  return launch_groups(a, [&](auto g, unsigned blocks) {
    seg_softmax_kernel<decltype(g)::value, T><<<blocks, kThreads, 0, as_stream(stream)>>>(
        out_values, out_fill, values, fill, fill_stride, a, log_softmax != 0);
  });
}

template <class T>
sf_status seg_softmax_backward(T* grad_values, T* grad_fill, const T* out_values, const T* out_fill,
                               const T* g_values, const T* g_fill, const int64_t* seg_ptr,
                               int64_t nseg, int64_t nse, int64_t w, int64_t n, int log_softmax,
                               void* stream) {
  Segs a;
  SF_CUDA_TRY(seg_prepare(&a, seg_ptr, nseg, nse, w, n));
  SF_CUDA_FAIL_IF(nseg > 0 && w > 0 &&
                      (grad_fill == nullptr || out_fill == nullptr || g_fill == nullptr),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && w > 0 &&
                      (grad_values == nullptr || out_values == nullptr || g_values == nullptr),
                  SF_ERR_NULL_POINTER);
  return launch_groups(a, [&](auto g, unsigned blocks) {
    seg_softmax_backward_kernel<decltype(g)::value, T>
        <<<blocks, kThreads, 0, as_stream(stream)>>>(grad_values, grad_fill, out_values,
                                                     out_fill, g_values, g_fill, a,
                                                     log_softmax != 0);
  });
}

}  // namespace entry

#include "generated/sf_cuda_reduce_entries.inc"
