"""The autograd of the ops with a derivative of their own: spmm, sddmm,
spgemm, seg_reduce, seg_max, seg_softmax, slot_reduce, slot_softmax, from_dense
(every other op is composite and differentiated through ATen).

Each op's Autograd kernel (aten_ext/ops/autograd/) calls the op below
autograd when no gradient is tracked (C++ only, no Python on that path);
otherwise it calls the op's twin ``<op>_autograd``, whose one kernel,
registered here, applies a Function of this module:

- ``backward`` in differentiable ops (the library's ops and ATen), so a
  double backward is exact; the fill's gradient is always included;
- ``jvp``: forward-mode AD (``torch.autograd.forward_ad``, ``torch.func.jvp``);
- torch.func (``grad``, ``vjp``, ``jacrev``, ``jacfwd``, ``vmap`` of those):
  the Function is applied at the transform's level, as
  ``torch._functorch.autograd_function`` applies an ``autograd.Function``
  (one level at a time, ``_SingleLevelFunction``): the Autograd kernel runs
  inside the transform, below the point where ``Function.apply`` could hand
  it to functorch. ``vmap`` of the op itself goes through functorch's
  batching fallback (a loop over the batch).

Example::

    >>> import torch, torch_sparsefill as sf
    >>> A = sf.sparse_csr_tensor([0, 1, 2], [1, 0], [2., 3.], (2, 2), fill_value=1.)
    >>> W = torch.ones(2, 2, requires_grad=True)
    >>> torch.func.grad(lambda W: (A @ W).sum())(W)
    tensor([[4., 4.],
            [3., 3.]])
"""
import contextlib

import torch
import torch.autograd.forward_ad as fwAD
from torch._C import _functorch
from torch.autograd.function import _SingleLevelFunction

_ops = torch.ops.sparsefill
_LIB = torch.library.Library("sparsefill", "IMPL")


def _below(op, *args):
    """The op's own kernel (below its Autograd kernel): a Function's forward.
    Inside a torch.func transform the call goes on to the levels below this
    one, which record it (their own Function) as they would any op: with
    gradients on there, as torch._functorch.autograd_function's forward does
    (a Function's forward runs with them off)."""
    if not torch._C._are_functorch_transforms_active():
        with torch._C._AutoDispatchBelowAutograd():
            return op(*args)
    with torch.enable_grad(), fwAD._set_fwd_grad_enabled(True), \
            torch._C._AutoDispatchBelowAutograd():
        return op(*args)


@contextlib.contextmanager
def _at_this_level():
    # A Function applied inside a torch.func transform records at the
    # transform's level only (functorch allows it while the flag is set).
    if not torch._C._are_functorch_transforms_active():
        yield
        return
    before = _functorch.get_single_level_autograd_function_allowed()
    _functorch.set_single_level_autograd_function_allowed(True)
    try:
        yield
    finally:
        _functorch.set_single_level_autograd_function_allowed(before)


def _register(name, function):
    def kernel(*args):
        with _at_this_level():
            return function.apply(*args)
    kernel.__name__ = f"{name}_autograd"
    _LIB.impl(f"{name}_autograd", kernel, "CompositeImplicitAutograd")


def _differentiated():
    """Whether what a backward computes may itself be differentiated (a
    graph recorded, a forward-mode tangent, a torch.func transform): then it
    must use differentiable ops, not a C-core kernel without a derivative."""
    return (torch.is_grad_enabled() or torch._C._are_functorch_transforms_active()
            or fwAD._current_level >= 0)


def _rows_of_segments(seg_ptr, nse):
    """The segment of each stored row (seg_ptr a CSR row pointer), sized by
    nse so that traced shapes stay those of the values."""
    p = seg_ptr.long()
    return torch.repeat_interleave(torch.arange(p.shape[0] - 1, device=p.device),
                                   p[1:] - p[:-1], output_size=nse)


def _unspecified(seg_ptr, n, dtype):
    """Per segment: how many of its n elements the fill stands for, [nseg, 1]."""
    return (n - (seg_ptr[1:] - seg_ptr[:-1])).unsqueeze(1).to(dtype)


def _slot_unspecified(slot, nslots, n, dtype):
    """Per slot: how many of its n elements the fill stands for, [nslots, 1]
    (the stored rows counted by index_add: sized by nslots, traceable)."""
    count = torch.zeros(nslots, dtype=dtype, device=slot.device).index_add(
        0, slot, torch.ones(slot.shape[0], dtype=dtype, device=slot.device))
    return (n - count).unsqueeze(1)


def _to_fill_rows(g, fill):
    """A gradient per segment, summed to the fill's rows (one shared row, or one per segment)."""
    return g.sum(0, keepdim=True) if fill.shape[0] == 1 and g.shape[0] != 1 else g


def _zero_or(t, like):
    return torch.zeros_like(like) if t is None else t


# ---- products -----------------------------------------------------------------------

def _transposed_fill(fill):
    return fill.t() if fill.dim() == 2 else fill


class _Spmm(_SingleLevelFunction):
    """C = A B, A (m x k) CSR with a fill, B dense. With g = dL/dC:
    g_values = (g B^T) on A's pattern (SDDMM); g_fill = the sum of g B^T over
    the unspecified elements, per fill element (scalar, row or column fill);
    g_B = A^T g (the same product on the transposed pattern)."""

    @staticmethod
    def forward(crow, col, values, fill, b, ncols):
        return _below(_ops.spmm, crow, col, values, fill, b, ncols)

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
                rows = _rows_of_segments(crow, col.shape[0])
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
            out = _ops.spmm(crow, col, _zero_or(t_values, values), _zero_or(t_fill, fill), b,
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
        return _below(_ops.sddmm, crow, col, ncols, x, y)

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
    lin_p = _rows_of_segments(crow_p, col_p.shape[0]) * ncols + col_p.long()
    lin = _rows_of_segments(crow, col.shape[0]) * ncols + col.long()
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
        return _below(_ops.spgemm, crow_a, col_a, va, crow_b, col_b, vb, n)

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


# ---- segment reductions -------------------------------------------------------------

def _prod_partials(values, fill, seg_ptr, n):
    """For prod over segments (stored rows and u copies of the fill row):
    the derivative of each segment's product with respect to each stored
    value ([nse, C]) and to the fill element ([nseg, C]), written so that
    their own derivatives are exact where values or the fill are 0 (the
    product of the others, never a division by 0): with Z the product of the
    zero values, N that of the others and F = fill^u, a nonzero value's
    partial is N / v Z F; a zero's is N F times the product of the other zeros
    (1 if it is the only one, the other zero if there are two, else 0)."""
    nse, dtype = values.shape[0], values.dtype
    rows = _rows_of_segments(seg_ptr, nse)
    u = _unspecified(seg_ptr, n, dtype)
    nseg = seg_ptr.shape[0] - 1
    zero = values == 0
    ones_fill = values.new_ones((1, values.shape[1]))
    zeros_fill = values.new_zeros((1, values.shape[1]))
    one = values.new_ones(())
    nonzero_prod = _ops.seg_reduce(torch.where(zero, one, values), ones_fill, seg_ptr, n, "prod")
    zero_prod = _ops.seg_reduce(torch.where(zero, values, one), ones_fill, seg_ptr, n, "prod")
    zero_sum = _ops.seg_reduce(torch.where(zero, values, 0), zeros_fill, seg_ptr, n, "sum")
    zeros = _ops.seg_reduce(zero.to(dtype), zeros_fill, seg_ptr, n, "sum")
    # fill^u, with a base of 1 where u = 0 so that no derivative meets 0^-1
    f = torch.where(u > 0, fill.expand(nseg, values.shape[1]), one)
    fill_pow = torch.pow(f, u)
    d_fill_pow = u * torch.pow(f, torch.where(u > 0, u - 1, 0))
    z_rows = zeros.index_select(0, rows)
    others_zero = torch.where(z_rows == 1, one, torch.where(
        z_rows == 2, zero_sum.index_select(0, rows) - values, values.new_zeros(())))
    safe = torch.where(zero, one, values)
    np_rows, f_rows = nonzero_prod.index_select(0, rows), fill_pow.index_select(0, rows)
    d_values = torch.where(zero, np_rows * f_rows * others_zero,
                           np_rows / safe * zero_prod.index_select(0, rows) * f_rows)
    d_fill = nonzero_prod * zero_prod * d_fill_pow
    return rows, u, d_values, d_fill


class _SegReduce(_SingleLevelFunction):
    """sum: each stored value gets its segment's gradient, the fill it u times;
    prod: the partials of _prod_partials."""

    @staticmethod
    def forward(values, fill, seg_ptr, n, reduce):
        return _below(_ops.seg_reduce, values, fill, seg_ptr, n, reduce)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, fill, seg_ptr, n, reduce = inputs
        ctx.save_for_backward(values, fill, seg_ptr)
        ctx.save_for_forward(values, fill, seg_ptr)
        ctx.n, ctx.reduce = n, reduce

    @staticmethod
    def backward(ctx, g):
        values, fill, seg_ptr = ctx.saved_tensors
        if ctx.reduce == "sum":
            rows = _rows_of_segments(seg_ptr, values.shape[0])
            u = _unspecified(seg_ptr, ctx.n, g.dtype)
            return g.index_select(0, rows), _to_fill_rows(g * u, fill), None, None, None
        rows, _, d_values, d_fill = _prod_partials(values, fill, seg_ptr, ctx.n)
        return (g.index_select(0, rows) * d_values, _to_fill_rows(g * d_fill, fill),
                None, None, None)

    @staticmethod
    def jvp(ctx, t_values, t_fill, _seg, _n, _reduce):
        values, fill, seg_ptr = ctx.saved_tensors
        t_values, t_fill = _zero_or(t_values, values), _zero_or(t_fill, fill)
        if ctx.reduce == "sum":
            return _ops.seg_reduce(t_values, t_fill, seg_ptr, ctx.n, "sum")
        _, _, d_values, d_fill = _prod_partials(values, fill, seg_ptr, ctx.n)
        stored = _ops.seg_reduce(d_values * t_values, values.new_zeros((1, values.shape[1])),
                                 seg_ptr, ctx.n, "sum")
        return stored + d_fill * t_fill


class _SegMax(_SingleLevelFunction):
    """split_ties (amax, amin, max/min of everything): the gradient is shared
    evenly by every element equal to the result, unspecified ones included,
    as torch does (a NaN result equals no element: 0 / 0, NaN, as dense).
    Otherwise (max/min along a dim) it goes to the one element the returned
    winner names (a stored row, or the fill when < 0)."""

    @staticmethod
    def forward(values, fill, seg_ptr, coord, n, is_min, split_ties):
        return _below(_ops.seg_max, values, fill, seg_ptr, coord, n, is_min, split_ties)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, fill, seg_ptr, coord, n, is_min, split_ties = inputs
        out, winner, index = output
        ctx.mark_non_differentiable(winner, index)
        ctx.save_for_backward(values, fill, seg_ptr, out, winner)
        ctx.save_for_forward(values, fill, seg_ptr, out, winner)
        ctx.n, ctx.split_ties = n, split_ties

    @staticmethod
    def _ties(ctx):
        values, fill, seg_ptr, out, winner = ctx.saved_tensors
        rows = _rows_of_segments(seg_ptr, values.shape[0])
        u = _unspecified(seg_ptr, ctx.n, out.dtype)
        tie_v = values == out.index_select(0, rows)
        tie_f = (fill.expand_as(out) == out) & (u > 0)
        count = (out.new_zeros(out.shape).index_add(0, rows, tie_v.to(out.dtype))
                 + tie_f.to(out.dtype) * u)
        return rows, u, tie_v, tie_f, count

    @staticmethod
    def backward(ctx, g, _g_winner, _g_index):
        values, fill, seg_ptr, out, winner = ctx.saved_tensors
        none = (None,) * 5
        if ctx.split_ties:
            rows, u, tie_v, tie_f, count = _SegMax._ties(ctx)
            # products, not where: 0 * (g / 0) is NaN where nothing ties
            share = g / count
            g_values = tie_v.to(g.dtype) * share.index_select(0, rows)
            g_fill = torch.where(u > 0, tie_f.to(g.dtype) * share * u, 0)
            return (g_values, _to_fill_rows(g_fill, fill)) + none
        from_fill = winner < 0
        g_fill = torch.where(from_fill, g, 0)
        g_values = torch.zeros_like(values).scatter_add(
            0, winner.clamp_min(0), torch.where(from_fill, 0, g)) if values.shape[0] else \
            torch.zeros_like(values)
        return (g_values, _to_fill_rows(g_fill, fill)) + none

    @staticmethod
    def jvp(ctx, t_values, t_fill, *_):
        values, fill, seg_ptr, out, winner = ctx.saved_tensors
        t_values, t_fill = _zero_or(t_values, values), _zero_or(t_fill, fill)
        t_fill = t_fill.expand_as(out)
        if ctx.split_ties:
            rows, u, tie_v, tie_f, count = _SegMax._ties(ctx)
            stored = out.new_zeros(out.shape).index_add(0, rows, tie_v.to(out.dtype) * t_values)
            t = (stored + torch.where(tie_f, t_fill * u, 0)) / count
        elif values.shape[0]:
            t = torch.where(winner < 0, t_fill, t_values.gather(0, winner.clamp_min(0)))
        else:
            t = t_fill.clone()
        return t, None, None


class _Slices:
    """How a softmax's slices are summed (the fill not included) and read back
    per stored row, with u, each slice's unspecified count ([nslices, 1]):
    by segments (seg_softmax) or by slots (slot_softmax)."""

    def __init__(self, total, read, u):
        self.total, self.read, self.u = total, read, u

    @staticmethod
    def segments(seg_ptr, n, nse, dtype):
        rows = _rows_of_segments(seg_ptr, nse)
        return _Slices(lambda x: _ops.seg_reduce(x, x.new_zeros((1, x.shape[1])), seg_ptr, n,
                                                 "sum"),
                       lambda a: a.index_select(0, rows), _unspecified(seg_ptr, n, dtype))

    @staticmethod
    def slots(slot, nslots, n, dtype):
        def total(x):
            return x.new_zeros((nslots, x.shape[1])).index_add(0, slot, x)
        return _Slices(total, lambda a: a.index_select(0, slot),
                       _slot_unspecified(slot, nslots, n, dtype))


def _softmax_backward(out, out_fill, g, g_fill, S, log):
    """Softmax's backward in differentiable ops, over the slices S (_Slices).
    softmax: dot = the slice's sum of g y; g_x = y (g - dot), and the fill
    (standing for u elements, g_fill their summed gradient) y_f (g_fill - u dot).
    log_softmax: S = the sum of g; g_x = g - exp(y) S, fill g_fill - u exp(y_f) S."""
    has = S.u > 0
    elem = g if log else g * out
    acc = S.total(elem) + torch.where(has, g_fill if log else g_fill * out_fill, 0)
    acc_rows = S.read(acc)
    gv = g - torch.exp(out) * acc_rows if log else out * (g - acc_rows)
    gf = g_fill - S.u * torch.exp(out_fill) * acc if log else out_fill * (g_fill - S.u * acc)
    return gv, torch.where(has, gf, 0)


def _softmax_jvp(out, out_fill, fill, t_values, t_fill, S, log):
    """softmax: t_y = y (t - sum(y t)); log_softmax: t_y = t - sum(exp(y) t),
    the sums over each slice of S (_Slices), the fill counted u times."""
    t_values = _zero_or(t_values, out)
    t_fill = _zero_or(t_fill, fill).expand_as(out_fill)
    has = S.u > 0
    w, w_fill = (torch.exp(out), torch.exp(out_fill)) if log else (out, out_fill)
    acc = S.total(w * t_values) + torch.where(has, S.u * w_fill * t_fill, 0)
    acc_rows = S.read(acc)
    if log:
        tv, tf = t_values - acc_rows, t_fill - acc
    else:
        tv, tf = out * (t_values - acc_rows), out_fill * (t_fill - acc)
    return tv, torch.where(has, tf, 0)


class _SegSoftmax(_SingleLevelFunction):
    """The backward runs in the C core (seg_softmax_backward); when a graph of
    it is recorded (double backward) the same formula in differentiable ops."""

    @staticmethod
    def forward(values, fill, seg_ptr, n, log):
        return _below(_ops.seg_softmax, values, fill, seg_ptr, n, log)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, fill, seg_ptr, n, log = inputs
        out, out_fill = output
        ctx.save_for_backward(fill, seg_ptr, out, out_fill)
        ctx.save_for_forward(fill, seg_ptr, out, out_fill)
        ctx.n, ctx.log = n, log

    @staticmethod
    def backward(ctx, g, g_fill):
        fill, seg_ptr, out, out_fill = ctx.saved_tensors
        if _differentiated():
            S = _Slices.segments(seg_ptr, ctx.n, out.shape[0], g.dtype)
            gv, gf = _softmax_backward(out, out_fill, g, g_fill, S, ctx.log)
        else:
            gv, gf = _ops.seg_softmax_backward(out, out_fill, g, g_fill, seg_ptr, ctx.n, ctx.log)
        return gv, _to_fill_rows(gf, fill), None, None, None

    @staticmethod
    def jvp(ctx, t_values, t_fill, *_):
        fill, seg_ptr, out, out_fill = ctx.saved_tensors
        S = _Slices.segments(seg_ptr, ctx.n, out.shape[0], out.dtype)
        return _softmax_jvp(out, out_fill, fill, t_values, t_fill, S, ctx.log)


class _SlotReduce(_SingleLevelFunction):
    """slot_reduce with reduce='sum' (sum and mean by slot): each stored row
    gets its slot's gradient, the fill each slot's gradient times its
    unspecified count (none where a slot is stored in full). prod, amax and
    amin have no derivative here: the package takes seg_reduce / seg_max
    when a gradient is tracked."""

    @staticmethod
    def forward(values, slot, fill, nslots, n, reduce):
        return _below(_ops.slot_reduce, values, slot, fill, nslots, n, reduce)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, slot, fill, nslots, n, reduce = inputs
        if reduce != "sum":
            raise NotImplementedError(f"torch_sparsefill: slot_reduce({reduce!r}) has no "
                                      f"derivative; reduce through seg_reduce / seg_max")
        out, count = output
        ctx.mark_non_differentiable(count)
        ctx.save_for_backward(slot, count)
        ctx.save_for_forward(values, slot, fill)
        ctx.nslots, ctx.n, ctx.fill_shape = nslots, n, fill.shape

    @staticmethod
    def backward(ctx, g, _g_count):
        slot, count = ctx.saved_tensors
        u = (ctx.n - count).unsqueeze(1).to(g.dtype)
        g_fill = torch.where(u > 0, g * u, 0).sum(0).reshape(ctx.fill_shape)
        return g.index_select(0, slot), None, g_fill, None, None, None

    @staticmethod
    def jvp(ctx, t_values, _t_slot, t_fill, *_):
        values, slot, fill = ctx.saved_tensors
        t_values, t_fill = _zero_or(t_values, values), _zero_or(t_fill, fill)
        return _ops.slot_reduce(t_values, slot, t_fill, ctx.nslots, ctx.n, "sum")[0], None


class _SlotSoftmax(_SingleLevelFunction):
    """The backward runs in the C core (slot_softmax_backward); when a graph
    of it is recorded (double backward) the same formula in differentiable ops,
    the slice sums by index_add over the slots (no segment order)."""

    @staticmethod
    def forward(values, slot, fill, nslots, n, log):
        return _below(_ops.slot_softmax, values, slot, fill, nslots, n, log)

    @staticmethod
    def setup_context(ctx, inputs, output):
        values, slot, fill, nslots, n, log = inputs
        out, out_fill = output
        ctx.save_for_backward(fill, slot, out, out_fill)
        ctx.save_for_forward(fill, slot, out, out_fill)
        ctx.n, ctx.log = n, log

    @staticmethod
    def backward(ctx, g, g_fill):
        fill, slot, out, out_fill = ctx.saved_tensors
        if _differentiated():
            S = _Slices.slots(slot, out_fill.shape[0], ctx.n, g.dtype)
            gv, gf = _softmax_backward(out, out_fill, g, g_fill, S, ctx.log)
        else:
            gv, gf = _ops.slot_softmax_backward(out, out_fill, g, g_fill, slot, ctx.n, ctx.log)
        return gv, None, _to_fill_rows(gf, fill), None, None, None

    @staticmethod
    def jvp(ctx, t_values, _t_slot, t_fill, *_):
        fill, slot, out, out_fill = ctx.saved_tensors
        S = _Slices.slots(slot, out_fill.shape[0], ctx.n, out.dtype)
        return _softmax_jvp(out, out_fill, fill, t_values, t_fill, S, ctx.log)


# ---- from_dense -----------------------------------------------------------------------

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
        return _below(_ops.from_dense, self, fill, sparse_dim)

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
        # a per-slice fill (RFC.md 1.5) has sparse dims of its own
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


for _name, _function in [("spmm", _Spmm), ("sddmm", _Sddmm), ("spgemm", _Spgemm),
                         ("seg_reduce", _SegReduce), ("seg_max", _SegMax),
                         ("seg_softmax", _SegSoftmax), ("slot_reduce", _SlotReduce),
                         ("slot_softmax", _SlotSoftmax),
                         ("from_dense", _FromDense)]:
    _register(_name, _function)
