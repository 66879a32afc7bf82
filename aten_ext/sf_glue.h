// sf_glue.h -- what every torch-facing C++ file shares: turning C-core status
// codes into TORCH_CHECK errors that name the argument, argument checks on
// component tensors, and small autograd helpers. Header-only so that the
// project keeps only two translation units that include torch.
#pragma once

#include <torch/library.h>
#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "sparsefill_core.h"

namespace sparsefill {

using at::Tensor;

// Raise a Python RuntimeError (via TORCH_CHECK) for a failed core call.
// `what` names the argument(s) the core was validating.
inline void check_status(sf_status status, const char* what,
                         const sf_site* site = nullptr) {
  if (status == SF_OK) return;
  std::string where;
  if (site != nullptr && site->position >= 0) {
    where = " (at position " + std::to_string(site->position);
    if (site->dim >= 0) where += ", dimension " + std::to_string(site->dim);
    where += ", value " + std::to_string(site->value) + ")";
  }
  TORCH_CHECK(status != SF_ERR_NO_MEMORY, "sparsefill: out of memory while processing ", what);
  TORCH_CHECK(false, "sparsefill: invalid ", what, ": ",
              sf_status_string(status), where);
}

// Runs f(row_begin, row_end) -> sf_status over rows [0, m) of a CSR-like
// pointer array (crow_indices, or the segment pointers of a reduction) on
// torch's intra-op threads, in ranges of about equal work (stored elements
// times work_per_row, plus one unit per row), and raises the first non-OK
// status. Small inputs run on the calling thread. Results must not depend on
// the split: each row is written by exactly one range.
template <class F>
void for_row_ranges(const int64_t* ptr, int64_t m, int64_t work_per_row, const char* what, F f) {
  const int64_t nse = ptr[m];
  const int64_t total = nse * std::max<int64_t>(work_per_row, 1) + m;
  const int64_t threads = at::get_num_threads();
  if (threads <= 1 || total < 32768 || m < 2) {
    check_status(f(0, m), what);
    return;
  }
  const int64_t chunks = std::min<int64_t>(threads * 4, m);
  std::vector<int64_t> bound(chunks + 1, m);
  bound[0] = 0;
  // ptr[i] + i is non-decreasing for valid data; for invalid data the split
  // is merely uneven and the C core reports the error.
  for (int64_t c = 1; c < chunks; ++c) {
    const int64_t target = (nse + m) * c / chunks;
    int64_t lo = bound[c - 1], hi = m;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (ptr[mid] + mid < target) lo = mid + 1; else hi = mid;
    }
    bound[c] = lo;
  }
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

// Two components of one op must share a device (several GPUs).
inline void same_device(const Tensor& a, const char* name_a, const Tensor& b, const char* name_b) {
  TORCH_CHECK(a.device() == b.device(), "sparsefill: ", name_a, " is on ", a.device(), " but ",
              name_b, " is on ", b.device());
}

// An index tensor the C core can read: int64, contiguous, on the kernel's
// device type (CPU for the C core, CUDA for the CUDA core).
inline Tensor index_arg(const Tensor& t, const char* name, int64_t dim,
                        c10::DeviceType device = c10::DeviceType::CPU) {
  TORCH_CHECK(t.defined(), "sparsefill: ", name, " must be a tensor");
  TORCH_CHECK(t.layout() == at::kStrided, "sparsefill: ", name,
              " must be a strided tensor, got layout ", t.layout());
  TORCH_CHECK(!at::isFloatingType(t.scalar_type()) &&
                  !at::isComplexType(t.scalar_type()) &&
                  t.scalar_type() != at::kBool,
              "sparsefill: ", name, " must be an integer tensor, got dtype ",
              t.scalar_type());
  TORCH_CHECK(t.dim() == dim, "sparsefill: ", name, " must be ", dim,
              "-D, got shape ", t.sizes());
  TORCH_CHECK(t.device().type() == device, "sparsefill: ", name, " must be on the ",
              device == c10::DeviceType::CPU ? "CPU for the CPU" : "GPU for the CUDA",
              " kernel, got ", t.device());
  return t.to(at::kLong).contiguous();
}

inline std::vector<int64_t> sizes_arg(at::IntArrayRef size, const char* name) {
  for (size_t d = 0; d < size.size(); ++d) {
    TORCH_CHECK(size[d] >= 0, "sparsefill: ", name, " must be non-negative, got ",
                size, " (dimension ", d, ")");
  }
  int64_t numel = 0;
  check_status(sf_sizes_numel(&numel, size.data(), (int64_t)size.size()), name);
  return size.vec();
}

// The error of a failed COO index check (sf_coo_check and its CUDA twin),
// naming the bad index and its dimension.
inline void check_coo_status(sf_status st, const sf_site& site, const std::vector<int64_t>& size) {
  if (st == SF_ERR_INDEX_NEGATIVE || st == SF_ERR_INDEX_OUT_OF_RANGE) {
    TORCH_CHECK(false, "sparsefill: indices[", site.dim, ", ", site.position,
                "] = ", site.value,
                st == SF_ERR_INDEX_NEGATIVE ? " is negative"
                                            : " is out of range for size ",
                st == SF_ERR_INDEX_NEGATIVE ? std::string()
                                            : std::to_string(size[site.dim]),
                " of dimension ", site.dim);
  }
  check_status(st, "indices", &site);
}

// Checked CSR components: sizes, and crow/col as int64 on `device`.
struct CsrArgs {
  std::vector<int64_t> size;
  Tensor crow, col;
};

inline CsrArgs csr_args(const Tensor& crow_in, const Tensor& col_in, at::IntArrayRef size_in,
                        c10::DeviceType device) {
  auto size = sizes_arg(size_in, "size");
  TORCH_CHECK(size.size() >= 2, "sparsefill: a CSR tensor needs 2 sparse dimensions, got size ",
              size_in);
  Tensor crow = index_arg(crow_in, "crow_indices", 1, device);
  Tensor col = index_arg(col_in, "col_indices", 1, device);
  TORCH_CHECK(crow_in.scalar_type() == col_in.scalar_type(),
              "sparsefill: crow_indices and col_indices must have the same dtype, got ",
              crow_in.scalar_type(), " and ", col_in.scalar_type());
  TORCH_CHECK(crow.device() == col.device(), "sparsefill: crow_indices is on ", crow.device(),
              " but col_indices is on ", col.device());
  TORCH_CHECK(crow.numel() == size[0] + 1, "sparsefill: crow_indices must have length rows + 1 = ",
              size[0] + 1, ", got ", crow.numel());
  return {size, crow, col};
}

// The error of a failed CSR check (sf_csr_check and its CUDA twin).
inline void check_csr_status(sf_status st, const sf_site& site, const CsrArgs& a) {
  switch (st) {
    case SF_OK: return;
    case SF_ERR_CROW_FIRST:
      TORCH_CHECK(false, "sparsefill: crow_indices[0] must be 0, got ", site.value);
    case SF_ERR_CROW_DECREASING:
      TORCH_CHECK(false, "sparsefill: crow_indices must be non-decreasing, but crow_indices[",
                  site.position + 1, "] = ", site.value, " is smaller than the entry before it");
    case SF_ERR_CROW_LAST:
      TORCH_CHECK(false, "sparsefill: crow_indices[-1] must equal the number of stored elements (",
                  a.col.numel(), " = len(col_indices)), got ", site.value);
    case SF_ERR_INDEX_NEGATIVE:
    case SF_ERR_INDEX_OUT_OF_RANGE:
      TORCH_CHECK(false, "sparsefill: col_indices[", site.position, "] = ", site.value,
                  " is out of range for ", a.size[1], " columns");
    case SF_ERR_COL_UNSORTED:
      TORCH_CHECK(false, "sparsefill: col_indices must be strictly increasing within each row, "
                  "but col_indices[", site.position, "] = ", site.value,
                  " is not (unsorted or duplicate column)");
    default:
      check_status(st, "crow_indices/col_indices", &site);
  }
}

inline std::vector<int64_t> cat_sizes(at::IntArrayRef a, at::IntArrayRef b) {
  std::vector<int64_t> out(a.begin(), a.end());
  out.insert(out.end(), b.begin(), b.end());
  return out;
}

// Can a tensor of shape `from` be expanded to `to` (numpy broadcasting)?
// Templated on int64_t / SymInt sizes so that kernels traced with symbolic
// shapes (torch.compile, opcheck) can use it too.
template <typename From, typename To>
inline bool broadcasts_to(c10::ArrayRef<From> from, c10::ArrayRef<To> to) {
  if (from.size() > to.size()) return false;
  const size_t offset = to.size() - from.size();
  for (size_t d = 0; d < from.size(); ++d) {
    if (from[d] != 1 && from[d] != to[offset + d]) return false;
  }
  return true;
}

// Gradient `g` of something broadcast from `like`'s shape: reduce it back to
// that shape (expanding first when g is the smaller one, e.g. a scalar grad).
inline Tensor grad_to(const Tensor& g, const Tensor& like) {
  if (!g.defined()) return g;
  auto shape = like.sym_sizes();
  if (g.sym_sizes().equals(shape)) return g;
  auto full = at::infer_size_symint(g.sym_sizes(), shape);
  return at::sum_to(g.expand_symint(full), shape);
}

// ---- per-slice fills (RFC.md 1.5) -----------------------------------------
// A dense-part fill has at most dense_dim dims; a per-slice fill has the
// tensor's full rank (sparse_dim + dense_dim) and size 1 in every dim it does
// not vary along.
inline bool is_per_slice_fill(const Tensor& fill, const Tensor& values) {
  return fill.dim() > values.dim() - 1;
}

// Row of the per-slice fill's sparse part (flattened, row-major) that covers
// each sparse position in `indices` (sparse_dim, n): dims where the fill has
// size 1 contribute nothing. O(n * sparse_dim); out-of-range rows are caught
// by the index_select / index_add that use them.
inline Tensor fill_slot(const Tensor& fill, const Tensor& indices, int64_t* nslots = nullptr) {
  const int64_t sd = indices.size(0);
  TORCH_CHECK(fill.dim() >= sd, "sparsefill: a per-slice fill of shape ", fill.sizes(),
              " has fewer dimensions than the ", sd, " sparse dimensions");
  std::vector<int64_t> coef(sd);
  int64_t stride = 1;
  for (int64_t d = sd - 1; d >= 0; --d) {
    coef[d] = fill.size(d) == 1 ? 0 : stride;
    stride *= fill.size(d);
  }
  if (nslots != nullptr) *nslots = stride;
  if (sd == 0) return at::zeros({indices.size(1)}, indices.options().dtype(at::kLong));
  Tensor c = at::tensor(coef, indices.options().dtype(at::kLong)).view({sd, 1});
  return (indices.to(at::kLong) * c).sum(0);
}

// The fill's rows at the sparse positions `indices`: (n, *dense_shape),
// differentiable with respect to `fill`. Works for both kinds of fill.
inline Tensor fill_rows_at(const Tensor& fill, const Tensor& indices,
                           at::IntArrayRef dense_shape) {
  const int64_t n = indices.size(1);
  const int64_t sd = indices.size(0);
  if (fill.dim() <= (int64_t)dense_shape.size()) {
    return fill.expand(dense_shape).unsqueeze(0).expand(cat_sizes({n}, dense_shape));
  }
  TORCH_CHECK(fill.dim() == sd + (int64_t)dense_shape.size(), "sparsefill: a per-slice fill of "
              "shape ", fill.sizes(), " must have sparse_dim + dense_dim = ",
              sd + (int64_t)dense_shape.size(), " dimensions");
  int64_t nslots = 1;
  Tensor slot = fill_slot(fill, indices, &nslots);
  Tensor rows = fill.reshape(cat_sizes({nslots}, fill.sizes().slice(sd))).index_select(0, slot);
  return rows.expand(cat_sizes({n}, dense_shape));
}

// Gradient `g_rows` (n, *dense) of fill_rows_at(fill, indices, ...), summed
// back onto the fill's shape.
inline Tensor fill_rows_grad(const Tensor& g_rows, const Tensor& fill, const Tensor& indices) {
  const int64_t sd = indices.size(0);
  const int64_t dense_dim = g_rows.dim() - 1;
  if (fill.dim() <= dense_dim) return grad_to(g_rows.sum(0), fill);
  int64_t nslots = 1;
  Tensor slot = fill_slot(fill, indices, &nslots);
  Tensor acc = at::zeros(cat_sizes({nslots}, g_rows.sizes().slice(1)), g_rows.options())
                   .index_add(0, slot, g_rows);
  return grad_to(acc.view(cat_sizes(fill.sizes().slice(0, sd), g_rows.sizes().slice(1))), fill);
}

// ---- matrix products' argument rules (products.cpp and products_cuda.cpp) --

enum class FillKind { Scalar, Row, Col };

// How A's fill varies, checked against A's shape (m x k).
inline FillKind fill_kind(const Tensor& fill, int64_t m, int64_t k) {
  if (fill.dim() <= 2 && fill.numel() == 1) return FillKind::Scalar;
  TORCH_CHECK(fill.dim() == 2,
              "sparsefill: a matrix product needs a scalar, per-row (m, 1) or per-column "
              "(1, k) fill, got a fill of shape ", fill.sizes());
  if (fill.size(0) == m && fill.size(1) == 1) return FillKind::Row;
  if (fill.size(0) == 1 && fill.size(1) == k) return FillKind::Col;
  TORCH_CHECK(false, "sparsefill: a matrix product supports a per-row (", m, ", 1) or per-column (1, ",
              k, ") fill of an ", m, " x ", k, " operand, got a fill of shape ", fill.sizes());
}

// sddmm's operands: rows from crow, x (rows x n) and y (ncols x n) of one dtype.
inline void check_sddmm_shapes(const Tensor& crow, int64_t ncols, const Tensor& x_in,
                               const Tensor& y_in) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: sddmm: crow_indices must not be empty");
  TORCH_CHECK(x_in.dim() == 2 && y_in.dim() == 2 && x_in.size(0) == crow.numel() - 1 &&
                  y_in.size(0) == ncols && x_in.size(1) == y_in.size(1) &&
                  x_in.scalar_type() == y_in.scalar_type(),
              "sparsefill: sddmm: expected x (rows x n) and y (ncols x n) of one dtype for ",
              crow.numel() - 1, " rows and ", ncols, " columns, got ", x_in.sizes(), " and ",
              y_in.sizes());
}

// The row stride to give a kernel for a row-major dense operand B (unit
// column stride, checked by the caller). torch leaves the stride of a size-1
// dim arbitrary (even 0, or below n after .contiguous()); with one row, any
// stride >= n reads the same elements.
inline int64_t dense_row_stride(const Tensor& b) {
  return b.size(0) <= 1 ? std::max<int64_t>(b.size(1), 1) : b.stride(0);
}

// fp16 and bf16 products accumulate in fp32.
inline at::ScalarType compute_type(at::ScalarType t) {
  return (t == at::kHalf || t == at::kBFloat16) ? at::kFloat : t;
}

// The dtypes of matrix products' floating operands (the device is each
// kernel's own rule).
inline void check_product_dtype(const Tensor& t, const char* name) {
  const auto st = t.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kDouble || st == at::kHalf || st == at::kBFloat16,
              "sparsefill: matrix products support float32, float64, float16 and bfloat16, got ",
              name, " of dtype ", st);
}

// A CSR operand's rules that read no index data: crow (m + 1), col (nse),
// values (nse, 1-D); returns m. Each kernel then checks crow's ends where
// the data lives.
inline int64_t csr_operand_shape(const Tensor& crow, const Tensor& col, const Tensor& values,
                                 const char* what) {
  TORCH_CHECK(crow.numel() >= 1, "sparsefill: ", what, " crow_indices must not be empty");
  TORCH_CHECK(values.dim() == 1, "sparsefill: ", what,
              " must have 1-D values (hybrid operands are not supported by matrix products), "
              "got values of shape ", values.sizes());
  TORCH_CHECK(col.numel() == values.numel(), "sparsefill: ", what, " has ", col.numel(),
              " column indices but ", values.numel(), " values");
  return crow.numel() - 1;
}

// ---- segment ops' argument rules (reductions.cpp and reductions_cuda.cpp) --

struct Segs {
  Tensor values, fill, seg_ptr;
  int64_t nseg, w, fill_stride;
};

// The rules that read no data: shapes, devices (`device`: the kernel's),
// fill rows. seg_ptr's ends are checked by each kernel where seg_ptr lives
// (check_seg_ends).
inline Segs seg_shape_args(const Tensor& values, const Tensor& fill, const Tensor& seg_ptr_in,
                           int64_t n, const char* op, c10::DeviceType device) {
  TORCH_CHECK(values.dim() == 2, "sparsefill: ", op, ": values must be 2-D [nse, w], got shape ",
              values.sizes());
  TORCH_CHECK(fill.dim() == 2 && fill.size(1) == values.size(1),
              "sparsefill: ", op, ": fill must be [nseg or 1, ", values.size(1), "], got shape ",
              fill.sizes());
  const bool cpu = device == c10::DeviceType::CPU;
  TORCH_CHECK(values.device().type() == device && fill.device().type() == device, "sparsefill: ",
              op, cpu ? ": the CPU kernel needs CPU tensors" : ": the CUDA kernel needs CUDA tensors");
  same_device(values, "values", fill, "fill");
  TORCH_CHECK(n >= 0, "sparsefill: ", op, ": the slice length n must be non-negative, got ", n);
  Tensor seg_ptr = index_arg(seg_ptr_in, "seg_ptr", 1, device);
  same_device(values, "values", seg_ptr, "seg_ptr");
  TORCH_CHECK(seg_ptr.numel() >= 1, "sparsefill: ", op, ": seg_ptr must not be empty");
  const int64_t nseg = seg_ptr.numel() - 1;
  TORCH_CHECK(fill.size(0) == nseg || fill.size(0) == 1, "sparsefill: ", op, ": fill has ",
              fill.size(0), " rows for ", nseg, " segments (needs ", nseg, " or 1)");
  const int64_t w = values.size(1);
  return {values.contiguous(), fill.to(values.scalar_type()).contiguous(), seg_ptr, nseg, w,
          fill.size(0) == 1 ? 0 : w};
}

// seg_ptr's ends, as read by the kernel.
inline void check_seg_ends(int64_t first, int64_t last, const Segs& a, const char* op) {
  TORCH_CHECK(first == 0 && last == a.values.size(0), "sparsefill: ", op,
              ": seg_ptr must run from 0 to the number of stored rows ", a.values.size(0),
              ", got ", first, " .. ", last);
}

// The type segment ops compute in: half types in float, integers (where the
// op takes them) in int64.
inline at::ScalarType compute_type(at::ScalarType t, const char* op, bool ints) {
  if (t == at::kDouble || t == at::kFloat) return t;
  if (t == at::kHalf || t == at::kBFloat16) return at::kFloat;
  TORCH_CHECK(ints && (at::isIntegralType(t, /*includeBool=*/true)), "sparsefill: ", op,
              " does not support dtype ", t);
  return at::kLong;
}

}  // namespace sparsefill
