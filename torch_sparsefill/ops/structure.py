"""The Python half of the structure ops (aten_ext/ops/structure/): fake
kernels of the ops whose output size depends on the data, and from_dense's
autograd (its ``from_dense_autograd`` twin). Every other structure op is
composite or has no gradient."""
import torch
from torch.autograd.function import _SingleLevelFunction

from .common import below, dynamic_size, register

_ops = torch.ops.sparsefill


# ---- fake kernels: the size of a pattern is data ------------------------------------

@torch.library.register_fake("sparsefill::union_plan")
def _union_plan_fake(indices_a, indices_b, size):
    nse = dynamic_size()
    return (indices_a.new_empty((indices_a.shape[0], nse)), indices_a.new_empty((nse,)),
            indices_a.new_empty((nse,)))


@torch.library.register_fake("sparsefill::union_values")
def _union_values_fake(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size):
    nse = dynamic_size()
    return (indices_a.new_empty((indices_a.shape[0], nse)),
            values_a.new_empty((nse,) + tuple(values_a.shape[1:])),
            values_b.new_empty((nse,) + tuple(values_b.shape[1:])))


@torch.library.register_fake("sparsefill::union_binop")
def _union_binop_fake(indices_a, values_a, fill_a, indices_b, values_b, fill_b, size, binop):
    nse = dynamic_size()
    return indices_a.new_empty((2, nse)), values_a.new_empty((nse,))


@torch.library.register_fake("sparsefill::index_select_plan")
def _index_select_plan_fake(indices, index, dim, size):
    nse = dynamic_size()
    return indices.new_empty((indices.shape[0], nse)), indices.new_empty((nse,))


@torch.library.register_fake("sparsefill::coalesce_plan")
def _coalesce_plan_fake(indices, size):
    return indices.new_empty((indices.shape[0], dynamic_size())), indices.new_empty((indices.shape[1],))


@torch.library.register_fake("sparsefill::coo_linearize")
def _coo_linearize_fake(indices, size):
    return indices.new_empty((indices.shape[1],), dtype=torch.int64)


@torch.library.register_fake("sparsefill::coo_delinearize")
def _coo_delinearize_fake(linear, size):
    return linear.new_empty((len(size), linear.shape[0]), dtype=torch.int64)


@torch.library.register_fake("sparsefill::rows_from_crow")
def _rows_from_crow_fake(crow_indices):
    return crow_indices.new_empty((dynamic_size(),), dtype=torch.int64)


@torch.library.register_fake("sparsefill::csr_find")
def _csr_find_fake(crow_indices, col_indices, rows, cols, ncols):
    return rows.new_empty((rows.shape[0],), dtype=torch.int64)


@torch.library.register_fake("sparsefill::lane_sort_fill")
def _lane_sort_fill_fake(crow_indices, col_indices, values, fill, n, descending, with_indices):
    nse = values.shape[0]
    return (crow_indices.new_empty((nse,), dtype=torch.int64),
            crow_indices.new_empty((nse,), dtype=torch.int64),
            crow_indices.new_empty((crow_indices.shape[0] - 1, n if with_indices else 0),
                                   dtype=torch.int64))


@torch.library.register_fake("sparsefill::lane_topk_fill")
def _lane_topk_fill_fake(crow_indices, col_indices, values, fill, n, k, descending):
    shape = (crow_indices.shape[0] - 1, k)
    return (crow_indices.new_empty(shape, dtype=torch.int64),
            crow_indices.new_empty(shape, dtype=torch.int64))


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


# ---- from_dense: which elements differ from the fill is data ------------------------

@torch.library.register_fake("sparsefill::from_dense")
def _from_dense_fake(x, fill, sparse_dim):
    nse = dynamic_size()
    return (x.new_empty((sparse_dim, nse), dtype=torch.int64),
            x.new_empty((nse,) + tuple(x.shape[sparse_dim:])), fill.new_empty(fill.shape, dtype=x.dtype))


# ---- from_dense's autograd ---------------------------------------------------------------

def _from_dense_projection(self_shape, sparse_dim, indices, fill_shape, per_slice, dtype, device):
    """What from_dense's fill stands for: per element of self (rows x dense
    part), the share of the fill's gradient it takes (1 / the number of
    unspecified elements the fill element covers), 0 at stored positions;
    the linear positions of the stored ones."""
    sparse_size, dense_shape = self_shape[:sparse_dim], self_shape[sparse_dim:]
    rows = 1
    for s in sparse_size:
        rows *= s
    # No branch on nse (data under a tracer): both ops take an empty pattern.
    linear = _ops.coo_linearize(indices, list(sparse_size))
    cover = torch.ones((rows, *dense_shape), dtype=dtype, device=device).index_fill(0, linear, 0)
    if per_slice:
        count = cover.view(self_shape).sum_to_size(fill_shape).clamp_min(1)
        share = cover.view(self_shape) / count
    else:
        # a dense-part fill: each element covers the unspecified positions
        fill_numel = 1
        for s in fill_shape:
            fill_numel *= s
        dense_numel = 1
        for s in dense_shape:
            dense_numel *= s
        nse = indices.shape[1]
        per_element = torch.sym_max((rows - nse) * (dense_numel // max(fill_numel, 1)), 1)
        share = cover.view(self_shape) / per_element
    return share, linear


class _FromDense(_SingleLevelFunction):
    """Gradient to self: stored positions get their value's gradient; the
    fill's gradient is shared equally among the unspecified elements it
    covers (the projection of RFC.md "Gradients"). jvp is its transpose: the
    fill's tangent is the mean tangent over those elements."""

    @staticmethod
    def forward(self, fill, sparse_dim):
        return below(_ops.from_dense, self, fill, sparse_dim)

    @staticmethod
    def setup_context(ctx, inputs, output):
        self, fill, sparse_dim = inputs
        indices, _, fill_out = output
        ctx.mark_non_differentiable(indices)
        ctx.save_for_backward(indices)
        ctx.save_for_forward(indices)
        ctx.sparse_dim = sparse_dim
        ctx.self_shape = tuple(self.shape)
        ctx.fill_shape = tuple(fill_out.shape)
        dense_dim = self.dim() - sparse_dim
        # a per-slice fill (RFC.md#per-slice-fills) has sparse dims of its own
        ctx.per_slice = fill_out.dim() > dense_dim

    @staticmethod
    def _projection(ctx, like):
        indices, = ctx.saved_tensors
        return _from_dense_projection(ctx.self_shape, ctx.sparse_dim, indices, ctx.fill_shape,
                                      ctx.per_slice, like.dtype, like.device)

    @staticmethod
    def backward(ctx, _g_indices, g_values, g_fill):
        share, linear = _FromDense._projection(ctx, g_values)
        shape = ctx.self_shape
        rows = (share * g_fill).reshape(-1, *shape[ctx.sparse_dim:])
        return rows.index_put((linear,), g_values).view(shape), None, None

    @staticmethod
    def jvp(ctx, t_self, _t_fill, _sparse_dim):
        share, linear = _FromDense._projection(ctx, t_self)
        shape = ctx.self_shape
        t_fill = (share * t_self).sum_to_size(ctx.fill_shape)
        rows = t_self.reshape(-1, *shape[ctx.sparse_dim:])
        t_values = rows.index_select(0, linear)
        return None, t_values, t_fill


register("from_dense", _FromDense)
