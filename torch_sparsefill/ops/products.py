"""The Python half of the matrix products (aten_ext/ops/products/): their
fake kernels (registered only for CPU and CUDA), the autograd of spmm,
sddmm and spgemm (their ``<op>_autograd`` twins), and sparse_attention's
backward (register_backward_only: no jvp), with the block-diagonal layout and
row softmax that the attention route shares."""
import math

import torch
from torch.autograd.function import _SingleLevelFunction

from .common import below, register, register_backward_only, rows_of_segments, zero_or

_ops = torch.ops.sparsefill


# ---- fake kernels ------------------------------------------------------------------------

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



def _semiring_out(values, n):
    # out in the kernel's accumulator (double for floats, int64), arg int64
    acc = torch.int64 if values.dtype == torch.int64 else torch.float64
    return values.new_empty((n,), dtype=acc), values.new_empty((n,), dtype=torch.int64)


@torch.library.register_fake("sparsefill::semiring_mv")
def _semiring_mv_fake(crow_indices, col_indices, values, x, x_present, monoid, binop):
    return _semiring_out(values, crow_indices.shape[0] - 1)


@torch.library.register_fake("sparsefill::semiring_masked")
def _semiring_masked_fake(crow_m, col_m, crow_a, col_a, values_a, crow_b, col_b, values_b,
                          ncols, monoid, binop, by_dots):
    nse = torch.library.get_ctx().new_dynamic_size()
    acc = torch.int64 if values_a.dtype == torch.int64 else torch.float64
    return (crow_m.new_empty((crow_m.shape[0],), dtype=torch.int64),
            col_m.new_empty((nse,), dtype=torch.int64), values_a.new_empty((nse,), dtype=acc))


@torch.library.register_fake("sparsefill::ewise_merge")
def _ewise_merge_fake(crow_a, col_a, values_a, crow_b, col_b, values_b, ncols, binop,
                      a_default, b_default):
    nse = torch.library.get_ctx().new_dynamic_size()
    return (crow_a.new_empty((crow_a.shape[0],), dtype=torch.int64),
            col_a.new_empty((nse,), dtype=torch.int64), values_a.new_empty((nse,)))


@torch.library.register_fake("sparsefill::semiring_vm")
def _semiring_vm_fake(crow_indices, col_indices, values, u_keys, u_values, ncols, monoid, binop):
    return _semiring_out(values, ncols)



# ---- autograd -----------------------------------------------------------------------------

def _transposed_fill(fill):
    return fill.t() if fill.dim() == 2 else fill


class _Spmm(_SingleLevelFunction):
    """C = A B, A (m x k) CSR with a fill, B dense. With g = dL/dC:
    g_values = (g B^T) on A's pattern (SDDMM); g_fill = the sum of g B^T over
    the unspecified elements, per fill element (scalar, row or column fill);
    g_B = A^T g (the same product on the transposed pattern)."""

    @staticmethod
    def forward(crow, col, values, fill, b, ncols):
        return below(_ops.spmm, crow, col, values, fill, b, ncols)

    @staticmethod
    def setup_context(ctx, inputs, output):
        crow, col, values, fill, b, ncols = inputs
        ctx.save_for_backward(crow, col, values, fill, b)
        ctx.save_for_forward(crow, col, values, fill, b)
        ctx.ncols = ncols

    @staticmethod
    def backward(ctx, g):
        crow, col, values, fill, b = ctx.saved_tensors
        k = ctx.ncols
        _, _, need_v, need_f, need_b, _ = ctx.needs_input_grad
        g_values = g_fill = g_b = None
        if need_v or need_f:
            g_values = _ops.sddmm(crow, col, k, g, b)
        if need_f:
            if fill.numel() == 1:
                gf = torch.dot(g.sum(0), b.sum(0)) - g_values.sum()
            elif fill.shape[1] == 1:
                rows = rows_of_segments(crow, col.shape[0])
                per_row = g_values.new_zeros(crow.shape[0] - 1).index_add(0, rows, g_values)
                gf = (torch.mv(g, b.sum(0)) - per_row).unsqueeze(1)
            else:
                per_col = g_values.new_zeros(k).index_add(0, col.long(), g_values)
                gf = (torch.mv(b, g.sum(0)) - per_col).unsqueeze(0)
            g_fill = gf.reshape(fill.shape).to(fill.dtype)
        if need_b:
            crow_t, col_t, perm = _ops.csr_transpose(crow, col, k)
            g_b = _ops.spmm(crow_t, col_t, values.index_select(0, perm), _transposed_fill(fill),
                            g.contiguous(), crow.shape[0] - 1)
        return None, None, g_values if need_v else None, g_fill, g_b, None

    @staticmethod
    def jvp(ctx, _crow, _col, t_values, t_fill, t_b, _ncols):
        crow, col, values, fill, b = ctx.saved_tensors
        out = None
        if t_values is not None or t_fill is not None:
            out = _ops.spmm(crow, col, zero_or(t_values, values), zero_or(t_fill, fill), b,
                            ctx.ncols)
        if t_b is not None:
            term = _ops.spmm(crow, col, values, fill, t_b, ctx.ncols)
            out = term if out is None else out + term
        return out


class _Sddmm(_SingleLevelFunction):
    """out = (X Y^T) sampled on a pattern. With S the fill-0 CSR matrix of
    the gradient on that pattern: g_X = S Y, g_Y = S^T X (fill-aware SpMMs,
    differentiable themselves: spmm's backward, which calls sddmm, has an
    exact double backward)."""

    @staticmethod
    def forward(crow, col, ncols, x, y):
        return below(_ops.sddmm, crow, col, ncols, x, y)

    @staticmethod
    def setup_context(ctx, inputs, output):
        crow, col, ncols, x, y = inputs
        ctx.save_for_backward(crow, col, x, y)
        ctx.save_for_forward(crow, col, x, y)
        ctx.ncols = ncols

    @staticmethod
    def backward(ctx, gs):
        crow, col, x, y = ctx.saved_tensors
        _, _, _, need_x, need_y = ctx.needs_input_grad
        zero = gs.new_zeros(())
        g_x = g_y = None
        if need_x:
            g_x = _ops.spmm(crow, col, gs, zero, y.contiguous(), ctx.ncols)
        if need_y:
            crow_t, col_t, perm = _ops.csr_transpose(crow, col, ctx.ncols)
            g_y = _ops.spmm(crow_t, col_t, gs.index_select(0, perm), zero, x.contiguous(),
                            crow.shape[0] - 1)
        return None, None, None, g_x, g_y

    @staticmethod
    def jvp(ctx, _crow, _col, _ncols, t_x, t_y):
        crow, col, x, y = ctx.saved_tensors
        out = None
        if t_x is not None:
            out = _ops.sddmm(crow, col, ctx.ncols, t_x, y)
        if t_y is not None:
            term = _ops.sddmm(crow, col, ctx.ncols, x, t_y)
            out = term if out is None else out + term
        return out


def _sample_csr(crow_p, col_p, vals_p, crow, col, ncols):
    """The values of CSR matrix P at the positions of the pattern (crow, col):
    P's value where P stores one, else 0 (both patterns sorted within rows,
    so their linear indices increase: one searchsorted)."""
    lin_p = rows_of_segments(crow_p, col_p.shape[0]) * ncols + col_p.long()
    lin = rows_of_segments(crow, col.shape[0]) * ncols + col.long()
    # A sentinel past every position ends P: no branch on P's nse (data
    # under a tracer), an empty P included.
    lin_p = torch.cat([lin_p, lin_p.new_full((1,), torch.iinfo(torch.int64).max)])
    vals_p = torch.cat([vals_p, vals_p.new_zeros(1)])
    pos = torch.searchsorted(lin_p, lin)
    hit = lin_p.index_select(0, pos) == lin
    return torch.where(hit, vals_p.index_select(0, pos), vals_p.new_zeros(()))


class _Spgemm(_SingleLevelFunction):
    """C = A B, both fill 0, C's pattern structural (cancelling entries kept).
    With gC on C's pattern: g_A = gC B^T sampled at A's pattern, g_B = A^T gC
    sampled at B's, each a SpGEMM read at the operand's pattern."""

    @staticmethod
    def forward(crow_a, col_a, va, crow_b, col_b, vb, n):
        return below(_ops.spgemm, crow_a, col_a, va, crow_b, col_b, vb, n)

    @staticmethod
    def setup_context(ctx, inputs, output):
        crow_a, col_a, va, crow_b, col_b, vb, n = inputs
        crow_c, col_c, _ = output
        ctx.mark_non_differentiable(crow_c, col_c)
        ctx.save_for_backward(crow_a, col_a, va, crow_b, col_b, vb, crow_c, col_c)
        ctx.save_for_forward(crow_a, col_a, va, crow_b, col_b, vb)
        ctx.n = n

    @staticmethod
    def backward(ctx, _g_crow, _g_col, g):
        crow_a, col_a, va, crow_b, col_b, vb, crow_c, col_c = ctx.saved_tensors
        n, k = ctx.n, crow_b.shape[0] - 1
        g = g.contiguous()
        g_a = g_b = None
        if ctx.needs_input_grad[2]:
            crow_bt, col_bt, perm_b = _ops.csr_transpose(crow_b, col_b, n)
            crow_p, col_p, vp = _ops.spgemm(crow_c, col_c, g, crow_bt, col_bt,
                                            vb.index_select(0, perm_b), k)
            g_a = _sample_csr(crow_p, col_p, vp, crow_a, col_a, k)
        if ctx.needs_input_grad[5]:
            crow_at, col_at, perm_a = _ops.csr_transpose(crow_a, col_a, k)
            crow_q, col_q, vq = _ops.spgemm(crow_at, col_at, va.index_select(0, perm_a),
                                            crow_c, col_c, g, n)
            g_b = _sample_csr(crow_q, col_q, vq, crow_b, col_b, n)
        return None, None, g_a, None, None, g_b, None

    @staticmethod
    def jvp(ctx, _ca, _la, t_va, _cb, _lb, t_vb, _n):
        crow_a, col_a, va, crow_b, col_b, vb = ctx.saved_tensors
        t = None
        if t_va is not None:
            t = _ops.spgemm(crow_a, col_a, t_va, crow_b, col_b, vb, ctx.n)[2]
        if t_vb is not None:
            term = _ops.spgemm(crow_a, col_a, va, crow_b, col_b, t_vb, ctx.n)[2]
            t = term if t is None else t + term
        return None, None, t



# ---- sparse attention -------------------------------------------------------------------

def block_csr(b, r, c, nb, m, n):
    """CSR (crow, col) of the block-diagonal (nb*m, nb*n) matrix whose block
    i holds batch i's positions; b, r, c in coalesced (row-major) order."""
    rows = b * m + r
    return _ops.crow_from_rows(rows.contiguous(), nb * m), (b * n + c).contiguous(), rows



def row_softmax(scores, rows, nrows):
    """Softmax of `scores` within each row (segments by `rows`); the max is
    taken without gradient (softmax does not depend on the shift)."""
    with torch.no_grad():
        top = torch.full((nrows,), -math.inf, dtype=scores.dtype, device=scores.device)
        top = top.scatter_reduce(0, rows, scores, "amax", include_self=True)
        top = torch.where(torch.isfinite(top), top, torch.zeros_like(top))
    e = torch.exp(scores - top.index_select(0, rows))
    total = torch.zeros((nrows,), dtype=e.dtype, device=e.device).index_add(0, rows, e)
    # A row whose scores are all -inf has weights 0, as torch's SDPA gives
    # (its "safe softmax"); its e are 0, so dividing by 1 keeps 0 (and 0
    # gradients, where a 0/0 would make NaN ones).
    total = torch.where(total == 0, torch.ones_like(total), total)
    return e / total.index_select(0, rows)


# ---- the fused op's backward ----------------------------------------------------------

def _fused_setup(ctx, inputs, output):
    crow, col, bias, q, k, v, scale = inputs
    ctx.save_for_backward(crow, col, bias, q, k, v, output[1])
    ctx.scale = scale


def _fused_backward(ctx, g_out, g_lse):
    """sparse_attention's gradients. A plain backward is one op,
    ``sparse_attention_backward`` (C core ``sf_csr_attention_backward_*``:
    the weights from the saved lse, no Python per head). When the backward
    itself is recorded (``create_graph=True`` with anything requiring
    grad), the same formulas run in differentiable ops instead, so double
    backward is exact (:func:`_composed_backward`)."""
    crow, col, bias, q, k, v, lse = ctx.saved_tensors
    if g_out is None:
        g_out = torch.zeros(q.shape[:-1] + v.shape[-1:], dtype=q.dtype, device=q.device)
    recorded = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (bias, q, k, v, g_out, g_lse))
    if recorded:
        dq, dk, dv, ds = _composed_backward(crow, col, bias, q, k, v, ctx.scale, g_out, g_lse)
    else:
        dq, dk, dv, ds = _ops.sparse_attention_backward(crow, col, bias, q, k, v, lse, g_out,
                                                        g_lse, ctx.scale)
    if bias is None:
        ds = None
    elif ds.dim() > bias.dim():  # one bias served every batch member
        ds = ds.sum(0)
    return None, None, ds, dq, dk, dv, None


def _composed_backward(crow, col, bias, q, k, v, scale, g_out, g_lse):
    """sparse_attention's gradients in differentiable ops: the weights W are
    recomputed (sddmm + row softmax, O(nse)), then dV = W^T g, dW = g V^T on
    the pattern, dS = W (dW - rowsum(W dW)) (+ W g_lse), dQ = scale dS K,
    dK = scale dS^T Q, dscores = dS (per batch member, as the op's). A batch
    sharing the pattern is laid out as the block-diagonal pattern."""
    if q.dim() == 3:
        nb, L, E = q.shape
        S = k.shape[1]
        nse = col.shape[0]
        rows = _ops.rows_from_crow(crow)
        b = torch.arange(nb, device=col.device).repeat_interleave(nse)
        crow2, col2, _ = block_csr(b, rows.repeat(nb), col.repeat(nb), nb, L, S)
        if bias is not None:
            bias = bias.expand(nb, nse).reshape(-1)
        dq, dk, dv, ds = _composed_backward(
            crow2, col2, bias, q.reshape(nb * L, E), k.reshape(nb * S, E), v.reshape(nb * S, -1),
            scale, g_out.reshape(nb * L, -1), None if g_lse is None else g_lse.reshape(-1))
        return dq.view(q.shape), dk.view(k.shape), dv.view(v.shape), ds.view(nb, nse)
    m, ncols = q.shape[0], k.shape[0]
    rows = _ops.rows_from_crow(crow)
    scores = _ops.sddmm(crow, col, ncols, q, k) * scale
    if bias is not None:
        scores = scores + bias
    w = row_softmax(scores, rows, m)
    zero = torch.zeros((), dtype=w.dtype, device=w.device)
    g_out = g_out.contiguous()
    dv = _ops.dense_spmm(g_out.t(), crow, col, w, zero, ncols).t()
    dw = _ops.sddmm(crow, col, ncols, g_out, v)
    wdw = w * dw
    ds = wdw - w * torch.zeros((m,), dtype=w.dtype, device=w.device).index_add(
        0, rows, wdw).index_select(0, rows)
    if g_lse is not None:
        ds = ds + w * g_lse.index_select(0, rows)
    dq = _ops.spmm(crow, col, ds, zero, k, ncols) * scale
    dk = _ops.dense_spmm(q.t(), crow, col, ds, zero, ncols).t() * scale
    return dq, dk, dv, ds


register_backward_only("sparse_attention", _fused_setup, _fused_backward,
                       "call F.scaled_dot_product_attention with the SparseFillTensor mask "
                       "instead (it takes ops with a forward-mode derivative under these "
                       "transforms)")


def _backward_kernel_backward(ctx, *grads):
    """sparse_attention_backward is not differentiated: the fused op's
    backward calls it only when no graph of the backward is recorded, and
    takes differentiable ops otherwise. A direct call that needs its
    gradient is refused, never answered with a wrong one."""
    raise RuntimeError(
        "sparsefill::sparse_attention_backward is not differentiable; differentiate "
        "F.scaled_dot_product_attention (or sparsefill::sparse_attention) twice instead: its "
        "backward is recorded in differentiable ops when create_graph=True")


register_backward_only("sparse_attention_backward", lambda ctx, inputs, output: None,
                       _backward_kernel_backward,
                       "differentiate F.scaled_dot_product_attention instead")


for _name, _function in [("spmm", _Spmm), ("sddmm", _Sddmm), ("spgemm", _Spgemm)]:
    register(_name, _function)
