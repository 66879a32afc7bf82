"""The tensor's everyday methods with their dense meaning (RFC.md#tensor-methods):
copy_, fill_, tolist, item and the Python conversions, torch.equal,
allclose, isclose, nbytes, type(), share_memory_, pin_memory, numpy(), .data.

Each answers what it answers for ``A.to_dense()``. Comparisons compose the
element-wise ops (union of patterns, fills compared once), so two
SparseFillTensors are never densified; conversions to Python numbers or
lists produce the dense data by definition.
"""
from __future__ import annotations

import torch

from ..elementwise.handlers import same_pattern
from ...tensor import SparseFillTensor

T = torch.Tensor

__all__: list = []


# ---- in place: copy_ and fill_ -------------------------------------------------------

def adopt_coalesced(target: SparseFillTensor) -> None:
    """Give an uncoalesced COO tensor its coalesced form in place (same elements)."""
    if target.layout == torch.sparse_coo and not target._sf_coalesced:
        c = target.coalesce()
        target._sf_indices, target._sf_values, target._sf_coalesced = \
            c._sf_indices, c._sf_values, True


def _aligned(target: SparseFillTensor, src: SparseFillTensor) -> SparseFillTensor:
    """src coalesced, on target's device and in target's layout (target
    coalesced in place too), so that their patterns compare directly."""
    adopt_coalesced(target)
    source = src._coalesced().to(device=target.device)
    return source if source.layout == target.layout else source.to_sparse(layout=target.layout)


def copy_(self, src, non_blocking=False):
    """``A.copy_(B)``: B's elements into A, in place, when B stores A's
    pattern (values cast to A's dtype and device, the fill broadcast to A's
    fill shape). A different pattern raises: the components A holds are
    what optimisers and autograd refer to, so they keep their shape; to load
    a checkpoint with another pattern use ``load_state_dict(..., assign=True)``.

    Example::

        >>> A = sf.sparse_coo_tensor([[0, 2]], [1., 2.], (3,), fill_value=0.)
        >>> A.copy_(sf.sparse_coo_tensor([[0, 2]], [5., 6.], (3,), fill_value=7.)).to_dense()
        tensor([5., 7., 6.])
    """
    if not isinstance(self, SparseFillTensor):  # dense.copy_(A): A's elements, densified
        return self.copy_(src.to_dense(), non_blocking=non_blocking)
    if not isinstance(src, SparseFillTensor):
        raise NotImplementedError(
            f"torch_sparsefill: copy_(): src must be a SparseFillTensor, got a "
            f"{type(src).__name__}; a strided source has no pattern to keep, so build one with "
            f"sf.to_sparse(src, fill_value=...) and copy that")
    if tuple(src.shape) != tuple(self.shape):
        raise RuntimeError(f"copy_(): src has size {tuple(src.shape)}, this SparseFillTensor has "
                           f"{tuple(self.shape)}; a SparseFillTensor copy does not broadcast")
    source = _aligned(self, src)
    if not same_pattern(self, source):
        # Not supported (torch computes this densely): NotImplementedError.
        raise NotImplementedError(
            f"torch_sparsefill: copy_(): src stores a different pattern (nse {src.nse()} vs "
            f"{self.nse()}, or other positions); an in-place copy keeps this tensor's components, "
            f"so it cannot change its pattern. Use src.clone() instead, or, to load a state_dict "
            f"with other patterns, module.load_state_dict(state_dict, assign=True)")
    fill = source._sf_fill
    try:
        fits = torch.broadcast_shapes(fill.shape, self._sf_fill.shape) == self._sf_fill.shape
    except RuntimeError:
        fits = False
    if not fits:
        raise NotImplementedError(
            f"torch_sparsefill: copy_(): src's fill of shape {tuple(fill.shape)} (per slice) "
            f"does not fit this tensor's fill of shape {tuple(self._sf_fill.shape)}")
    self._sf_values.copy_(source._sf_values, non_blocking=non_blocking)
    self._sf_fill.copy_(fill, non_blocking=non_blocking)
    self._after_inplace()
    return self


def writing_out(handler):
    """`handler` for a call with a SparseFillTensor ``out=``: the result is
    written into it and out returned. As torch's ``out=`` resizes its tensor,
    out takes the result's pattern when it differs (same object; Adam's
    ``torch.maximum(..., out=state)`` on state that stores nothing yet);
    otherwise the result is copied into out's components (``copy_``)."""
    def call(*args, out, **kwargs):
        result = handler(*args, **kwargs)
        if isinstance(result, SparseFillTensor) and result.shape == out.shape:
            source = _aligned(out, result)
            if not same_pattern(out, source):
                return out._adopt(source.to(out.dtype), "out=")
            result = source
        return copy_(out, result)
    return call


def fill_(self, value):
    """``A.fill_(v)``: every element becomes v (stored values and fill); the
    pattern stays.

    Example::

        >>> sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=0.).fill_(2.).to_dense()
        tensor([2., 2., 2.])
    """
    if isinstance(value, SparseFillTensor):
        raise RuntimeError("fill_(): value must be a number or a 0-dim tensor, got a "
                           "SparseFillTensor")
    if isinstance(value, torch.Tensor) and value.dim() != 0:
        raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with "
                           f"{value.dim()} dimensions.")
    coalesced = self._coalesced()
    if coalesced is not self:  # duplicates would each take v and sum to a multiple of it
        self._adopt(coalesced, "fill_()", bump=False)
    if self._sf_values._base is not None or self._sf_fill._base is not None:
        # filled in place, a view would pass the rest of its base's gradient
        # on (CopySlices), so the gradient would hang on what came before,
        # as dense's does not (seed 658566: hardsigmoid's double backward)
        self._adopt(self._with(self._sf_values.clone(), self._sf_fill.clone()), "fill_()",
                    bump=False)
    self._sf_values.fill_(value)
    self._sf_fill.fill_(value)
    self._after_inplace()
    return self


# ---- to Python -----------------------------------------------------------------------

def _one_element(self, what):
    if self.numel() != 1:
        raise RuntimeError(f"{what}: a Tensor with {self.numel()} elements cannot be converted "
                           f"to Scalar")
    return self.to_dense()


def item(self):
    """``A.item()``: the one element of a one-element tensor, as a Python number.

    Example::

        >>> sf.full((1, 1), 3.).item()
        3.0
    """
    return _one_element(self, "item()").item()


def tolist(self):
    """``A.tolist()``: nested Python lists of the dense elements.

    Example::

        >>> sf.sparse_coo_tensor([[1]], [2.], (3,), fill_value=5.).tolist()
        [5.0, 2.0, 5.0]
    """
    return self.to_dense().tolist()


def _python(kind):
    def convert(self):
        return kind(_one_element(self, f"{kind.__name__}()"))
    convert.__doc__ = f"``{kind.__name__}(A)`` of a one-element SparseFillTensor."
    return convert


# ---- comparisons ---------------------------------------------------------------------

def isclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False):
    """``torch.isclose(A, B)``: element-wise ``|A - B| <= atol + rtol * |B|``
    (equal elements, infinities included, are close; NaNs only with
    ``equal_nan``). Two SparseFillTensors give a SparseFillTensor on the union
    of their patterns; the fills are compared once.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
        >>> torch.isclose(A, A + 1e-9).to_dense()
        tensor([True, True, True])
    """
    for x, arg in ((input, "input"), (other, "other")):
        if isinstance(x, torch.Tensor) and x.dtype != _dtype(input):
            raise RuntimeError(f"isclose(): {arg} has dtype {x.dtype}, expected "
                               f"{_dtype(input)}: the two tensors must have the same dtype")
    if rtol < 0 or atol < 0:
        raise RuntimeError(f"isclose(): rtol ({rtol}) and atol ({atol}) must be non-negative")
    close = torch.eq(input, other)
    if equal_nan:
        close = close | (torch.isnan(input) & torch.isnan(other))
    if not (_dtype(input).is_floating_point or _dtype(input).is_complex):
        return close
    actual = torch.abs(torch.sub(input, other))
    allowed = torch.abs(other) * rtol + atol
    return close | (torch.isfinite(actual) & torch.le(actual, allowed))


def _dtype(x):
    return x.dtype if isinstance(x, torch.Tensor) else torch.get_default_dtype()


def allclose(input, other, rtol=1e-05, atol=1e-08, equal_nan=False) -> bool:
    """``torch.allclose(A, B)``: whether every element is close (``isclose``),
    computed on the components: stored values, and the fills once.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
        >>> torch.allclose(A, A * (1 + 1e-7))
        True
    """
    _check_same_shape(input, other, "allclose()")
    return bool(torch.all(isclose(input, other, rtol, atol, equal_nan)))


def _check_same_shape(a, b, what):
    shapes = [tuple(x.shape) for x in (a, b)]
    if shapes[0] != shapes[1]:
        raise RuntimeError(f"{what}: the sizes of the two tensors, {shapes[0]} and {shapes[1]}, "
                           f"must match")


def equal(input, other) -> bool:
    """``torch.equal(A, B)``: same size and every element equal (NaN never
    equals NaN), computed on the components.

    Example::

        >>> A = sf.sparse_coo_tensor([[0]], [1.], (3,), fill_value=2.)
        >>> torch.equal(A, A.clone())
        True
    """
    if tuple(input.shape) != tuple(other.shape):
        return False
    return bool(torch.all(torch.eq(input, other)))


# ---- metadata and memory -------------------------------------------------------------

def components(A: SparseFillTensor) -> list:
    """The tensors a SparseFillTensor is made of (pattern, values, fill)."""
    return [t for t in (A._sf_indices, A._sf_crow, A._sf_col, A._sf_values, A._sf_fill)
            if t is not None]


def nbytes(self) -> int:
    """``A.nbytes``: the bytes of its components (pattern, values, fill), what
    the tensor occupies; ``A.numel() * A.element_size()`` would be the dense size.

    Example::

        >>> sf.full((1000, 1000), 2.).nbytes  # no stored element: the fill alone
        4
    """
    return sum(t.nbytes for t in components(self))


def type_(self, dtype=None, non_blocking=False, **kwargs):
    """``A.type()``: the type name torch gives its own sparse tensor of this
    layout, dtype and device (torch has none for CSR and raises, and so do
    we); ``A.type(dtype)`` casts, like ``A.to(dtype)``.

    Example::

        >>> sf.full((2,), 1.).type()
        'torch.sparse.FloatTensor'
    """
    if dtype is None:
        native = torch.zeros(0, 0, dtype=self.dtype, device=self.device)
        native = native.to_sparse_csr() if self.layout == torch.sparse_csr else native.to_sparse()
        return native.type()
    if isinstance(dtype, str):
        try:
            dtype = torch.empty(0).type(dtype.replace(".sparse.", ".")).dtype
        except (TypeError, RuntimeError) as e:
            raise ValueError(f"type(): unknown type name {dtype!r}") from e
    return self.to(dtype, non_blocking=non_blocking)


def share_memory_(self):
    """``A.share_memory_()``: every component moved to shared memory (for
    torch.multiprocessing); returns A."""
    for t in components(self):
        t.share_memory_()
    return self


def is_shared(self) -> bool:
    """Whether every component is in shared memory."""
    return all(t.is_shared() for t in components(self))


def pin_memory(self, device=None):
    """``A.pin_memory()``: a copy with every component in page-locked memory
    (needs an accelerator, as for a dense tensor)."""
    return self._map_components(lambda t: t.pin_memory() if device is None
                                else t.pin_memory(device), copy_indices=True)


def is_pinned(self, device=None) -> bool:
    """Whether every component is in page-locked memory."""
    return all(t.is_pinned() for t in components(self))


def numpy(self, *, force=False):
    """Refused, as for torch's sparse tensors: numpy has no sparse array."""
    raise TypeError("can't convert a SparseFillTensor to numpy: numpy has no sparse array. Use "
                    "A.to_dense().numpy() for the dense array, or A.to_scipy() for a scipy sparse "
                    "matrix with its fill")


def is_contiguous(self, memory_format=torch.contiguous_format):
    """Refused, as for torch's sparse tensors: a SparseFillTensor has no strides."""
    raise NotImplementedError(
        "torch_sparsefill: is_contiguous is refused: a SparseFillTensor has no strides (as "
        "torch's sparse tensors); A.to_dense().is_contiguous() asks the dense tensor. FSDP's "
        "fully_shard asks it of every parameter because it shards strided ones only: use "
        "torch_sparsefill.distributed.fully_shard, which keeps SparseFillTensor parameters "
        "whole on every rank (RFC.md#distributed)")


def data_get(self):
    """``A.data``: the same components, detached (like ``A.detach()``)."""
    return self.detach()


def data_set(self, new):
    """``A.data = B``: A takes B's components (pattern, values, fill), dtype
    and device, as a dense tensor takes a new storage (``Module.to`` converts
    parameters this way, keeping the objects optimisers hold). A's values and
    fill stay the same leaf tensors with B's data. Sizes and layouts must match.
    """
    if not isinstance(new, SparseFillTensor):
        raise RuntimeError(f"A.data = ...: expected a SparseFillTensor, got a "
                           f"{type(new).__name__}")
    for attr in ("shape", "layout"):
        if getattr(new, attr) != getattr(self, attr):
            raise RuntimeError(f"A.data = B: B has {attr} {getattr(new, attr)}, A has "
                               f"{getattr(self, attr)}; use B itself instead")
    with torch._C.DisableTorchFunctionSubclass():
        T.data.__set__(self, new)  # the wrapper's dtype and device
    self._sf_indices, self._sf_crow, self._sf_col = new._sf_indices, new._sf_crow, new._sf_col
    self._sf_coalesced, self._sf_coalesced_flag = new._sf_coalesced, new._sf_coalesced_flag
    self._sf_blocksize = new._sf_blocksize
    self._sf_values.data = new._sf_values.detach()
    self._sf_fill.data = new._sf_fill.detach()
    self._after_inplace()


def has_compatible_shallow_copy_type(a, b) -> bool:
    """Two SparseFillTensors can take each other's data (``A.data = B``)."""
    if isinstance(a, SparseFillTensor) and isinstance(b, SparseFillTensor):
        return True
    return False


ROUTES = {
    T.copy_: copy_, T.fill_: fill_, torch.fill_: fill_,
    T.item: item, T.tolist: tolist,
    T.__bool__: _python(bool), T.__float__: _python(float), T.__int__: _python(int),
    T.__complex__: _python(complex),
    torch.isclose: isclose, T.isclose: isclose, torch.allclose: allclose, T.allclose: allclose,
    torch.equal: equal, T.equal: equal,
    T.nbytes.__get__: nbytes, T.type: type_,
    T.share_memory_: share_memory_, T.is_shared: is_shared,
    T.pin_memory: pin_memory, T.is_pinned: is_pinned, T.numpy: numpy,
    T.is_contiguous: is_contiguous,
    T.data.__get__: data_get, T.data.__set__: data_set,
    torch._has_compatible_shallow_copy_type: has_compatible_shallow_copy_type,
}
