"""The Python half of the BSR product (aten_ext/ops/bsr/): bsr_spmm's fake
kernel and its backward, written in differentiable ops so that the double
backward is exact."""
import torch

from .common import register_backward_only

_ops = torch.ops.sparsefill


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


def _setup(ctx, inputs, output):
    crow, col, values, fill, other, ncols = inputs
    ctx.save_for_backward(crow, col, values, fill, other)
    ctx.ncols = ncols


def _backward(ctx, grad):
    """With G = dL/dC, C = A @ X, A's blocks V and fill f:
    dV[p] = G[block row of p] X[block column of p]^T (a batched product of
    the blocks' row slices), df = <1^T G, 1^T X> - sum(dV) (the products
    over the unspecified elements), dX = A^T G (the same op on the
    transposed block pattern, with the same fill)."""
    crow, col, values, fill, x = ctx.saved_tensors
    nblocks, r, c = values.shape
    nbrows, nbcols, n = crow.shape[0] - 1, ctx.ncols // c, x.shape[1]
    need_values, need_fill, need_x = ctx.needs_input_grad[2:5]
    g_values = g_fill = g_x = None
    grad = grad.contiguous()
    if need_values or need_fill:
        g_rows = grad.reshape(nbrows, r, n).index_select(0, _ops.rows_from_crow(crow))
        x_rows = x.reshape(nbcols, c, n).index_select(0, col)
        g_values = torch.bmm(g_rows, x_rows.transpose(1, 2))
    if need_fill:
        g_fill = (torch.dot(grad.sum(0), x.sum(0)) - g_values.sum()).reshape(fill.shape)
    if need_x:
        crow_t, col_t, perm = _ops.csr_transpose(crow, col, nbcols)
        g_x = _ops.bsr_spmm(crow_t, col_t, values.index_select(0, perm).transpose(1, 2), fill,
                            grad, nbrows * r)
    return None, None, g_values if need_values else None, g_fill, g_x, None


register_backward_only("bsr_spmm", _setup, _backward,
                       "multiply the SparseFillTensor instead (A @ x takes a product with a "
                       "forward-mode derivative under these transforms)")
