"""Every fake (meta) kernel the package registers: the ops whose output size
depends on the data, and those registered only for the CPU and CUDA keys
(the products). torch.compile and torch.library.opcheck trace through these.

The element-wise ops need none: they are CompositeImplicitAutograd and
decompose into ATen ops and union_plan (whose result size is unbacked).
"""
import torch


# ---- structural ops ------------------------------------------------------------
def _dynamic():
    return torch.library.get_ctx().new_dynamic_size()


@torch.library.register_fake("sparsefill::union_plan")
def _union_plan_fake(indices_a, indices_b, size):
    nse = _dynamic()
    return (indices_a.new_empty((indices_a.shape[0], nse)), indices_a.new_empty((nse,)),
            indices_a.new_empty((nse,)))


@torch.library.register_fake("sparsefill::union_values")
def _union_values_fake(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size):
    nse = _dynamic()
    return (indices_a.new_empty((indices_a.shape[0], nse)),
            values_a.new_empty((nse,) + tuple(values_a.shape[1:])),
            values_b.new_empty((nse,) + tuple(values_b.shape[1:])))


@torch.library.register_fake("sparsefill::index_select_plan")
def _index_select_plan_fake(indices, index, dim, size):
    nse = _dynamic()
    return indices.new_empty((indices.shape[0], nse)), indices.new_empty((nse,))


@torch.library.register_fake("sparsefill::coalesce_plan")
def _coalesce_plan_fake(indices, size):
    return indices.new_empty((indices.shape[0], _dynamic())), indices.new_empty((indices.shape[1],))


@torch.library.register_fake("sparsefill::coo_linearize")
def _coo_linearize_fake(indices, size):
    return indices.new_empty((indices.shape[1],), dtype=torch.int64)


@torch.library.register_fake("sparsefill::coo_delinearize")
def _coo_delinearize_fake(linear, size):
    return linear.new_empty((len(size), linear.shape[0]), dtype=torch.int64)


@torch.library.register_fake("sparsefill::rows_from_crow")
def _rows_from_crow_fake(crow_indices):
    return crow_indices.new_empty((_dynamic(),), dtype=torch.int64)


@torch.library.register_fake("sparsefill::crow_from_rows")
def _crow_from_rows_fake(rows, nrows):
    return rows.new_empty((nrows + 1,), dtype=torch.int64)


@torch.library.register_fake("sparsefill::coo_check")
def _coo_check_fake(indices, size):
    # Whether the indices are in range and coalesced is data: a traced
    # program runs the check (and refuses bad indices) when it runs.
    torch._check(indices.dim() == 2 and indices.shape[0] == len(size), lambda: (
        f"sparsefill: indices has shape {list(indices.shape)} but the tensor has {len(size)} "
        f"sparse dimensions (size {list(size)})"))
    return indices.new_empty((), dtype=torch.bool)


@torch.library.register_fake("sparsefill::csr_check")
def _csr_check_fake(crow_indices, col_indices, size):
    return None


# ---- matrix products ------------------------------------------------------------

@torch.library.register_fake("sparsefill::spmm")
def _spmm_fake(crow_indices, col_indices, values, fill, other, ncols):
    # The kernel's rules that read no data (products.h check_spmm_dtypes,
    # check_spmm_dense): a traced program refuses what eager refuses, at
    # tracing, instead of failing later in its backward.
    torch._check(values.dtype == fill.dtype == other.dtype, lambda: (
        f"sparsefill: spmm: expected values, fill and the dense operand to have the same "
        f"dtype, got {values.dtype}, {fill.dtype} and {other.dtype}"))
    torch._check(other.dim() == 2 and other.shape[0] == ncols, lambda: (
        f"sparsefill: spmm: the dense operand must be 2-D with {ncols} rows (the sparse "
        f"operand's columns), got shape {list(other.shape)}"))
    return values.new_empty((crow_indices.shape[0] - 1, other.shape[1]))


@torch.library.register_fake("sparsefill::csr_transpose")
def _csr_transpose_fake(crow_indices, col_indices, ncols):
    nse = col_indices.shape[0]
    return (crow_indices.new_empty((ncols + 1,), dtype=torch.int64),
            col_indices.new_empty((nse,), dtype=torch.int64),
            col_indices.new_empty((nse,), dtype=torch.int64))


@torch.library.register_fake("sparsefill::sddmm")
def _sddmm_fake(crow_indices, col_indices, ncols, x, y):
    return x.new_empty((col_indices.shape[0],))


@torch.library.register_fake("sparsefill::sparse_attention")
def _sparse_attention_fake(crow_indices, col_indices, bias, query, key, value, scale):
    rows = tuple(query.shape[:-1])  # ((nb,) m)
    return query.new_empty(rows + (value.shape[-1],)), query.new_empty(rows)


@torch.library.register_fake("sparsefill::sparse_attention_backward")
def _sparse_attention_backward_fake(crow_indices, col_indices, bias, query, key, value, lse,
                                    grad_out, grad_lse, scale):
    scores = tuple(query.shape[:-2]) + (col_indices.shape[0],)  # ((nb,) nse)
    return (query.new_empty(query.shape), key.new_empty(key.shape), value.new_empty(value.shape),
            query.new_empty(scores))


@torch.library.register_fake("sparsefill::spgemm")
def _spgemm_fake(crow_a, col_a, values_a, crow_b, col_b, values_b, n):
    nse = torch.library.get_ctx().new_dynamic_size()
    return (crow_a.new_empty((crow_a.shape[0],), dtype=torch.int64),
            col_a.new_empty((nse,), dtype=torch.int64), values_a.new_empty((nse,)))



@torch.library.register_fake("sparsefill::bsr_spmm")
def _bsr_spmm_fake(crow_indices, col_indices, values, fill, other, ncols):
    # bsr.h bsr_spmm_shape's rules that read no data.
    torch._check(values.dim() == 3, lambda: (
        f"sparsefill: bsr_spmm: values must be (nblocks, r, c), got shape {list(values.shape)}"))
    torch._check(values.dtype == fill.dtype == other.dtype, lambda: (
        f"sparsefill: bsr_spmm: expected values, fill and the dense operand to have the same "
        f"dtype, got {values.dtype}, {fill.dtype} and {other.dtype}"))
    torch._check(other.dim() == 2 and other.shape[0] == ncols, lambda: (
        f"sparsefill: bsr_spmm: the dense operand must be 2-D with {ncols} rows (the sparse "
        f"operand's columns), got shape {list(other.shape)}"))
    return values.new_empty(((crow_indices.shape[0] - 1) * values.shape[1], other.shape[1]))

# ---- reductions and softmax (reductions.h) ----------------------------------------

@torch.library.register_fake("sparsefill::slice_plan")
def _slice_plan_fake(indices, size, dims, compact):
    # The kept dims' rules of kept_dims() in reductions.h: the slices are the
    # kept sparse dims' positions; the elements need a permutation unless the
    # kept dims lead; compact plans hold only the slices that store something.
    kept_dims = [d for d in range(indices.shape[0]) if d not in set(dims)]
    nse = indices.shape[1]
    if not kept_dims:
        return (indices.new_empty((2,)), indices.new_empty((0,)),
                indices.new_empty((1 if compact else 0,)))
    nslices = 1
    for d in kept_dims:
        nslices *= size[d]
    nseg = _dynamic() if compact else nslices
    leading = kept_dims == list(range(len(kept_dims)))
    return (indices.new_empty((nseg + 1,)), indices.new_empty((0 if leading else nse,)),
            indices.new_empty((nseg if compact else 0,)))


def _segments(seg_ptr):
    return seg_ptr.shape[0] - 1


@torch.library.register_fake("sparsefill::seg_reduce")
def _seg_reduce_fake(values, fill, seg_ptr, n, reduce):
    # Floating and complex values keep their dtype; integers are summed in int64.
    keep = values.dtype.is_floating_point or values.dtype.is_complex
    return values.new_empty((_segments(seg_ptr), values.shape[1]),
                            dtype=values.dtype if keep else torch.int64)


@torch.library.register_fake("sparsefill::seg_max")
def _seg_max_fake(values, fill, seg_ptr, coord, n, is_min, split_ties):
    shape = (_segments(seg_ptr), values.shape[1])
    return (values.new_empty(shape), values.new_empty(shape, dtype=torch.int64),
            values.new_empty(shape, dtype=torch.int64))


@torch.library.register_fake("sparsefill::seg_softmax")
def _seg_softmax_fake(values, fill, seg_ptr, n, log):
    return values.new_empty(values.shape), values.new_empty((_segments(seg_ptr), values.shape[1]))


@torch.library.register_fake("sparsefill::seg_softmax_backward")
def _seg_softmax_backward_fake(out, out_fill, grad, grad_fill, seg_ptr, n, log):
    return out.new_empty(out.shape), out.new_empty(out_fill.shape)


@torch.library.register_fake("sparsefill::slot_softmax")
def _slot_softmax_fake(values, slot, fill, nslots, n, log):
    return values.new_empty(values.shape), values.new_empty((nslots, values.shape[1]))


@torch.library.register_fake("sparsefill::slot_softmax_backward")
def _slot_softmax_backward_fake(out, out_fill, grad, grad_fill, slot, n, log):
    return out.new_empty(out.shape), out.new_empty(out_fill.shape)


@torch.library.register_fake("sparsefill::slot_reduce")
def _slot_reduce_fake(values, slot, fill, nslots, n, reduce):
    keep = values.dtype.is_floating_point  # integers reduce in int64
    return (values.new_empty((nslots, values.shape[1]),
                             dtype=values.dtype if keep else torch.int64),
            slot.new_empty((nslots,), dtype=torch.int64))


# ---- from_dense: which elements differ from the fill is data ------------------------

@torch.library.register_fake("sparsefill::from_dense")
def _from_dense_fake(x, fill, sparse_dim):
    nse = _dynamic()
    return (x.new_empty((sparse_dim, nse), dtype=torch.int64),
            x.new_empty((nse,) + tuple(x.shape[sparse_dim:])), fill.new_empty(fill.shape, dtype=x.dtype))
