"""Sampled products, masks and sparse attention (RFC.md#attention-and-graphs).

- :func:`sampled_matmul`: ``mat1 @ mat2`` computed only on a pattern's
  positions (Q K^T on an attention pattern), any fill, batched;
- :func:`sparse_mask`: a strided tensor's elements on a pattern's positions;
- routes: ``torch.sparse.sampled_addmm``, ``Tensor.sparse_mask``,
  ``F.scaled_dot_product_attention(attn_mask=A)`` and ``F.dropout``.

The sampled products and SDPA run on the stored elements only. SDPA without
dropout is one fused op, ``sparse_attention`` (sampled Q K^T, online row
softmax and the product with V in one pass per row: C core
``sf_csr_attention``, CUDA ``sf_cuda_csr_attention``; its backward is in ops/products.py,
in differentiable ops); with dropout it is composed of the library's
product ops: ``sddmm`` (X Y^T sampled on a pattern; its autograd, in
ops/products.py, is a backward made of ``spmm``, itself differentiable, so
double backward is exact) and
``spmm`` (the weights times V); softmax is ``index_add``/``scatter_reduce``
over the rows. Time O(nse * d), memory O(nse + (L + S) * d): no gathered
(nse, d) operand, never an L x S tensor.

Example::

    >>> P = sf.sparse_coo_tensor([[0, 1], [1, 0]], [1., 1.], (2, 2), fill_value=0.)
    >>> sf.sampled_matmul(torch.eye(2), 2 * torch.eye(2), P, fill_value=-1.).to_dense()
    tensor([[-1.,  0.],
            [ 0., -1.]])
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from ..tensor import args as _args
from ..tensor import fill as _fill
from ..creation.full import to_sparse
from ..ops import common as _common
from ..ops.products import block_csr, row_softmax
from ..tensor import SparseFillTensor, build
from ..tensor import indefinite as _indefinite

_ops = torch.ops.sparsefill
T = torch.Tensor

__all__ = ["sampled_matmul", "sparse_mask"]


# ---- the pattern ------------------------------------------------------------------

def _pattern(pattern, what: str) -> SparseFillTensor:
    """A coalesced SparseFillTensor pattern whose dims are all sparse (native
    sparse tensors are wrapped as they are)."""
    if isinstance(pattern, torch.Tensor) and not isinstance(pattern, SparseFillTensor) and \
            pattern.layout in (torch.sparse_coo, torch.sparse_csr):
        pattern = to_sparse(pattern)
    if not isinstance(pattern, SparseFillTensor):
        raise TypeError(f"{what}: pattern must be a sparse tensor (a SparseFillTensor or a torch "
                        f"sparse COO/CSR tensor), got {type(pattern).__name__}")
    if pattern.dense_dim() > 0:
        raise NotImplementedError(f"torch_sparsefill: {what}: pattern is a hybrid tensor "
                                  f"(dense_dim={pattern.dense_dim()}); only sparse dims are "
                                  f"supported")
    if pattern.dim() < 2:
        # torch masks any COO tensor: fewer dims are unsupported, not invalid
        raise NotImplementedError(f"torch_sparsefill: {what}: a pattern needs at least 2 dims, "
                                  f"got {pattern.dim()}")
    return pattern._coalesced()


def _positions(P: SparseFillTensor):
    """(batch, row, col) of every stored element of P: the batch number runs
    row-major over P's leading dims (0 for a matrix)."""
    idx = P._coo_indices()
    batch = torch.zeros(idx.shape[1], dtype=idx.dtype, device=idx.device)
    for d, size in enumerate(P.shape[:-2]):
        batch = batch * size + idx[d]
    return batch, idx[-2], idx[-1]


def _batched_operand(x, batch, what, fname):
    """x (..., r, c) broadcast to the pattern's batch dims, flattened to (nb, r, c)."""
    if not isinstance(x, torch.Tensor) or isinstance(x, SparseFillTensor) or \
            x.layout != torch.strided:
        raise NotImplementedError(f"torch_sparsefill: {fname}: {what} must be a strided tensor, "
                                  f"got {type(x).__name__}")
    if x.dim() < 2:
        raise RuntimeError(f"{fname}: {what} must have at least 2 dims, got {x.dim()}")
    try:
        shape = torch.broadcast_shapes(tuple(x.shape[:-2]), batch)
    except RuntimeError:
        shape = None
    if shape != batch:
        raise RuntimeError(f"{fname}: {what} of shape {tuple(x.shape)} does not broadcast to the "
                           f"pattern's batch dims {batch}")
    # the batch counted, not -1: with a 0-size matrix -1 is ambiguous
    return x.expand(batch + tuple(x.shape[-2:])).reshape((math.prod(batch),) +
                                                         tuple(x.shape[-2:]))


def _sampled_values(x, y, b, r, c):
    """(X Y)[b, r, c] for flattened X (nb, m, k) and Y (nb, k, n): sddmm on
    the block-diagonal pattern, O(nse * k) time, O(nse) memory."""
    nb, m, k = x.shape
    n = y.shape[-1]
    crow, col, _ = block_csr(b, r, c, nb, m, n)
    return _ops.sddmm(crow, col, nb * n, x.reshape(nb * m, k),
                      y.transpose(-2, -1).reshape(nb * n, k))


def sampled_matmul(mat1, mat2, pattern, *, fill_value) -> SparseFillTensor:
    """``mat1 @ mat2`` on `pattern`'s positions: a SparseFillTensor with
    pattern's indices and layout holding the product there and `fill_value`
    everywhere else. Only the positions of `pattern` are read, not its values
    or fill. Batched: a ``(*b, m, n)`` pattern takes ``(*b, m, k)`` and
    ``(*b, k, n)`` operands (their batch dims broadcast). Differentiable with
    respect to mat1 and mat2; O(nse * k) time and memory.

    Example::

        >>> P = sf.sparse_coo_tensor([[0], [1]], [1.], (2, 2), fill_value=0.)
        >>> sf.sampled_matmul(torch.ones(2, 3), torch.ones(3, 2), P,
        ...                   fill_value=float('-inf')).to_dense()
        tensor([[-inf, 3.],
                [-inf, -inf]])
    """
    fname = "sampled_matmul()"
    P = _pattern(pattern, fname)
    batch, (m, n) = tuple(P.shape[:-2]), tuple(P.shape[-2:])
    x = _batched_operand(mat1, batch, "mat1", fname)
    y = _batched_operand(mat2, batch, "mat2", fname)
    if x.shape[-2] != m or y.shape[-1] != n or x.shape[-1] != y.shape[-2]:
        raise RuntimeError(f"{fname}: mat1 {tuple(mat1.shape)} @ mat2 {tuple(mat2.shape)} does "
                           f"not give the pattern's matrix shape ({m}, {n})")
    if x.dtype != y.dtype:
        raise RuntimeError(f"{fname}: expected mat1 and mat2 of one dtype, got {x.dtype} and "
                           f"{y.dtype}")
    b, r, c = _positions(P)
    values = _sampled_values(x, y, b, r, c)
    return _on_pattern(P, values, fill_value, fname)


def _on_pattern(P: SparseFillTensor, values, fill_value, fname) -> SparseFillTensor:
    """`values` on P's positions, `fill_value` elsewhere (sf.indefinite: absent)."""
    if fill_value is _indefinite.indefinite:
        return _indefinite.mark(_on_pattern(P, values, 0, fname))
    fill = torch.as_tensor(fill_value, dtype=values.dtype, device=values.device)
    if fill.numel() != 1:
        raise NotImplementedError(f"torch_sparsefill: {fname}: fill_value must be a single "
                                  f"value, got shape {tuple(fill.shape)}")
    fill = fill.reshape(())
    if P.layout == torch.sparse_csr:
        return build(torch.sparse_csr, P.shape, values, fill, crow=P._sf_crow, col=P._sf_col)
    return build(torch.sparse_coo, P.shape, values, fill, indices=P._sf_indices)


def sparse_mask(x, pattern, *, fill_value) -> SparseFillTensor:
    """The elements of a strided `x` at `pattern`'s positions, `fill_value`
    everywhere else: a SparseFillTensor with pattern's indices and layout
    (pattern's values and fill are not read). Differentiable with respect to
    x (and a tensor fill_value).

    Example::

        >>> P = sf.sparse_coo_tensor([[0, 1], [1, 0]], [9., 9.], (2, 2), fill_value=0.)
        >>> sf.sparse_mask(torch.arange(4.).reshape(2, 2), P, fill_value=-1.).to_dense()
        tensor([[-1.,  1.],
                [ 2., -1.]])
    """
    fname = "sparse_mask()"
    P = _pattern(pattern, fname)
    if not isinstance(x, torch.Tensor) or isinstance(x, SparseFillTensor) or \
            x.layout != torch.strided:
        raise NotImplementedError(f"torch_sparsefill: {fname}: x must be a strided tensor, got "
                                  f"{type(x).__name__}")
    if tuple(x.shape) != tuple(P.shape):
        raise RuntimeError(f"{fname}: x of shape {tuple(x.shape)} and pattern of shape "
                           f"{tuple(P.shape)} must have the same shape")
    values = x[tuple(P._coo_indices())]
    return _on_pattern(P, values, fill_value, fname)


# ---- torch's API ----------------------------------------------------------------------

def _tensor_sparse_mask(self, mask):
    """``x.sparse_mask(A)``: torch's meaning, x's elements on A's positions
    and 0 elsewhere (torch's sparse result has fill 0)."""
    if isinstance(self, SparseFillTensor):
        raise NotImplementedError("torch_sparsefill: Tensor.sparse_mask of a SparseFillTensor is "
                                  "not supported; use sf.sparse_mask(x.to_dense(), pattern, "
                                  "fill_value=...)")
    return sparse_mask(self, mask, fill_value=0)


def _sampled_addmm(input, mat1, mat2, *, beta=1.0, alpha=1.0, out=None):
    """torch.sparse.sampled_addmm: ``beta * input + alpha * (mat1 @ mat2)``
    with the product taken on input's positions only. Input's unspecified
    elements are not sampled: they become ``beta * fill`` (torch's fill-0
    input gives 0 there, as torch does)."""
    fname = "torch.sparse.sampled_addmm()"
    if out is not None:
        raise NotImplementedError(f"torch_sparsefill: {fname}: out= is not supported")
    if not (_args.is_number(beta) and _args.is_number(alpha)):
        raise TypeError(f"{fname}: beta and alpha must be numbers")
    A = _pattern(input, fname)
    if A.dtype != mat1.dtype:
        raise RuntimeError(f"{fname}: expected input and mat1 of one dtype, got {A.dtype} and "
                           f"{mat1.dtype}")
    S = sampled_matmul(mat1, mat2, A, fill_value=0)
    values = S._sf_values * alpha
    if beta == 0:  # input is not read, as torch does
        return A._with(values, torch.zeros((), dtype=values.dtype, device=values.device))
    return A._with(values + beta * A._sf_values, beta * A._sf_fill)


def _dropout(input, p=0.5, training=True, inplace=False):
    """F.dropout of a SparseFillTensor: with fill 0 the pattern stays (a
    dropped 0 is 0) and the stored values are dropped and rescaled; with
    another fill every unspecified element would become random, so it is
    refused (convert with .to_dense() first). Outside training, the identity."""
    A = _args.sparse(input, "dropout()")
    if not 0 <= p <= 1:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0:
        return A
    if inplace:
        raise NotImplementedError("torch_sparsefill: dropout(inplace=True) of a SparseFillTensor "
                                  "is not supported; use the out-of-place form")
    f = A._sf_fill
    if f.requires_grad or bool((f != 0).any()):
        raise NotImplementedError(
            "torch_sparsefill: dropout() of a SparseFillTensor with a non-zero fill would make "
            "every unspecified element random (the result is dense); call .to_dense() first")
    A = A._coalesced()
    return A._with(F.dropout(A._sf_values, p, True), f)


# ---- triangles ----------------------------------------------------------------------

def _triangle(upper: bool):
    name = "triu()" if upper else "tril()"

    def tri(input, diagonal=0, *, out=None):
        """torch.tril / torch.triu over the last two dims. Sparse when the
        fill is 0 (the stored elements outside the triangle go) or when the
        triangle holds the whole matrix; otherwise the zeros it writes make a
        fill that varies by position, so the result is the dense one."""
        A = _args.sparse(input, name)
        if out is not None:
            raise NotImplementedError(f"torch_sparsefill: {name}: out= is not supported")
        d = _args.integer(diagonal, name)
        if A.dim() < 2:
            raise RuntimeError(f"{name}: input tensor must have at least 2 dimensions")
        m, n = A.shape[-2:]
        if (upper and d <= -(m - 1)) or (not upper and d >= n - 1):
            return A  # the triangle is the whole matrix
        f = A._sf_fill
        if A.dense_dim() > 0 or A.sparse_dim() != A.dim() or f.requires_grad or \
                bool((f != 0).any()):
            dense = A.to_dense()
            return torch.triu(dense, d) if upper else torch.tril(dense, d)
        A = A._coalesced()
        idx = A._coo_indices()
        offset = idx[-1] - idx[-2]
        keep = torch.nonzero(offset >= d if upper else offset <= d).view(-1)
        return build(A.layout, A.shape, A._sf_values.index_select(0, keep), f,
                     indices=idx.index_select(1, keep))
    tri.__name__ = name[:-2]
    return tri


# ---- attention ----------------------------------------------------------------------

def _additive_mask(A: SparseFillTensor, dtype):
    """(bias values, True) when A is a mask whose unspecified elements are
    excluded (float fill -inf, or bool fill False): the stored elements'
    additive biases. (None, False) when every position takes part."""
    f = A._sf_fill
    if _fill.is_per_slice(f, A.dense_dim()) or f.numel() != 1:
        return None, False
    excluding = ~f.reshape(()) if A.dtype == torch.bool else f.reshape(()) == -math.inf
    if torch.compiler.is_compiling():
        # Traced (sf.compile, export): the fill is data, so no branch on it;
        # a float mask not needing the fill's gradient takes the sparse path
        # (the one a mask is built for), and the graph refuses when it runs
        # with any other fill, never computes as if it were -inf.
        if A.dtype != torch.bool and f.requires_grad:
            return None, False
        torch._assert_async(excluding, "scaled_dot_product_attention(): under sf.compile a "
                            "SparseFillTensor attn_mask must exclude its unspecified positions "
                            "(fill -inf, or False for a bool mask); pass attn_mask.to_dense() "
                            "for another fill")
    elif not bool(excluding) or (A.dtype != torch.bool and f.requires_grad):
        return None, False
    if A.dtype == torch.bool:
        v = A._sf_values
        zero = torch.zeros((), dtype=dtype, device=v.device)
        return torch.where(v, zero, zero - math.inf), True
    return A._sf_values.to(dtype), True


def _sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
          enable_gqa=False):
    """F.scaled_dot_product_attention with a SparseFillTensor attn_mask.

    A float mask of fill -inf (or a bool mask of fill False) excludes every
    unspecified position: the scores are computed on the stored positions
    only (sampled Q K^T plus the stored biases), softmax runs along each
    row's stored elements and the weights multiply V: O(nse * d) time and
    memory, exact (a row with nothing stored, or only -inf, gives 0 as
    torch's SDPA does).
    Any other fill lets every position take part, so the mask is made dense
    and torch's SDPA computes.
    """
    fname = "scaled_dot_product_attention()"
    A = attn_mask
    for x, what in ((query, "query"), (key, "key"), (value, "value")):
        if isinstance(x, SparseFillTensor):
            raise NotImplementedError(f"torch_sparsefill: {fname}: {what} must be strided; only "
                                      f"attn_mask may be a SparseFillTensor")
    if not isinstance(A, SparseFillTensor):
        raise NotImplementedError(f"torch_sparsefill: {fname}: only attn_mask may be a "
                                  f"SparseFillTensor")
    if is_causal:
        raise RuntimeError(f"{fname}: is_causal=True cannot be combined with an explicit "
                           f"attn_mask (as in torch); put the causal pattern into the mask")
    if A.dtype != torch.bool and A.dtype != query.dtype:
        raise RuntimeError(f"{fname}: a float attn_mask must have query's dtype {query.dtype}, "
                           f"got {A.dtype}")
    if enable_gqa and key.dim() >= 3 and query.dim() >= 3:
        # Grouped heads (torch's rule): key and value heads serve query
        # heads in equal groups, as if repeated along the head dim.
        hq = query.shape[-3]
        for name, t in (("key", key), ("value", value)):
            if t.shape[-3] == 0 or hq % t.shape[-3]:
                raise RuntimeError(f"{fname}: enable_gqa needs the number of query heads ({hq}) "
                                   f"to be a multiple of the {name} heads ({t.shape[-3]})")
        key = key.repeat_interleave(hq // key.shape[-3], -3)
        value = value.repeat_interleave(hq // value.shape[-3], -3)
        enable_gqa = False
    A = A._coalesced()  # one bias per position: duplicates summed (or, for bool, or-ed) first
    bias, sparse = _additive_mask(A, query.dtype)
    if not sparse or A.dense_dim() > 0 or A.dim() < 2:
        return F.scaled_dot_product_attention(query, key, value, attn_mask=A.to_dense(),
                                              dropout_p=dropout_p, scale=scale,
                                              enable_gqa=enable_gqa)
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(f"{fname}: query, key and value need at least 2 dims")
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if key.shape[-1] != E or value.shape[-2] != S:
        raise RuntimeError(f"{fname}: query {tuple(query.shape)}, key {tuple(key.shape)} and "
                           f"value {tuple(value.shape)} do not fit together")
    if tuple(A.shape[-2:]) != (L, S):
        raise RuntimeError(f"{fname}: attn_mask's last dims {tuple(A.shape[-2:])} must be "
                           f"(L, S) = ({L}, {S})")
    batch = torch.broadcast_shapes(tuple(query.shape[:-2]), tuple(key.shape[:-2]),
                                   tuple(value.shape[:-2]), tuple(A.shape[:-2]))
    nb = _fill.prod(batch)
    s = 1.0 / math.sqrt(E) if scale is None else scale
    dv = value.shape[-1]
    if _fused(query, dropout_p) and _fill.prod(tuple(A.shape[:-2])) == 1:
        # One pattern for every batch and head: the fused op takes the heads
        # as a batch (no position is repeated per head); no (nse,) score or
        # weight tensor, the backward works from the saved log-sum-exp.
        _, r, c = _positions(A)
        crow = _ops.crow_from_rows(r.contiguous(), L)
        q = query.expand(batch + (L, E)).reshape(nb, L, E)
        k = key.expand(batch + (S, E)).reshape(nb, S, E)
        v = value.expand(batch + (S, dv)).reshape(nb, S, dv)
        out, _ = _ops.sparse_attention(crow, c.contiguous(), bias.reshape(-1), q, k, v, float(s))
        return out.reshape(batch + (L, dv))
    b, r, c, bias = _expand_positions(A, bias, batch)
    q = query.expand(batch + (L, E)).reshape(nb * L, E)
    k = key.expand(batch + (S, E)).reshape(nb * S, E)
    v = value.expand(batch + (S, dv)).reshape(nb * S, dv)
    crow, col, rows = block_csr(b, r, c, nb, L, S)
    if _fused(q, dropout_p):
        # A pattern per batch: one fused call on their block-diagonal pattern.
        out, _ = _ops.sparse_attention(crow, col, bias, q, k, v, float(s))
        return out.reshape(batch + (L, dv))
    scores = _ops.sddmm(crow, col, nb * S, q, k) * s + bias
    weights = row_softmax(scores, rows, nb * L)
    if dropout_p > 0:
        weights = F.dropout(weights, dropout_p, True)
    zero = torch.zeros((), dtype=weights.dtype, device=weights.device)
    out = _ops.spmm(crow, col, weights, zero, v, nb * S)
    return out.reshape(batch + (L, dv))


def _fused(q, dropout_p) -> bool:
    """Whether SDPA runs as the fused op (CPU and CUDA kernels): dropout
    needs the weights it never forms, and forward-mode AD and torch.func
    need ops with a jvp (the fused op's autograd is a backward only)."""
    return dropout_p == 0 and q.device.type in ("cpu", "cuda") and not _common.transformed()


def _expand_positions(A: SparseFillTensor, bias, batch):
    """(batch, row, col, bias) of A's stored elements repeated over the
    output's batch dims where A broadcasts (a 2-D mask serves every head)."""
    b, r, c = _positions(A)
    own = (1,) * (len(batch) - (A.dim() - 2)) + tuple(A.shape[:-2])
    if own == batch:
        return b, r, c, bias
    # For every output batch, the batch of A that serves it.
    dev = b.device
    src = torch.zeros((), dtype=torch.int64, device=dev)
    for size, osize in zip(own, batch):
        coord = torch.arange(osize, device=dev) if size > 1 else \
            torch.zeros(osize, dtype=torch.int64, device=dev)
        src = (src.unsqueeze(-1) * size + coord)
    src = src.reshape(-1)
    nb_own = _fill.prod(own)
    bounds = torch.searchsorted(b.contiguous(), torch.arange(nb_own + 1, device=dev))
    counts = (bounds[1:] - bounds[:-1]).index_select(0, src)
    starts = bounds[:-1].index_select(0, src)
    out_b = torch.repeat_interleave(torch.arange(src.numel(), device=dev), counts)
    first = torch.cumsum(counts, 0) - counts
    elem = starts.index_select(0, out_b) + torch.arange(out_b.numel(), device=dev) - \
        first.index_select(0, out_b)
    return out_b, r.index_select(0, elem), c.index_select(0, elem), bias.index_select(0, elem)


def _dense_mask(func):
    """A fused inference kernel of nn.TransformerEncoderLayer or
    nn.MultiheadAttention (their fast path under no_grad, reached without
    the user calling it) given a SparseFillTensor mask: the kernel on the
    mask's dense form, which is what the mask means."""
    def call(*args, **kwargs):
        args = [a.to_dense() if isinstance(a, SparseFillTensor) else a for a in args]
        kwargs = {k: v.to_dense() if isinstance(v, SparseFillTensor) else v
                  for k, v in kwargs.items()}
        return func(*args, **kwargs)
    call.__doc__ = _dense_mask.__doc__
    return call


ROUTES = {
    torch._transformer_encoder_layer_fwd: _dense_mask(torch._transformer_encoder_layer_fwd),
    torch._native_multi_head_attention: _dense_mask(torch._native_multi_head_attention),
    torch.sparse.sampled_addmm: _sampled_addmm,
    T.sparse_mask: _tensor_sparse_mask,
    F.scaled_dot_product_attention: _sdpa,
    F.dropout: _dropout,
    torch.tril: _triangle(False), T.tril: _triangle(False),
    torch.triu: _triangle(True), T.triu: _triangle(True),
}
