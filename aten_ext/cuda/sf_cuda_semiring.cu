// sf_cuda_semiring.cu -- the graph domain's semiring products on the device
// (sparsefill_cuda.h, "semiring products"), the twins of ../cpu/sf_semiring.c's
// mv, vm and masked dots (cuSPARSE has no semirings). No torch headers.
//
// One thread per output walks that output's terms in the order the CPU
// kernel meets them, with its arithmetic, so that out and arg are the CPU's
// bit for bit (min/max/any/lor/land, and plus/times too: a fixed order):
//   mv      a thread per row of A, as sf_sr_mv_rows (min/max over an all-
//           present x by the CPU's two interleaved lanes, whose signed zeros
//           and NaN come out as the CPU's);
//   vm      a thread per column j of the transposed pattern: A's elements of
//           column j in A's order (rows ascending) are the terms the CPU's
//           push delivers to out[j], in that order, each row looked up in
//           u's sorted keys; no atomics;
//   masked  a thread per mask element, the CPU's merge of row i of A with
//           row j of B^T.
// Float terms and folds use the IEEE-rounded intrinsics (__fadd_rn, ...):
// nvcc would otherwise contract a product and the sum it feeds into one
// FMA, rounded once where the CPU rounds twice. The monoid and op are
// kernel arguments, uniform over a launch (one branch per term that every
// thread takes alike), not template parameters: 7 x 20 bodies per kernel
// and type would multiply the compile time for no change in the result.
#include "sf_cuda_internal.cuh"

#include <type_traits>

using namespace sf_cuda;

namespace {

// The accumulator of the C core (sf_type.h): double for both floats, int64.
template <class T>
using Acc = std::conditional_t<std::is_floating_point_v<T>, double, int64_t>;

template <class T>
constexpr bool kFloat = std::is_floating_point_v<T>;

// ---- IEEE-rounded float arithmetic (never contracted) --------------------------------

__device__ inline float add_rn(float a, float b) { return __fadd_rn(a, b); }
__device__ inline double add_rn(double a, double b) { return __dadd_rn(a, b); }
__device__ inline float sub_rn(float a, float b) { return __fsub_rn(a, b); }
__device__ inline double sub_rn(double a, double b) { return __dsub_rn(a, b); }
__device__ inline float mul_rn(float a, float b) { return __fmul_rn(a, b); }
__device__ inline double mul_rn(double a, double b) { return __dmul_rn(a, b); }
__device__ inline float div_rn(float a, float b) { return __fdiv_rn(a, b); }
__device__ inline double div_rn(double a, double b) { return __ddiv_rn(a, b); }

template <class A>
__device__ inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) return v != v;
  return false;
}

// The C core's NANV in ACC: C's NAN (a float quiet NaN) widened to double.
template <class A>
__device__ inline A nan_value() {
  if constexpr (std::is_floating_point_v<A>) return __longlong_as_double(0x7ff8000000000000LL);
  return A(0);
}

// ---- the semiring, as templates/semiring.h --------------------------------------------

// op(l, r) of one present pair (sf_sr_term). Integers wrap through uint64_t;
// a division op on int64 is refused before any launch.
template <class T>
__device__ inline T sr_term(int op, T l, T r) {
  if constexpr (kFloat<T>) {
    switch (op) {
      case SF_OP_PLUS: return add_rn(l, r);
      case SF_OP_MINUS: return sub_rn(l, r);
      case SF_OP_RMINUS: return sub_rn(r, l);
      case SF_OP_TIMES: return mul_rn(l, r);
      case SF_OP_DIV: return div_rn(l, r);
      case SF_OP_RDIV: return div_rn(r, l);
      // torch.minimum / maximum: NaN propagates, a tie gives the first operand.
      case SF_OP_MIN: return (r < l || r != r) ? r : l;
      case SF_OP_MAX: return (r > l || r != r) ? r : l;
      default: break;
    }
  } else {
    switch (op) {
      case SF_OP_PLUS: return (T)((uint64_t)l + (uint64_t)r);
      case SF_OP_MINUS: return (T)((uint64_t)l - (uint64_t)r);
      case SF_OP_RMINUS: return (T)((uint64_t)r - (uint64_t)l);
      case SF_OP_TIMES: return (T)((uint64_t)l * (uint64_t)r);
      case SF_OP_MIN: return l < r ? l : r;
      case SF_OP_MAX: return l > r ? l : r;
      default: break;
    }
  }
  switch (op) {
    case SF_OP_FIRST: return l;
    case SF_OP_SECOND: return r;
    case SF_OP_PAIR: return (T)1;
    case SF_OP_LAND: return (T)((l != 0) & (r != 0));
    case SF_OP_LOR: return (T)((l != 0) | (r != 0));
    case SF_OP_LXOR: return (T)((l != 0) ^ (r != 0));
    case SF_OP_EQ: return (T)(l == r);
    case SF_OP_NE: return (T)(l != r);
    case SF_OP_LT: return (T)(l < r);
    case SF_OP_GT: return (T)(l > r);
    case SF_OP_LE: return (T)(l <= r);
    default: return (T)(l >= r);  // SF_OP_GE
  }
}

// The first present term of an output, as the monoid keeps it (sf_sr_first).
template <class T>
__device__ inline Acc<T> sr_first(int monoid, T t) {
  if (monoid == SF_MONOID_LOR || monoid == SF_MONOID_LAND) return (Acc<T>)(t != 0);
  return (Acc<T>)t;
}

// Folds term t into acc (sf_sr_fold): NaN wins and stays for min and max.
template <class T>
__device__ inline void sr_fold(int monoid, Acc<T>* acc, T t) {
  using A = Acc<T>;
  if constexpr (kFloat<T>) {
    switch (monoid) {
      case SF_MONOID_PLUS: *acc = __dadd_rn(*acc, (A)t); return;
      case SF_MONOID_TIMES: *acc = (A)mul_rn((T)*acc, t); return;  // rounded to T, as the CPU
      case SF_MONOID_MIN: {
        const int take = (((A)t < *acc) | (t != t)) & (*acc == *acc);
        *acc = take ? (A)t : *acc;
        return;
      }
      case SF_MONOID_MAX: {
        const int take = (((A)t > *acc) | (t != t)) & (*acc == *acc);
        *acc = take ? (A)t : *acc;
        return;
      }
      default: break;
    }
  } else {
    switch (monoid) {
      case SF_MONOID_PLUS: *acc = (A)((uint64_t)*acc + (uint64_t)t); return;
      case SF_MONOID_TIMES: *acc = (A)((uint64_t)*acc * (uint64_t)t); return;
      case SF_MONOID_MIN: *acc = t < *acc ? t : *acc; return;
      case SF_MONOID_MAX: *acc = t > *acc ? t : *acc; return;
      default: break;
    }
  }
  if (monoid == SF_MONOID_LOR) *acc = (A)((*acc != 0) | (t != 0));
  else if (monoid == SF_MONOID_LAND) *acc = (A)((*acc != 0) & (t != 0));
  // SF_MONOID_ANY: the first term stays
}

// min or max of the terms [p, hi) of a row onto acc, every x present: the
// CPU's two lanes (sf_sr_extreme_rows), so that which of two equal zeros
// wins, and the NaN, are the CPU's. false: a column out of range.
template <class T>
__device__ inline bool sr_extreme(bool is_min, int op, Acc<T>* acc, const int64_t* col,
                                  const T* values, int64_t ncols, const T* x, int64_t p,
                                  int64_t hi) {
  using A = Acc<T>;
  A a0 = *acc, a1 = *acc;
  bool nan = false;
  for (; p + 2 <= hi; p += 2) {
    const int64_t k0 = col[p], k1 = col[p + 1];
    if (((uint64_t)k0 >= (uint64_t)ncols) | ((uint64_t)k1 >= (uint64_t)ncols)) return false;
    const A t0 = (A)sr_term<T>(op, values[p], x[k0]);
    const A t1 = (A)sr_term<T>(op, values[p + 1], x[k1]);
    nan |= is_nan(t0) | is_nan(t1);
    if (is_min) {
      a0 = t0 < a0 ? t0 : a0;
      a1 = t1 < a1 ? t1 : a1;
    } else {
      a0 = t0 > a0 ? t0 : a0;
      a1 = t1 > a1 ? t1 : a1;
    }
  }
  for (; p < hi; ++p) {
    const int64_t k = col[p];
    if ((uint64_t)k >= (uint64_t)ncols) return false;
    const A t = (A)sr_term<T>(op, values[p], x[k]);
    nan |= is_nan(t);
    a0 = is_min ? (t < a0 ? t : a0) : (t > a0 ? t : a0);
  }
  const A a = is_min ? (a1 < a0 ? a1 : a0) : (a1 > a0 ? a1 : a0);
  // A NaN term, or a NaN first term already in acc (which the lanes dropped).
  *acc = (nan || is_nan(*acc)) ? nan_value<A>() : a;
  return true;
}

// ---- mv: a thread per row ----------------------------------------------------------

template <class T>
__global__ void mv_kernel(Acc<T>* out, int64_t* arg, const int64_t* crow, const int64_t* col,
                          const T* values, int64_t nrows, int64_t ncols, int64_t nse, const T* x,
                          const uint8_t* x_present, int monoid, int op) {
  using A = Acc<T>;
  SF_CUDA_FOR(i, nrows) {
    const int64_t lo = crow[i], hi = crow[i + 1];
    A acc = 0;
    int64_t best = -1;
    // A bad span or column (the operand check reports it) ends the row.
    bool ok = lo >= 0 && hi >= lo && hi <= nse;
    int64_t p = lo;
    // Up to the first present term, then the fold (as the CPU).
    for (; ok && p < hi; ++p) {
      const int64_t k = col[p];
      if ((uint64_t)k >= (uint64_t)ncols) {
        ok = false;
        break;
      }
      if (x_present && !x_present[k]) continue;
      acc = sr_first<T>(monoid, sr_term<T>(op, values[p], x[k]));
      best = p++;
      break;
    }
    if (ok && (monoid == SF_MONOID_MIN || monoid == SF_MONOID_MAX) && !x_present) {
      ok = sr_extreme<T>(monoid == SF_MONOID_MIN, op, &acc, col, values, ncols, x, p, hi);
    } else if (ok && monoid != SF_MONOID_ANY) {
      for (; p < hi; ++p) {
        const int64_t k = col[p];
        if ((uint64_t)k >= (uint64_t)ncols) {
          ok = false;
          break;
        }
        if (x_present && !x_present[k]) continue;
        sr_fold<T>(monoid, &acc, sr_term<T>(op, values[p], x[k]));
      }
    }
    out[i] = ok ? acc : A(0);
    arg[i] = ok ? best : -1;
  }
}

// ---- vm: a thread per column of the transposed pattern ----------------------------

// u's keys as the CPU reads them, in order: each must exceed the one before
// (the first: be >= 0) and lie below nrows. The smallest bad q wins; the
// key's low bit says which rule it broke.
__global__ void keys_kernel(sf_cuda_report* r, const int64_t* keys, int64_t n, int64_t nrows) {
  SF_CUDA_FOR(q, n) {
    const int64_t k = keys[q];
    const int64_t previous = q > 0 ? keys[q - 1] : -1;
    if (k <= previous) note_bad(&r->first, (uint64_t)q * 2);
    else if (k >= nrows) note_bad(&r->first, (uint64_t)q * 2 + 1);
  }
}

__global__ void keys_finish(sf_cuda_report* r, const int64_t* keys) {
  if (r->first == kNone) return;
  const int64_t q = (int64_t)(r->first / 2);
  set_site(r, (r->first & 1) ? SF_ERR_INDEX_OUT_OF_RANGE : SF_ERR_NOT_COALESCED, q, 0, keys[q]);
}

template <class T>
__global__ void vm_kernel(Acc<T>* out, int64_t* arg, const int64_t* crow_t, const int64_t* row_t,
                          const int64_t* perm, const T* values, int64_t nse,
                          int64_t ncols, const int64_t* u_keys, const T* u_values, int64_t u_nse,
                          int monoid, int op) {
  using A = Acc<T>;
  SF_CUDA_FOR(j, ncols) {
    A acc = 0;
    int64_t best = -1;
    const int64_t lo = crow_t[j] < 0 ? 0 : crow_t[j];
    const int64_t hi = crow_t[j + 1] > nse ? nse : crow_t[j + 1];
    // The rows ascend down the column (stable transpose), and so do u's
    // keys: each search starts where the last one stopped.
    int64_t at = 0;
    for (int64_t q = lo; q < hi; ++q) {
      const int64_t k = row_t[q], p = perm[q];
      if ((uint64_t)p >= (uint64_t)nse) continue;  // only on unchecked input
      at += lower_bound(u_keys + at, u_nse - at, k);
      if (at >= u_nse) break;  // no key left at or above this row
      if (u_keys[at] != k) continue;
      const T t = sr_term<T>(op, u_values[at], values[p]);
      if (best < 0) {
        acc = sr_first<T>(monoid, t);
        best = p;
        if (monoid == SF_MONOID_ANY) break;  // the CPU folds nothing more into it
      } else {
        sr_fold<T>(monoid, &acc, t);
      }
    }
    out[j] = acc;
    arg[j] = best;
  }
}

// ---- masked: a thread per mask element --------------------------------------------

// The first position in [lo, hi) of sorted col whose value is >= key
// (sf_sr_lower_bound: the same probes, so even unsorted input matches).
__device__ inline int64_t sr_lower_bound(const int64_t* col, int64_t lo, int64_t hi,
                                         int64_t key) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (col[mid] < key) lo = mid + 1; else hi = mid;
  }
  return lo;
}

template <class T>
__global__ void masked_kernel(Acc<T>* out, int64_t* arg, const int64_t* crow_m,
                              const int64_t* col_m, int64_t nse_m, const int64_t* crow_a,
                              const int64_t* col_a, const T* val_a, int64_t nse_a,
                              const int64_t* crow_bt, const int64_t* col_bt, const T* val_bt,
                              int64_t nse_bt, int64_t m, int64_t n, int monoid, int op) {
  using A = Acc<T>;
  SF_CUDA_FOR(q, nse_m) {
    A acc = 0;
    int64_t best = -1;
    const int64_t i = row_of(crow_m, m, q), j = col_m[q];
    // Bad mask rows or columns, or bad spans of A or B^T (the operand
    // checks report them), leave the element absent.
    bool ok = i < m && q >= crow_m[i] && (uint64_t)j < (uint64_t)n;
    int64_t a0 = 0, a1 = 0, b0 = 0, b1 = 0;
    if (ok) {
      a0 = crow_a[i];
      a1 = crow_a[i + 1];
      b0 = crow_bt[j];
      b1 = crow_bt[j + 1];
      ok = a0 >= 0 && a1 >= a0 && a1 <= nse_a && b0 >= 0 && b1 >= b0 && b1 <= nse_bt;
    }
    if (ok) {
      int64_t pa = a0, pb = b0;
      const int64_t la = a1 - a0, lb = b1 - b0;
      while (pa < a1 && pb < b1) {
        const int64_t ka = col_a[pa], kb = col_bt[pb];
        if (ka == kb) {
          const T t = sr_term<T>(op, val_a[pa], val_bt[pb]);
          if (best < 0) {
            acc = sr_first<T>(monoid, t);
            best = pa;
            if (monoid == SF_MONOID_ANY) break;
          } else {
            sr_fold<T>(monoid, &acc, t);
          }
          ++pa;
          ++pb;
        } else if (ka < kb) {
          pa = la > 16 * lb ? sr_lower_bound(col_a, pa + 1, a1, kb) : pa + 1;
        } else {
          pb = lb > 16 * la ? sr_lower_bound(col_bt, pb + 1, b1, ka) : pb + 1;
        }
      }
    }
    out[q] = acc;
    arg[q] = best;
  }
}

// The codes a kernel accepts: a monoid and op of sparsefill_core.h, and no
// division on int64 (torch's integer division gives a float: the caller's).
template <class T>
bool codes_ok(int monoid, int op) {
  if (monoid < SF_MONOID_PLUS || monoid > SF_MONOID_ANY) return false;
  if (op < SF_OP_PLUS || op > SF_OP_GE) return false;
  return kFloat<T> || (op != SF_OP_DIV && op != SF_OP_RDIV);
}

}  // namespace

// ---- the typed entry points --------------------------------------------------------------
// generated/sf_cuda_semiring_entries.inc (tools/codegen/native.yaml) defines the
// C ABI's _f32 / _f64 / _i64 twins that call them.

namespace entry {

template <class T>
sf_status csr_semiring_mv(sf_cuda_report* report, Acc<T>* out, int64_t* arg, const int64_t* crow,
                          const int64_t* col, const T* values, int64_t nrows, int64_t ncols,
                          int64_t nse, const T* x, const uint8_t* x_present, int monoid, int op,
                          void* stream) {
  SF_CUDA_FAIL_IF(!codes_ok<T>(monoid, op), SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(nrows > 0 && (out == nullptr || arg == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && values == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(ncols > 0 && x == nullptr, SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(operand_scan(report, crow, col, nrows, ncols, nse, 1, s));
  if (nrows == 0) return SF_OK;
  mv_kernel<T><<<blocks_for(nrows), kThreads, 0, s>>>(out, arg, crow, col, values, nrows, ncols,
                                                      nse, x, x_present, monoid, op);
  return launched();
}

template <class T>
sf_status csr_semiring_vm(sf_cuda_report* report, Acc<T>* out, int64_t* arg,
                          const int64_t* crow_t, const int64_t* row_t, const int64_t* perm,
                          const T* values, int64_t nrows, int64_t ncols, int64_t nse,
                          const int64_t* u_keys, const T* u_values, int64_t u_nse, int monoid,
                          int op, void* stream) {
  SF_CUDA_FAIL_IF(!codes_ok<T>(monoid, op), SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(nrows < 0 || ncols < 0 || nse < 0 || u_nse < 0, SF_ERR_NEGATIVE_SIZE);
  SF_CUDA_FAIL_IF(report == nullptr || crow_t == nullptr, SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(ncols > 0 && (out == nullptr || arg == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse > 0 && (row_t == nullptr || perm == nullptr || values == nullptr),
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(u_nse > 0 && (u_keys == nullptr || u_values == nullptr), SF_ERR_NULL_POINTER);
  const cudaStream_t s = as_stream(stream);
  SF_CUDA_TRY(report_init(report, 0, s));
  if (u_nse > 0) {
    keys_kernel<<<blocks_for(u_nse), kThreads, 0, s>>>(report, u_keys, u_nse, nrows);
    SF_CUDA_TRY(launched());
    keys_finish<<<1, 1, 0, s>>>(report, u_keys);
    SF_CUDA_TRY(launched());
  }
  if (ncols == 0) return SF_OK;
  vm_kernel<T><<<blocks_for(ncols), kThreads, 0, s>>>(out, arg, crow_t, row_t, perm, values, nse,
                                                      ncols, u_keys, u_values, u_nse, monoid, op);
  return launched();
}

template <class T>
sf_status csr_semiring_masked(Acc<T>* out, int64_t* arg, const int64_t* crow_m,
                              const int64_t* col_m, int64_t nse_m, const int64_t* crow_a,
                              const int64_t* col_a, const T* val_a, int64_t nse_a,
                              const int64_t* crow_bt, const int64_t* col_bt, const T* val_bt,
                              int64_t nse_bt, int64_t m, int64_t n, int monoid, int op,
                              void* stream) {
  SF_CUDA_FAIL_IF(!codes_ok<T>(monoid, op), SF_ERR_INVALID_ARGUMENT);
  SF_CUDA_FAIL_IF(m < 0 || n < 0 || nse_m < 0 || nse_a < 0 || nse_bt < 0, SF_ERR_NEGATIVE_SIZE);
  if (nse_m == 0) return SF_OK;
  SF_CUDA_FAIL_IF(out == nullptr || arg == nullptr || crow_m == nullptr || col_m == nullptr ||
                      crow_a == nullptr || crow_bt == nullptr,
                  SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse_a > 0 && (col_a == nullptr || val_a == nullptr), SF_ERR_NULL_POINTER);
  SF_CUDA_FAIL_IF(nse_bt > 0 && (col_bt == nullptr || val_bt == nullptr), SF_ERR_NULL_POINTER);
  masked_kernel<T><<<blocks_for(nse_m), kThreads, 0, as_stream(stream)>>>(
      out, arg, crow_m, col_m, nse_m, crow_a, col_a, val_a, nse_a, crow_bt, col_bt, val_bt,
      nse_bt, m, n, monoid, op);
  return launched();
}

}  // namespace entry

#include "generated/sf_cuda_semiring_entries.inc"
