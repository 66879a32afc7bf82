"""The Python half of softmax and the reductions (aten_ext/ops/reductions/):
their fake kernels and the autograd of seg_reduce, seg_max, seg_softmax,
slot_reduce and slot_softmax (their ``<op>_autograd`` twins)."""
import torch
from torch.autograd.function import _SingleLevelFunction

from .common import below, differentiated, dynamic_size, register, rows_of_segments, zero_or

_ops = torch.ops.sparsefill


# ---- fake kernels ------------------------------------------------------------------------

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
    nseg = dynamic_size() if compact else nslices
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



# ---- shared by the Functions ---------------------------------------------------------

def rows_of_segments(seg_ptr, nse):
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



# ---- autograd -----------------------------------------------------------------------------

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
    rows = rows_of_segments(seg_ptr, nse)
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
        return below(_ops.seg_reduce, values, fill, seg_ptr, n, reduce)

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
            rows = rows_of_segments(seg_ptr, values.shape[0])
            u = _unspecified(seg_ptr, ctx.n, g.dtype)
            return g.index_select(0, rows), _to_fill_rows(g * u, fill), None, None, None
        rows, _, d_values, d_fill = _prod_partials(values, fill, seg_ptr, ctx.n)
        return (g.index_select(0, rows) * d_values, _to_fill_rows(g * d_fill, fill),
                None, None, None)

    @staticmethod
    def jvp(ctx, t_values, t_fill, _seg, _n, _reduce):
        values, fill, seg_ptr = ctx.saved_tensors
        t_values, t_fill = zero_or(t_values, values), zero_or(t_fill, fill)
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
        return below(_ops.seg_max, values, fill, seg_ptr, coord, n, is_min, split_ties)

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
        rows = rows_of_segments(seg_ptr, values.shape[0])
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
        t_values, t_fill = zero_or(t_values, values), zero_or(t_fill, fill)
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
        rows = rows_of_segments(seg_ptr, nse)
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
    t_values = zero_or(t_values, out)
    t_fill = zero_or(t_fill, fill).expand_as(out_fill)
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
        return below(_ops.seg_softmax, values, fill, seg_ptr, n, log)

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
        if differentiated():
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
        return below(_ops.slot_reduce, values, slot, fill, nslots, n, reduce)

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
        t_values, t_fill = zero_or(t_values, values), zero_or(t_fill, fill)
        return _ops.slot_reduce(t_values, slot, t_fill, ctx.nslots, ctx.n, "sum")[0], None


class _SlotSoftmax(_SingleLevelFunction):
    """The backward runs in the C core (slot_softmax_backward); when a graph
    of it is recorded (double backward) the same formula in differentiable ops,
    the slice sums by index_add over the slots (no segment order)."""

    @staticmethod
    def forward(values, slot, fill, nslots, n, log):
        return below(_ops.slot_softmax, values, slot, fill, nslots, n, log)

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
        if differentiated():
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



for _name, _function in [("seg_reduce", _SegReduce), ("seg_max", _SegMax),
                         ("seg_softmax", _SegSoftmax), ("slot_reduce", _SlotReduce),
                         ("slot_softmax", _SlotSoftmax)]:
    register(_name, _function)
