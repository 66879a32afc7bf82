"""The op-chain differential fuzzer: random programs of 1-6 ops
drawn from every family the library routes, run on SparseFillTensors and on
their dense equivalents, which must agree.

A program starts from one random operand (COO, CSR, CSC, BSR or BSC; plain,
hybrid or 3-D, a 3-D compressed one batched; empty, random, all-stored or
uncoalesced; fill 0, 1.5, -1, -inf, +inf, nan or a per-slice fill; float64,
float32, int64, bool, float16, bfloat16 (values and fills of 1e2-1e4 half
the time) or complex64) and applies ops one after another; binary, ternary,
product and concatenation steps draw further operands (SparseFillTensors,
strided tensors, of the program's dtype or another, 0-d or over the dense
part, some of them leaves that need a gradient, numbers). Every SparseFillTensor
operand is built from leaf components (values, fill) and has a dense twin
built from the same leaves in plain torch (`fill` everywhere, `values`
added at the stored positions), so the dense program's gradients with
respect to the leaves are the dense gradients mapped to the components.

Checks, per program:
  1. forward: the result equals the dense program's (same dtype and shape,
     NaN and infinity positions equal, finite values within tolerance);
  2. first order: the gradients of sum(W * result) with respect to every
     leaf (values and fill of every operand) equal the dense ones;
  3. second order (float64): the Hessian-vector products of that loss with a
     random direction equal the dense ones.
A NotImplementedError from the sparse program is a clean refusal: counted
and listed, never a failure. Any other outcome that differs from dense is a
failure: a wrong value, an exception dense torch does not raise, or a
result where dense torch raises.

Tolerances: integer and bool results are compared exactly, and so are the
positions of NaN and of each infinity. Finite floating values satisfy
|sparse - dense| <= rtol * (|dense| + scale), scale the largest finite
magnitude of the dense result (at least 1): rtol 1e-12 (float64) or 1e-6
(float32) for programs of ops that compute element by element (element-wise,
shape, indexing, concatenation, conversions: the same arithmetic on the same
numbers, though vectorised differently, so a last-place difference in a
transcendental function is allowed), 1e-9 or 1e-4 where an op sums
(reductions, products, softmax, and every fill gradient, a sum over the
unspecified elements), since the summation order differs from dense.
Gradients take float32's tolerance where any leaf is float32 (its gradient,
and second order the chain through its cast, is rounded to float32 where
each program places the cast).

Half results (float16, bfloat16) are judged against dense's own error:
the program is rerun in float64, and each finite element must lie within
twice dense's distance to that reference plus two units of the half dtype's
rounding (`compare_half`); their gradients and complex ones are not
compared. Complex results are compared part by part, except where dense is
not finite (torch's own complex kernels disagree there). A fill that covers
no element is in no value below.

Gradients are compared where every value on the way (operands and each
step's dense result) is finite. With an infinity or NaN on the way, dense
autograd's own result depends on how torch represents a zero gradient
(undefined or a tensor of zeros) and on per-element products 0 * inf that a
fill's single gradient cannot reproduce; there only the forward is checked
(`--strict-grad` checks gradients too, to study those cases). Where a
dense gradient is inf or NaN, the sparse one must be inf or NaN as well, of
either class: a fill's gradient is one number standing for a sum of
per-element products (0 * inf, inf - inf), whose class depends on them.

Reproducible: program i of a run with seed S uses seed S + i; a failure
prints the seed, the program and the command that replays it:
    .venv/bin/python tools/fuzz_ops.py --seed <seed> -n 1 -v
`make fuzz-ops N=...` runs many; `make test` runs seeds 0-5999
(test/crosscutting/test_fuzz_ops.py).
"""
from __future__ import annotations

import argparse
import math
import random
import re
import sys
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.distributed as dist
import torch.nn.functional as F
import yaml

import torch_sparsefill as sf
from torch_sparsefill.functions import nn as _nn
from torch_sparsefill.functions import routing as _routing
from torch_sparsefill.ops import elementwise as _generated_ops
from torch_sparsefill.tensor import args as _args

T = torch.Tensor
ROOT = Path(__file__).resolve().parent.parent
SPEC = {op["name"]: op for op in
        yaml.safe_load((ROOT / "tools/codegen/elementwise.yaml").read_text())["ops"]}
FLOAT_FILLS = [0.0, 1.5, -1.0, -math.inf, math.inf, math.nan]
# Large fills and values (1e2-1e4): where a half accumulation would
# overflow or round away what dense's float32 accumulation keeps.
LARGE = [1e2, -3e3, 1e4]
HALVES = (torch.float16, torch.bfloat16)
DTYPES = [torch.float64, torch.float64, torch.float32, torch.int64, torch.bool,
          torch.float16, torch.bfloat16, torch.complex64]
# The dtypes of a plain operand of another dtype than the program's.
PLAIN_DTYPES = [torch.float64, torch.float32, torch.float16, torch.int64, torch.bool]


# ---- operands -------------------------------------------------------------------------

@dataclass
class Operand:
    """A SparseFillTensor made from leaves, and its dense twin in plain torch."""
    indices: torch.Tensor  # (sparse_dim, nse), possibly uncoalesced
    values: torch.Tensor
    fill: torch.Tensor
    size: tuple
    layout: torch.layout
    desc: str
    blocksize: tuple = (1, 1)

    def leaves(self):
        return [t for t in (self.values, self.fill) if t.requires_grad]

    def sparse(self):
        A = sf.sparse_coo_tensor(self.indices, self.values, self.size, fill_value=self.fill)
        if self.layout == torch.sparse_csr:
            return A.to_sparse_csr()
        if self.layout == torch.sparse_csc:
            return A.to_sparse_csc()
        if self.layout in (torch.sparse_bsr, torch.sparse_bsc):
            convert = A.to_sparse_bsr if self.layout == torch.sparse_bsr else A.to_sparse_bsc
            return convert(self.blocksize)
        return A

    def stored(self):
        """Whether each element is stored (the pattern)."""
        mask = torch.zeros(self.size[:self.indices.shape[0]], dtype=torch.bool)
        if self.indices.shape[1]:
            mask[tuple(self.indices)] = True
        return mask.reshape(mask.shape + (1,) * (len(self.size) - self.indices.shape[0])) \
            .expand(self.size)

    def dense(self, wide=False):
        """The dense twin; `wide`: built from float64 (complex128) leaves, so
        that the reference sums duplicates exactly, not in the half dtype."""
        if wide and (self.values.dtype.is_floating_point or self.values.dtype.is_complex):
            return Operand(self.indices, _widen(self.values), _widen(self.fill), self.size,
                           self.layout, self.desc, self.blocksize).dense()
        sd = self.indices.shape[0]
        nd = len(self.size)
        f = self.fill.reshape((1,) * (nd - self.fill.dim()) + tuple(self.fill.shape))
        f = f.expand(self.size)
        if sd == 0:  # one position, the whole dense part: stored (summed) or the fill
            if not self.values.shape[0]:
                return f.clone()
            return self.values.any(0) if self.values.dtype == torch.bool else self.values.sum(0)
        stored = torch.zeros(self.size[:sd], dtype=torch.bool)
        stored[tuple(self.indices)] = True
        stored = stored.reshape(tuple(self.size[:sd]) + (1,) * (nd - sd))
        base = torch.where(stored, torch.zeros((), dtype=f.dtype), f)
        if self.values.dtype == torch.bool:
            put = torch.zeros(self.size, dtype=torch.bool).index_put(tuple(self.indices),
                                                                    self.values, accumulate=True)
            return base | put
        put = torch.zeros(self.size, dtype=self.values.dtype).index_put(
            tuple(self.indices), self.values, accumulate=True)
        if self.values.dtype.is_complex:  # 0 + (inf - 1j) is inf + nanj in complex arithmetic
            return torch.where(stored, put, f)
        return base + put


def random_values(g: random.Random, n, dense_shape, dtype):
    gen = torch.Generator().manual_seed(g.randrange(2 ** 31))
    shape = (n,) + tuple(dense_shape)
    if dtype == torch.bool:
        return torch.rand(shape, generator=gen) < 0.5
    if not (dtype.is_floating_point or dtype.is_complex):
        return torch.randint(-4, 5, shape, generator=gen).to(dtype)
    v = torch.randn(shape, generator=gen, dtype=torch.float64)
    if dtype in HALVES and g.random() < 0.5:  # magnitudes a half sum overflows with
        v = v * g.choice([1e2, 1e3, 1e4])
    if g.random() < 0.1 and v.numel():  # a non-finite stored value now and then
        v.view(-1)[g.randrange(v.numel())] = g.choice([math.inf, -math.inf, math.nan])
    if dtype.is_complex:
        w = torch.randn(shape, generator=gen, dtype=torch.float64)
        return torch.complex(v, w).to(dtype)
    return v.to(dtype)


def random_fill(g: random.Random, dtype, size, sparse_dim, dense_shape):
    """A scalar fill, or now and then a per-slice fill (2-D) or a dense-part fill."""
    def scalar():
        if dtype == torch.bool:
            return g.random() < 0.5
        if not (dtype.is_floating_point or dtype.is_complex):
            return g.choice([0, 2, -3])
        if dtype in HALVES and g.random() < 0.5:
            return g.choice(LARGE)
        return g.choice(FLOAT_FILLS)
    r = g.random()
    if r < 0.15 and sparse_dim == 2 and not dense_shape and len(size) == 2:
        shape = g.choice([(size[0], 1), (1, size[1])])
        vals = [scalar() for _ in range(shape[0] * shape[1])]
        return torch.tensor(vals, dtype=dtype).reshape(shape), f"per-slice{shape}"
    if r < 0.25 and dense_shape:
        vals = [scalar() for _ in range(dense_shape[-1])]
        return torch.tensor(vals, dtype=dtype), "dense-part"
    s = scalar()
    return torch.tensor(s, dtype=dtype), repr(s)


def make_operand(g: random.Random, dtype, size=None, sparse_dim=None, layout=None,
                 requires_grad=True) -> Operand:
    """A random operand; `size` etc. fixed when given (a second operand)."""
    if size is None:
        kind = g.random()
        if kind < 0.7:
            size, sparse_dim = (g.randint(0, 5), g.randint(0, 5)), 2
            if g.random() < 0.8:
                size = (max(size[0], 1), max(size[1], 1))
        elif kind < 0.85:
            size, sparse_dim = (g.randint(1, 4), g.randint(1, 4), g.randint(1, 3)), 2  # hybrid
        else:
            size, sparse_dim = (g.randint(1, 3), g.randint(1, 4), g.randint(1, 4)), 3
    dense_shape = tuple(size[sparse_dim:])
    if layout is None:
        # compressed: plain, hybrid (a dense dim) or batched (a leading batch
        # dim, RFC.md#batched-compressed) alike
        layout = torch.sparse_csr if sparse_dim >= 2 and g.random() < 0.35 else torch.sparse_coo
        if layout == torch.sparse_csr and g.random() < 0.3:  # the layouts of RFC.md#compressed-layouts
            layout = g.choice([torch.sparse_csc, torch.sparse_bsr, torch.sparse_bsc])
    positions = 1
    for s in size[:sparse_dim]:
        positions *= s
    pattern = g.choice(["empty", "random", "random", "all", "uncoalesced"])
    if pattern == "empty" or positions == 0:
        lin = []
    elif pattern == "all":
        lin = list(range(positions))
    else:
        lin = sorted(g.sample(range(positions), g.randint(1, positions)))
        if pattern == "uncoalesced" and layout == torch.sparse_coo:
            lin = lin + [g.choice(lin) for _ in range(g.randint(1, 3))]
            g.shuffle(lin)
    idx = []
    for lin_i in lin:
        coord = []
        for s in reversed(size[:sparse_dim]):
            coord.append(lin_i % s)
            lin_i //= s
        idx.append(list(reversed(coord)))
    indices = torch.tensor(idx, dtype=torch.int64).reshape(len(idx), sparse_dim).t().contiguous()
    values = random_values(g, len(lin), dense_shape, dtype)
    fill, fdesc = random_fill(g, dtype, size, sparse_dim, dense_shape)
    if requires_grad and dtype.is_floating_point and dtype not in HALVES:
        values.requires_grad_()
        fill.requires_grad_()
    blocksize = (1, 1)
    if layout in (torch.sparse_bsr, torch.sparse_bsc):
        rows, cols = size[sparse_dim - 2:sparse_dim]  # a batched operand's: one matrix's
        blocksize = g.choice([(1, 1), (max(rows, 1), max(cols, 1))])
    lay = str(layout).replace("torch.sparse_", "")
    desc = f"{lay}{tuple(size)} sd={sparse_dim} {pattern} nse={len(lin)} fill={fdesc} {dtype}"
    if layout in (torch.sparse_bsr, torch.sparse_bsc):
        desc += f" blocksize={blocksize}"
    return Operand(indices, values, fill, tuple(size), layout, desc, blocksize)


# ---- the ops: one recipe per routed callable -------------------------------------------

X = object()  # where the current value goes in a step's arguments


@dataclass
class Step:
    name: str
    func: object
    args: tuple
    kwargs: dict = field(default_factory=dict)
    sums: bool = False      # summation order differs from dense
    inplace: bool = False
    pick: int | None = None  # element of a tuple result to continue with

    def __str__(self):
        def show(a):
            if a is X:
                return "x"
            if isinstance(a, (Operand, Pattern)):
                return f"<{a.desc}>"
            if isinstance(a, torch.Tensor):
                return f"tensor{tuple(a.shape)}:{a.dtype}"
            if isinstance(a, (list, tuple)):
                inner = ", ".join(show(v) for v in a)
                return f"[{inner}]" if isinstance(a, list) else f"({inner})"
            return repr(a)
        args = ", ".join([show(a) for a in self.args] +
                         [f"{k}={show(v)}" for k, v in self.kwargs.items()])
        return f"{self.name}({args})" + (f"[{self.pick}]" if self.pick is not None else "")


def _name(func):
    return _args.name(func)


def _sd(x):
    """x's sparse dims in its COO form: batch dims of a batched compressed
    tensor count (its own sparse_dim() is 2, as torch's)."""
    return x.dim() - x.dense_dim()


def _other_like(g, x, dtype):
    """A second operand for a binary op on x: a SparseFillTensor of x's size,
    a strided tensor (x's size, or its dense part), or a number."""
    r = g.random()
    if r < 0.45:
        return make_operand(g, dtype, x.shape, _sd(x),
                            g.choice([x.layout, torch.sparse_coo]))
    if r < 0.75:
        shape = tuple(x.shape) if g.random() < 0.5 else tuple(x.shape[_sd(x):])
        if x.dim() == 2 and not x.dense_dim() and g.random() < 0.3:
            shape = g.choice([(x.shape[0], 1), (1, x.shape[1])])  # a per-slice fill to merge
        if g.random() < 0.25:
            shape = ()  # 0-d: torch's promotion lets it keep x's dtype
        return plain_operand(g, shape, g.choice(PLAIN_DTYPES) if g.random() < 0.3 else dtype)
    if dtype == torch.bool:
        return g.random() < 0.5
    if not dtype.is_floating_point:
        return g.choice([0, 2, -1])
    return g.choice([0.0, 2.5, -1.0, math.inf, math.nan, 3])


def plain_operand(g: random.Random, shape, dtype):
    """A strided operand; a floating one (not half) is now and then a leaf
    that needs a gradient, so that what reaches it through a fill that
    covers no element is checked too."""
    t = random_values(g, 1, shape, dtype)[0]
    if dtype in (torch.float64, torch.float32) and g.random() < 0.5:
        t.requires_grad_()
    return t


def _elementwise_recipes():
    """From the generated table: every routed element-wise callable."""
    recipes = []
    inplace = {fn for fn, _ in _generated_ops.INPLACE_ROUTES}
    routes = [(fn, name, refl) for fn, name, refl in _generated_ops.ROUTES] + \
             [(fn, name, False) for fn, name in _generated_ops.INPLACE_ROUTES]
    for fn, opname, reflected in routes:
        spec, gen = _generated_ops.OPS[opname], SPEC[opname]
        recipes.append((fn, _make_elementwise(fn, opname, spec, gen, fn in inplace, reflected)))
    return recipes


def _make_elementwise(fn, opname, spec, gen, inplace, reflected=False):
    kind = spec["kind"]

    def recipe(g, x):
        dtype = x.dtype
        extra = list(gen.get("test_args", []))
        if kind == "unary":
            # a reflected unary callable takes the args first: torch.polygamma(n, x)
            args = (*extra, X) if reflected else (X, *extra)
            return Step(_name(fn), fn, args, inplace=inplace)
        if kind == "binary":
            other = _other_like(g, x, dtype)
            if not spec["number"] and not isinstance(other, (Operand, torch.Tensor)):
                other = make_operand(g, dtype, x.shape, _sd(x))
            if opname in ("where",):
                return None
            return Step(_name(fn), fn, (X, other, *extra), inplace=inplace)
        # ternary: operands by torch's parameter names
        params = spec["params"]
        args = []
        for p in params:
            if p == "condition":
                args.append(make_operand(g, torch.bool, x.shape, _sd(x))
                            if g.random() < 0.6 else random_values(g, 1, x.shape, torch.bool)[0])
            elif p == "input":
                args.append(X)
            elif p in spec["missing"] and g.random() < 0.3:
                args.append(None)
            else:
                args.append(_other_like(g, x, dtype))
        if fn is torch.where:
            args[1] = X
            if not isinstance(args[2], (Operand, torch.Tensor)) and dtype == torch.bool:
                args[2] = make_operand(g, dtype, x.shape, _sd(x))
        elif X not in args:
            args[0] = X
        return Step(_name(fn), fn, tuple(args))
    return recipe


def _dim(g, x):
    return g.randrange(-x.dim(), x.dim()) if x.dim() else 0


def _reduction(fn, dims=True, keepdim=True, extra=None, float_only=False, tuple_out=False):
    def recipe(g, x):
        if float_only and not x.dtype.is_floating_point:
            return None
        kw = dict(extra(g, x)) if extra else {}
        args = (X,)
        if dims and x.dim() and g.random() < 0.7:
            args = (X, _dim(g, x))
            if keepdim and g.random() < 0.3:
                kw["keepdim"] = True
            return Step(_name(fn), fn, args, kw, sums=True, pick=0 if tuple_out else None)
        return Step(_name(fn), fn, args, kw, sums=True)
    return recipe


def _softmax(fn):
    def recipe(g, x):
        if not x.dtype.is_floating_point or x.dim() == 0:
            return None
        return Step(_name(fn), fn, (X, _dim(g, x)), sums=True)
    return recipe


def _mm(fn, vector=False, bias=False):
    def recipe(g, x):
        if x.dim() != 2 or not x.dtype.is_floating_point or x.dense_dim():
            return None
        m, k = x.shape
        if vector:
            return Step(_name(fn), fn, (X, random_values(g, 1, (k,), x.dtype)[0]), sums=True)
        n = g.randint(0, 3)
        r = g.random()
        if r < 0.4:
            other = random_values(g, 1, (k, n), x.dtype)[0]
        elif r < 0.7:
            other = make_operand(g, x.dtype, (k, n), 2)
        else:  # the sparse operand on the right
            left = random_values(g, 1, (n, m), x.dtype)[0]
            if bias:
                return None
            return Step(_name(fn), fn, (left, X), sums=True)
        if bias:
            b = random_values(g, 1, (m, n), x.dtype)[0] if g.random() < 0.5 else \
                make_operand(g, x.dtype, (m, n), 2)
            return Step(_name(fn), fn, (b, X, other), sums=True)
        return Step(_name(fn), fn, (X, other), sums=True)
    return recipe


def _matmul(fn):
    """torch.matmul: the 2-D products of _mm, and batched and broadcast
    forms (a 3-D sparse operand times a matrix or a batch of them, a matrix
    times a batch)."""
    two_d = _mm(fn)

    def recipe(g, x):
        if not x.dtype.is_floating_point or x.dense_dim():
            return None
        if x.dim() == 2:
            if g.random() < 0.7:
                return two_d(g, x)
            m, k = x.shape
            other = random_values(g, 1, (g.randint(1, 2), k, g.randint(0, 2)), x.dtype)[0]
            return Step(_name(fn), fn, (X, other), sums=True)
        if x.dim() != 3:
            return None
        b, m, k = x.shape
        n = g.randint(0, 2)
        shape = g.choice([(k, n), (b, k, n), (1, k, n), (k,)])
        return Step(_name(fn), fn, (X, random_values(g, 1, shape, x.dtype)[0]), sums=True)
    return recipe


def _bmm(fn):
    def recipe(g, x):
        if x.dim() != 3 or _sd(x) != 3 or not x.dtype.is_floating_point:
            return None
        b, m, k = x.shape
        return Step(_name(fn), fn, (X, random_values(g, 1, (b, k, 2), x.dtype)[0]), sums=True)
    return recipe


def _shape_recipes():
    def permute(g, x):
        p = list(range(x.dim()))
        g.shuffle(p)
        return (X, p)

    def transpose(g, x):
        return (X, _dim(g, x), _dim(g, x)) if x.dim() else None

    def reshape(g, x):
        return (X, (-1,)) if g.random() < 0.5 else (X, tuple(x.shape) + (1,))

    def expand(g, x):
        return (X, (2,) + tuple(x.shape))

    def narrow(g, x):
        if not x.dim():
            return None
        d = _dim(g, x)
        n = x.shape[d]
        start = g.randint(0, n)
        return (X, d, start, g.randint(0, n - start))

    def select(g, x):
        dims = [d for d in range(x.dim()) if x.shape[d] > 0]
        if not dims:
            return None
        d = g.choice(dims)
        return (X, d, g.randrange(-x.shape[d], x.shape[d]))

    def index_select(g, x):
        if not x.dim():
            return None
        d = _dim(g, x)
        n = x.shape[d]
        idx = [g.randrange(n) for _ in range(g.randint(0, 4))] if n else []
        return (X, d, torch.tensor(idx, dtype=torch.int64))

    def getitem(g, x):
        dims = [d for d in range(x.dim()) if x.shape[d] > 0]
        if not dims:
            return None
        r = g.random()
        if r < 0.4:
            return (X, g.randrange(x.shape[0])) if x.shape[0] else None
        if r < 0.7:
            return (X, (slice(None), slice(0, None, 2)) if x.dim() > 1 else slice(1, None))
        return (X, (Ellipsis, None))

    def split(g, x):
        return (X, g.randint(1, 3), _dim(g, x)) if x.dim() else None

    def cat(g, x):
        if not x.dim():
            return None
        d = g.randrange(x.dim())
        size = list(x.shape)
        size[d] = g.randint(0, 3)
        other = make_operand(g, x.dtype, tuple(size), _sd(x))
        return ([X, other], d)

    def stack(g, x):
        other = make_operand(g, x.dtype, tuple(x.shape), _sd(x))
        return ([X, other],)

    def one(g, x):
        return (X,)

    def dim_arg(g, x):
        return (X, _dim(g, x)) if x.dim() else None

    def squeeze(g, x):
        return (X,) if g.random() < 0.5 or not x.dim() else (X, _dim(g, x))

    def unsqueeze(g, x):
        return (X, g.randrange(-x.dim() - 1, x.dim() + 1))

    def flatten(g, x):
        return (X,)

    table = [
        ([T.permute, torch.permute], permute), ([T.transpose, torch.transpose, T.swapaxes,
         torch.swapaxes, T.swapdims, torch.swapdims], transpose),
        ([T.t, torch.t], lambda g, x: (X,) if x.dim() <= 2 else None),
        ([T.mT.__get__], lambda g, x: (X,) if x.dim() >= 2 else None),
        ([T.T.__get__], lambda g, x: (X,) if x.dim() == 2 else None),
        ([T.unsqueeze, torch.unsqueeze], unsqueeze), ([T.squeeze, torch.squeeze], squeeze),
        ([T.reshape, torch.reshape, T.view], reshape), ([T.flatten, torch.flatten], flatten),
        ([T.expand], expand), ([T.expand_as], lambda g, x: (X, torch.empty((2,) + tuple(x.shape)))),
        ([T.contiguous], one),
        ([T.narrow, torch.narrow, T.narrow_copy, torch.narrow_copy], narrow),
        # torch's own select and index_select: torch_geometric replaces the module
        # attributes by wrappers when imported, after the routing table was built
        ([T.select, torch._C._VariableFunctions.select], select),
        ([T.index_select, torch._C._VariableFunctions.index_select], index_select),
        ([T.__getitem__], getitem),
        ([T.unbind, torch.unbind], lambda g, x: (X, _dim(g, x)) if x.dim() and
         x.shape[_dim(g, x)] else None),
        ([T.split, torch.split], split), ([T.chunk, torch.chunk], split),
        ([torch.cat, torch.concat, torch.concatenate], cat),
        ([torch.stack, torch.hstack, torch.vstack, torch.dstack], stack),
        # conversions and the methods SparseFillTensor implements
        ([T.to_dense, T.clone, torch.clone, T.detach, torch.detach, T.contiguous, T.cpu], one),
        ([T.coalesce], lambda g, x: (X,) if x.layout == torch.sparse_coo else None),
        ([T.where], lambda g, x: (X, random_values(g, 1, tuple(x.shape), torch.bool)[0],
                                  _other_like(g, x, x.dtype))),
        ([T.to_sparse_coo], one),
        ([T.to_sparse_csr], lambda g, x: (X,) if _sd(x) == 2 or (_sd(x) == 3 and not
                                                                 x.dense_dim()) else None),
        ([T.to_sparse], lambda g, x: (X,)),
        ([T.to], lambda g, x: (X, g.choice([torch.float64, torch.float32, torch.int64,
                                             torch.bool]))),
        ([T.double, T.float, T.long, T.bool, T.int], one),
    ]
    out = []
    for funcs, make in table:
        for fn in funcs:
            out.append((fn, _arg_recipe(fn, make, tuple_out=fn in (T.unbind, torch.unbind, T.split,
                                                                     torch.split, T.chunk,
                                                                     torch.chunk))))
    return out


def _arg_recipe(fn, make, tuple_out=False):
    def recipe(g, x):
        args = make(g, x)
        if args is None:
            return None
        return Step(_name(fn), fn, tuple(args), pick=0 if tuple_out else None,
                    inplace=fn in (T.detach, torch.detach))
    return recipe


# ---- the families that joined later: methods, nn, creation, in-place, layouts ----------

def _py(v):
    """A Python result (number, bool, nested list) as a tensor to compare;
    floats in float64 so that a float64 element is not rounded."""
    if isinstance(v, complex):
        return torch.view_as_real(torch.tensor(v, dtype=torch.complex128))
    if isinstance(v, float) or (isinstance(v, list) and _any_float(v)):
        return torch.tensor(v, dtype=torch.float64)
    return torch.tensor(v)


def _any_float(v):
    return any(_any_float(e) if isinstance(e, list) else isinstance(e, float) for e in v)


def _to_python(fn):
    """x -> fn(x) (a Python value) -> a tensor; the same call on both programs."""
    def call(x, *args, **kwargs):
        return _py(fn(x, *args, **kwargs))
    call.__name__ = _name(fn)
    return call


def _in_place_copy(fn):
    """fn applied in place to a copy of x (a list of one tensor for the
    foreach forms), returning the updated copy."""
    def call(x, *args, **kwargs):
        if isinstance(x, list):
            xs = [t.clone() for t in x]
            fn(xs, *args, **kwargs)
            return xs[0]
        y = x.clone()
        out = fn(y, *args, **kwargs)
        return y if out is None else out
    call.__name__ = _name(fn)
    return call


def _kron_of_contiguous(x, other):
    """torch.kron of a contiguous x: torch's own kron views a transposed
    strided input and raises (seed 42977); a SparseFillTensor has no strides."""
    return torch.kron(x.contiguous(), other)


def _set_data(x, other):
    y = x.detach().clone()
    y.data = other
    return y


def _unscale(x, inv_scale):
    xs, found = [x.detach().clone()], torch.zeros(())
    torch._amp_foreach_non_finite_check_and_unscale_(xs, found, inv_scale)
    return xs[0] * (found + 1)


def _sparse_sum(x, *args):
    return torch.sparse.sum(x, *args)


def _dense_sum(x, *args):
    return torch.sum(x, *args) if args else torch.sum(x)


def _native_norm(x):
    return torch.native_norm(x)


def _dense_native_norm(x):
    return torch.linalg.vector_norm(x)


def _sampled_addmm(p, m1, m2, beta=1.0, alpha=1.0):
    # mat1 is the program's value, strided as torch requires
    m1 = m1.to_dense() if isinstance(m1, sf.SparseFillTensor) else m1
    return torch.sparse.sampled_addmm(p, m1, m2, beta=beta, alpha=alpha)


def _dense_sampled_addmm(p, m1, m2, beta=1.0, alpha=1.0):
    dense, stored = p
    product = torch.where(stored, alpha * (m1 @ m2), torch.zeros((), dtype=dense.dtype))
    return beta * dense + product if beta != 0 else product


def _sparse_mask(strided, mask):
    return strided.sparse_mask(mask)


def _dense_sparse_mask(strided, mask):
    _dense, stored = mask
    return torch.where(stored, strided, torch.zeros((), dtype=strided.dtype))


@dataclass
class Pattern:
    """An operand whose stored positions the dense program needs too (sampled
    products, masks): the dense side gets (dense tensor, stored-position mask)."""
    operand: Operand

    @property
    def desc(self):
        return self.operand.desc


def _other_same(g, x, dtype=None, strided_p=0.3):
    """A SparseFillTensor or strided operand of x's shape (no numbers)."""
    dtype = dtype or x.dtype
    if g.random() < strided_p:
        return random_values(g, 1, tuple(x.shape), dtype)[0]
    return make_operand(g, dtype, tuple(x.shape), _sd(x),
                        g.choice([x.layout, torch.sparse_coo]))


def _foreach_recipe(fn):
    """A recipe for torch._foreach_<op>(_) on the list [x]."""
    op = fn.__name__[len("_foreach_"):]
    base = op.rstrip("_")
    inplace = op.endswith("_")
    func = _in_place_copy(fn) if inplace else fn

    def recipe(g, x):
        floating = x.dtype.is_floating_point
        if base in ("add", "sub", "mul", "div", "maximum", "minimum", "clamp_min",
                    "clamp_max", "pow"):
            if x.dtype == torch.bool or (base == "sub" and x.dtype == torch.bool):
                return None
            other = _other_like(g, x, x.dtype)
            if isinstance(other, Operand) or isinstance(other, torch.Tensor):
                other = [other]
            elif base in ("maximum", "minimum"):
                return None
            args = ([X], other)
        elif base in ("addcmul", "addcdiv"):
            if not floating:
                return None
            args = ([X], [_other_same(g, x)], [_other_same(g, x)], g.choice([1, 0.5, -2.0]))
        elif base == "lerp":
            if not floating:
                return None
            args = ([X], [_other_same(g, x)], g.choice([0.0, 0.25, 1.0]))
        elif base == "copy":
            args = ([X], [_other_same(g, x)])
        elif base == "mm":
            if x.dim() != 2 or x.dense_dim() or not floating:
                return None
            args = ([X], [random_values(g, 1, (x.shape[1], 2), x.dtype)[0]])
        elif base in ("norm", "max"):
            if not floating:
                return None
            args = ([X],)
        else:  # unary
            if not floating and base not in ("abs", "neg", "sign", "zero", "clone", "ceil",
                                             "floor", "round", "trunc"):
                return None
            if x.dtype == torch.bool and base in ("neg", "sign"):
                return None
            args = ([X],)
        sums = base in ("norm", "mm", "max")
        return Step(_name(fn), func, args, sums=sums, pick=None if inplace else 0)
    return recipe


def _family_recipes():
    """(routed callable, recipe) for the routes of the families that joined
    after the first recipes: tensor methods, nn and optimisers, creation,
    in-place pattern changes, sparse results, attention, layouts."""
    def numel1(g, x):
        return (X,) if x.numel() == 1 else None

    def other_arg(g, x):
        return (X, _other_same(g, x))

    def like_size(g, x):
        return (X, tuple(x.shape))

    def fill_value(g, x):
        if x.dtype == torch.bool:
            return g.random() < 0.5
        return g.choice([0, 2, -3]) if not x.dtype.is_floating_point else \
            g.choice([0.0, 2.5, math.inf, math.nan])

    def addc(g, x):
        if not x.dtype.is_floating_point:
            return None
        return (X, _other_same(g, x), _other_same(g, x))

    def linear(g, x):
        if x.dim() != 2 or x.dense_dim() or not x.dtype.is_floating_point:
            return None
        m, k = x.shape
        if g.random() < 0.5:  # x the weight (out, in): a strided input
            inp = random_values(g, 1, (g.randint(0, 3), k), x.dtype)[0]
            bias = random_values(g, 1, (m,), x.dtype)[0] if g.random() < 0.5 else None
            return (inp, X, bias)
        return (X, random_values(g, 1, (2, k), x.dtype)[0])

    def tri(g, x):
        return (X, g.randint(-2, 2)) if x.dim() >= 2 else None

    def reflected(g, x):  # number / x, plain / x: torch's reciprocal() * other
        return (X, _other_like(g, x, x.dtype))

    def ldexp(g, x):  # x * 2 ** other, the power taken in other's dtype (seed 510512)
        other = _other_like(g, x, g.choice([x.dtype, torch.float16, torch.float32, torch.int64]))
        if not isinstance(other, (Operand, torch.Tensor)):
            other = plain_operand(g, (), g.choice([torch.float16, torch.float32, torch.int64]))
        return (X, other)

    def float_power(g, x):  # each operand cast to float64 on its own (seed 772537)
        return (X, _other_like(g, x, g.choice([x.dtype, torch.float16, torch.float32,
                                               torch.float64])))

    def einsum(g, x):
        # The contractions _einsum maps onto products, sums and transposes.
        if not x.dtype.is_floating_point or x.dense_dim() or x.dim() not in (2, 3):
            return None
        if x.dim() == 2:
            m, k = x.shape
            eq, shape = g.choice([("ij->i", None), ("ij->ji", None), ("ij->", None),
                                  ("ij,jk->ik", (k, 2)), ("ij,ij->ij", (m, k)),
                                  ("ij,j->i", (k,))])
        else:
            b, m, k = x.shape
            eq, shape = g.choice([("bij->bj", None), ("bij,bjk->bik", (b, k, 2))])
        if shape is None:
            return (eq, X)
        return (eq, X, random_values(g, 1, shape, x.dtype)[0])

    def transpose_(g, x):
        return (X, _dim(g, x), _dim(g, x)) if x.dim() else None

    def t_(g, x):
        return (X,) if x.dim() <= 2 else None

    def baddbmm(g, x):
        if x.dim() != 3 or _sd(x) != 3 or not x.dtype.is_floating_point:
            return None
        b, m, k = x.shape
        n = g.randint(0, 3)
        if g.random() < 0.5:
            bias = random_values(g, 1, (b, m, n), x.dtype)[0]
            return (bias, X, random_values(g, 1, (b, k, n), x.dtype)[0])
        return (X, random_values(g, 1, (b, m, k), x.dtype)[0],
                random_values(g, 1, (b, k, k), x.dtype)[0])

    def smm(g, x):
        if x.dim() != 2 or x.dense_dim() or not x.dtype.is_floating_point:
            return None
        return (X, random_values(g, 1, (x.shape[1], g.randint(0, 3)), x.dtype)[0])

    def sspaddmm(g, x):
        if x.dim() != 2 or x.dense_dim() or not x.dtype.is_floating_point:
            return None
        m, k = x.shape
        n = g.randint(0, 3)
        bias = make_operand(g, x.dtype, (m, n), 2, torch.sparse_coo)
        return (bias, X, random_values(g, 1, (k, n), x.dtype)[0])

    def sampled(g, x):
        if x.dim() != 2 or x.dense_dim() or not x.dtype.is_floating_point:
            return None
        m, k = x.shape
        n = g.randint(0, 3)
        pattern = Pattern(make_operand(g, x.dtype, (m, n), 2, torch.sparse_csr))
        return (pattern, X, random_values(g, 1, (k, n), x.dtype)[0])

    def mask(g, x):
        if x.dtype == torch.bool:
            return None
        # a COO pattern: a block layout's pattern is its whole blocks, not the indices
        return (random_values(g, 1, tuple(x.shape), x.dtype)[0],
                Pattern(make_operand(g, x.dtype, tuple(x.shape), _sd(x),
                                     torch.sparse_coo)))

    def sdpa(g, x):
        if x.dim() != 2 or x.dense_dim() or x.dtype not in (torch.float64, torch.float32,
                                                             torch.bool):
            return None
        L, S = x.shape
        dt = torch.float64 if x.dtype == torch.bool else x.dtype
        # finite q, k, v: with an inf or nan in v, torch's own kernels disagree on
        # which fully masked rows come out nan
        gen = torch.Generator().manual_seed(g.randrange(2 ** 31))
        q, k, v = (torch.randn(shape, generator=gen, dtype=dt) for shape in ((2, L, 3), (2, S, 3),
                                                                              (2, S, 2)))
        return (q, k, v, X)

    def dropout(g, x):
        if not x.dtype.is_floating_point:
            return None
        return (X, g.choice([0.0, 1.0])) if g.random() < 0.5 else (X, 0.5, False)

    def to_block(g, x):
        if x.dim() != 2 or x.dense_dim():
            return None
        m, n = x.shape
        return (X, g.choice([(1, 1), (max(m, 1), max(n, 1))]))

    def two_d(g, x):
        return (X,) if x.dim() == 2 and not x.dense_dim() else None

    def vector_norm(g, x):
        if not x.dtype.is_floating_point:
            return None
        return (X, g.choice([2, 1, math.inf, 0, 3]))

    def unscale(g, x):
        if not x.dtype.is_floating_point:
            return None
        return (X, torch.tensor(g.choice([0.5, 2.0])))  # float32, as GradScaler passes

    def sum_dims(g, x):
        if x.dtype == torch.bool:
            return None
        if not x.dim() or g.random() < 0.3:
            return (X,)
        return (X, _dim(g, x))

    def mH(g, x):
        return (X,) if x.dim() >= 2 else None

    py = _to_python
    table = [
        # (routed callables, argument maker, the function the step calls, kwargs maker)
        ([T.copy_], other_arg, _in_place_copy(T.copy_)),
        ([T.fill_], lambda g, x: (X, fill_value(g, x)), _in_place_copy(T.fill_)),
        ([torch.fill_], lambda g, x: (X, fill_value(g, x)), _in_place_copy(torch.fill_)),
        ([T.item], numel1, py(T.item)),
        ([T.tolist], lambda g, x: (X,), py(T.tolist)),
        ([T.__bool__], numel1, py(T.__bool__)), ([T.__float__], numel1, py(T.__float__)),
        ([T.__int__], lambda g, x: (X,) if x.numel() == 1 and not x.dtype.is_floating_point
         else None, py(T.__int__)),
        ([T.__complex__], numel1, py(T.__complex__)),
        ([torch.is_nonzero], numel1, py(torch.is_nonzero)),
        ([T.is_nonzero], numel1, py(T.is_nonzero)),
        ([torch.isclose], other_arg, torch.isclose), ([T.isclose], other_arg, T.isclose),
        ([torch.allclose], other_arg, py(torch.allclose)),
        ([T.allclose], other_arg, py(T.allclose)),
        ([torch.equal], other_arg, py(torch.equal)), ([T.equal], other_arg, py(T.equal)),
        ([torch.is_same_size], other_arg, py(torch.is_same_size)),
        ([T.is_same_size], other_arg, py(T.is_same_size)),
        ([T.type], lambda g, x: (X, g.choice([torch.float64, torch.int64])), T.type),
        ([T.data.__get__], lambda g, x: (X,), T.data.__get__),
        ([T.data.__set__], lambda g, x: (X, make_operand(g, x.dtype, tuple(x.shape),
                                                         _sd(x), x.layout)), _set_data),
        ([F.linear], linear, F.linear),
        ([torch.addcmul, T.addcmul], addc, None), ([torch.addcdiv, T.addcdiv], addc, None),
        ([T.addcmul_], addc, _in_place_copy(T.addcmul_)),
        ([T.addcdiv_], addc, _in_place_copy(T.addcdiv_)),
        ([torch.linalg.vector_norm], vector_norm, torch.linalg.vector_norm),
        ([torch._amp_foreach_non_finite_check_and_unscale_], unscale, _unscale),
        ([torch.zeros_like, torch.empty_like, torch.ones_like], lambda g, x: (X,), None),
        ([torch.full_like], lambda g, x: (X, fill_value(g, x)), torch.full_like),
        ([T.new_zeros, T.new_empty, T.new_ones], like_size, None),
        ([T.new_full], lambda g, x: (X, tuple(x.shape), fill_value(g, x)), T.new_full),
        ([T.new_tensor], lambda g, x: (X, [[1.5, -2.0], [0.0, 3.0]]), T.new_tensor),
        ([T.zero_], lambda g, x: (X,), _in_place_copy(T.zero_)),
        ([T.t_], t_, _in_place_copy(T.t_)),
        ([T.transpose_], transpose_, _in_place_copy(T.transpose_)),
        ([T.detach_], lambda g, x: (X,), _in_place_copy(T.detach_)),
        ([torch.detach_], lambda g, x: (X,), _in_place_copy(torch.detach_)),
        ([torch.smm, T.smm, torch.hspmm], smm, None),
        ([torch.sspaddmm], sspaddmm, torch.sspaddmm),
        ([T.sspaddmm], sspaddmm, T.sspaddmm),
        ([torch.sparse.sampled_addmm], sampled, _sampled_addmm),
        ([T.sparse_mask], mask, _sparse_mask),
        ([F.scaled_dot_product_attention], sdpa,
         lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m)),
        ([F.dropout], dropout, F.dropout),
        ([torch.tril, T.tril, torch.triu, T.triu], tri, None),
        ([T.__rtruediv__], reflected, None),
        ([torch.float_power, T.float_power], float_power, None),
        ([torch.ldexp, T.ldexp], ldexp, None), ([T.ldexp_], ldexp, _in_place_copy(T.ldexp_)),
        ([torch.einsum], einsum, None),
        ([torch.baddbmm, T.baddbmm], baddbmm, None),
        ([T.to_sparse_csc], two_d, T.to_sparse_csc),
        ([T.to_sparse_bsr], to_block, T.to_sparse_bsr),
        ([T.to_sparse_bsc], to_block, T.to_sparse_bsc),
        ([torch._sparse_sum], sum_dims, _sparse_sum),
        ([torch.native_norm], lambda g, x: (X,) if x.dtype.is_floating_point else None,
         _native_norm),
        ([T.mH.__get__], mH, T.mH.__get__),
    ]
    sums = {torch.linalg.vector_norm, torch._sparse_sum, torch.native_norm, F.linear,
            torch.smm, T.smm, torch.hspmm, torch.sspaddmm, T.sspaddmm,
            torch.sparse.sampled_addmm, F.scaled_dot_product_attention, torch.baddbmm,
            T.baddbmm, torch.einsum, torch.allclose, T.allclose, torch.isclose, T.isclose}
    out = []
    for fns, make, call in table:
        for fn in fns:
            out.append((fn, _family_recipe(fn, make, call or fn, fn in sums)))
    for fn in _nn.ROUTES:
        if getattr(fn, "__name__", "").startswith("_foreach_"):
            out.append((fn, _foreach_recipe(fn)))
    return out


def _family_recipe(fn, make, call, sums):
    def recipe(g, x):
        args = make(g, x)
        if args is None:
            return None
        return Step(_name(fn), call, tuple(args), sums=sums)
    return recipe


def _var_args(g, x):
    return {"correction": g.choice([0, 1])}


def _order_recipes():
    """(routed callable, recipe) for the order statistics (functions/order/):
    the values of each, the positions where torch fixes them (a stable
    sort, the first extreme)."""
    def along(fn, pick=None, float_only=False, extra=None, stable=False):
        def recipe(g, x):
            if x.dtype == torch.bool or not x.dim() or (float_only and
                                                         not x.dtype.is_floating_point):
                return None
            d = _dim(g, x)
            kw = dict(extra(g, x, d)) if extra else {}
            if stable:
                kw["stable"] = True
                kw["dim"] = d
                return Step(_name(fn), fn, (X,), kw, pick=g.choice([0, 1]))
            if extra is None and g.random() < 0.3:
                kw["keepdim"] = True
            return Step(_name(fn), fn, (X, d), kw, pick=pick)
        return recipe

    def k_arg(g, x, d):
        return {"k": g.randint(0, x.shape[d])} if x.shape[d] else None

    def kth_arg(g, x, d):
        return {"k": g.randint(1, x.shape[d])} if x.shape[d] else None

    def topk(fn, make):
        def recipe(g, x):
            if x.dtype == torch.bool or not x.dim() or not all(x.shape):
                return None
            d = _dim(g, x)
            return Step(_name(fn), fn, (X, make(g, x, d)["k"], d), pick=0)
        return recipe

    def over_all(fn, float_only=False, any_fill=False):
        def recipe(g, x):
            if x.dtype == torch.bool or not x.numel() or (float_only and
                                                          not x.dtype.is_floating_point):
                return None
            f = x.fill_value()  # (torch has no unique for complex)
            if not any_fill and f.numel() and not bool((f == f.reshape(-1)[0]).all()):
                return None  # several fills: refused over all elements (RFC)
            return Step(_name(fn), fn, (X,))
        return recipe

    def slices_or_all(fn):
        """unique's two forms: over every element (one fill), or of the
        slices along a dim (any fill)"""
        def wrapped(g, x):
            if x.dim() and g.random() < 0.4:
                step = over_all(fn, any_fill=True)(g, x)
                if step is not None:
                    step.kwargs = {"dim": _dim(g, x)}
                return step
            return over_all(fn)(g, x)
        return wrapped

    def pick_one(recipe):
        def wrapped(g, x):
            step = recipe(g, x)
            if step is not None:
                step.pick = g.choice([0, 1])
            return step
        return wrapped

    def nonempty(recipe):
        def wrapped(g, x):
            return recipe(g, x) if x.numel() else None
        return wrapped

    def quantile(fn):
        def recipe(g, x):
            if not x.dtype.is_floating_point or not x.dim() or not x.numel():
                return None
            mode = g.choice(["linear", "lower", "higher", "midpoint", "nearest"])
            q = g.choice([0.0, 0.25, 0.5, 1.0])
            return Step(_name(fn), fn, (X, q, _dim(g, x)), {"interpolation": mode}, sums=True)
        return recipe

    def argsort(fn):
        def recipe(g, x):
            if x.dtype == torch.bool or not x.dim():
                return None
            kw = {"dim": _dim(g, x), "stable": True, "descending": g.random() < 0.5}
            return Step(_name(fn), fn, (X,), kw)
        return recipe

    def scan(fn, pick=False, order=False, floats=False):
        def recipe(g, x):
            if x.dtype == torch.bool or not x.dim() or (floats and
                                                        not x.dtype.is_floating_point):
                return None
            d = _dim(g, x)
            if order:
                return Step(_name(fn), fn, (X, g.randint(0, 2), d))
            if floats:  # the trapezoids take dim= by keyword
                return Step(_name(fn), fn, (X,), {"dim": d}, sums=True)
            return Step(_name(fn), fn, (X, d), pick=g.choice([0, 1]) if pick else None,
                        sums=True)
        return recipe

    def gradient(fn):
        def recipe(g, x):
            if not x.dtype.is_floating_point or not x.dim():
                return None
            d = _dim(g, x)
            if x.shape[d] < 3:
                return None
            return Step(_name(fn), fn, (X,), {"dim": d, "edge_order": g.choice([1, 2])},
                        pick=0)
        return recipe

    def bucketize(fn):
        def recipe(g, x):
            if x.dtype == torch.bool:
                return None
            b = torch.tensor([-1.0, 0.0, 2.0], dtype=x.dtype if x.dtype.is_floating_point
                             else torch.int64)
            return Step(_name(fn), fn, (X, b), {"right": g.random() < 0.5})
        return recipe

    out = []
    for fns, make in [
        ([torch.sort, T.sort], along(None, stable=True)),
        ([torch.argsort, T.argsort], argsort(None)),
        ([torch.msort, T.msort], over_all(None)),
        ([torch.topk, T.topk], topk(None, k_arg)),
        ([torch.kthvalue, T.kthvalue], topk(None, kth_arg)),
        ([torch.median, T.median, torch.nanmedian, T.nanmedian], nonempty(along(None, pick=0))),
        ([torch.argmax, T.argmax, torch.argmin, T.argmin], nonempty(along(None))),
        ([torch.aminmax, T.aminmax], pick_one(over_all(None))),
        ([torch.quantile, T.quantile, torch.nanquantile, T.nanquantile], quantile(None)),
        ([torch.unique, T.unique, torch.unique_consecutive, T.unique_consecutive],
         slices_or_all(None)),
        ([torch.bucketize], bucketize(None)),
        ([torch.cumsum, T.cumsum, torch.cumprod, T.cumprod, torch.logcumsumexp,
          T.logcumsumexp], scan(None)),
        ([torch.cummax, T.cummax, torch.cummin, T.cummin], scan(None, pick=True)),
        ([torch.diff, T.diff], scan(None, order=True)),
        ([torch.cumulative_trapezoid, torch.trapezoid, torch.trapz], scan(None, floats=True)),
        ([torch.gradient], gradient(None)),
    ]:
        for fn in fns:
            out.append((fn, _rebind(fn, make)))
    return out + _indexing_recipes() + _shape_move_recipes()


def _shape_move_recipes():
    """(routed callable, recipe) for the shape ops that move, copy or pick
    elements (functions/shape/moves.py, copies.py)."""
    def make(kind):
        def recipe(g, x):
            nd = x.dim()
            if not nd:
                return None
            d = _dim(g, x) % nd
            if kind == "flip":
                return Step("flip", None, (X, [d]))
            if kind == "roll":
                return Step("roll", None, (X, g.randint(-3, 3), d))
            if kind == "rot90" and nd >= 2:
                return Step("rot90", None, (X, g.randint(-2, 3), [0, 1]))
            if kind == "movedim":
                return Step("movedim", None, (X, d, _dim(g, x) % nd))
            if kind == "tensor_split":
                return Step("tensor_split", None, (X, g.randint(1, 3), d), pick=0)
            if kind == "diagonal" and nd >= 2:
                return Step("diagonal", None, (X, g.randint(-1, 1), 0, 1))
            if kind == "repeat":
                return Step("repeat", None, (X, [g.randint(1, 2) for _ in range(nd)]))
            if kind == "repeat_interleave":
                return Step("repeat_interleave", None, (X, g.randint(1, 2), d))
            if kind == "broadcast_to":
                return Step("broadcast_to", None, (X, (2,) + tuple(x.shape)))
            if kind == "pad" and nd in (2, 3) and g.random() < 0.4:
                n = x.shape[-1]  # reflect's pads stay below the size, circular's within it
                mode = g.choice(["reflect", "replicate", "circular"])
                top = max(n - 1, 0) if mode == "reflect" else n if mode == "circular" else 2
                return Step("pad", None, (X, (g.randint(0, top), g.randint(0, top))),
                            {"mode": mode})
            if kind == "pad" and x.dtype.is_floating_point:
                return Step("pad", None, (X, (g.randint(0, 2), g.randint(0, 1))),
                            {"value": g.choice([0.0, 1.5])})
            if kind == "atleast_3d":
                return Step("atleast_3d", None, (X,))
            return None
        return recipe

    def small_other(g, x, shape):
        """A second SparseFillTensor of x's dtype and sparse dims (capped at
        its rank), for the ops that combine two."""
        return make_operand(g, x.dtype, tuple(shape), min(_sd(x), len(shape)))

    def more(kind):
        """The shape ops of NOT_FUZZED's old list: each built of the moves
        above, drawn here so that their own index arithmetic is checked."""
        def recipe(g, x):
            nd = x.dim()
            d = _dim(g, x) % nd if nd else 0
            n = x.shape[d] if nd else 1
            if kind in ("ravel", "atleast_1d", "atleast_2d"):
                return Step(kind, None, (X,))
            if kind == "fliplr":
                return Step(kind, None, (X,)) if nd >= 2 else None
            if kind == "flipud":
                return Step(kind, None, (X,)) if nd >= 1 else None
            if kind == "unflatten" and nd:
                sizes = g.choice([(n,), (1, n), (n, 1)] + ([(2, n // 2), (-1, 2)] if n % 2 == 0
                                                          else []))
                return Step(kind, None, (X, d, sizes))
            if kind in ("hsplit", "vsplit", "dsplit"):
                at = {"hsplit": 1 if nd >= 2 else 0, "vsplit": 0, "dsplit": 2}[kind]
                need = {"hsplit": 1, "vsplit": 2, "dsplit": 3}[kind]
                if nd < need:
                    return None
                cut = g.randint(0, x.shape[at])
                return Step(kind, None, (X, [cut]), pick=g.randint(0, 1))
            if kind == "split_with_sizes" and nd:
                a = g.randint(0, n)
                return Step(kind, None, (X, [a, n - a], d), pick=g.randint(0, 1))
            if kind == "trace":
                return Step(kind, None, (X,), sums=True) if nd == 2 and not x.dense_dim() \
                    else None
            if kind == "diag" and nd in (1, 2) and not x.dense_dim():
                return Step(kind, None, (X, g.randint(-1, 1)))
            if kind == "diagflat" and not x.dense_dim():
                return Step(kind, None, (X, g.randint(-1, 1)))
            if kind == "diag_embed" and nd:
                return Step(kind, None, (X, g.randint(-1, 1)))
            if kind == "kron" and nd:
                other = small_other(g, x, [g.randint(1, 2) for _ in range(nd)])
                return Step(kind, _kron_of_contiguous, (X, other))
            if kind == "block_diag" and nd <= 2 and not x.dense_dim():
                other = small_other(g, x, [g.randint(0, 3) for _ in range(g.randint(1, 2))])
                return Step(kind, None, (X, other))
            if kind == "column_stack" and 1 <= nd <= 2 and not x.dense_dim():
                other = small_other(g, x, (x.shape[0],) + ((g.randint(1, 2),) if nd == 2 else ()))
                return Step(kind, None, ([X, other],))
            return None
        return recipe

    out = []
    for fns, kind in [
        ([torch.flip, T.flip], "flip"), ([torch.roll, T.roll], "roll"),
        ([torch.rot90, T.rot90], "rot90"),
        ([torch.movedim, T.movedim, torch.moveaxis, T.moveaxis], "movedim"),
        ([torch.tensor_split, T.tensor_split], "tensor_split"),
        ([torch.diagonal, T.diagonal], "diagonal"), ([T.repeat, torch.tile, T.tile], "repeat"),
        ([torch.repeat_interleave, T.repeat_interleave], "repeat_interleave"),
        ([torch.broadcast_to, T.broadcast_to], "broadcast_to"), ([F.pad], "pad"),
        ([torch.atleast_3d], "atleast_3d"),
        ([torch.fliplr, T.fliplr], "+fliplr"), ([torch.flipud, T.flipud], "+flipud"),
        ([torch.ravel, T.ravel], "+ravel"), ([torch.unflatten, T.unflatten], "+unflatten"),
        ([torch.atleast_1d], "+atleast_1d"), ([torch.atleast_2d], "+atleast_2d"),
        ([torch.hsplit, T.hsplit], "+hsplit"), ([torch.vsplit, T.vsplit], "+vsplit"),
        ([torch.dsplit, T.dsplit], "+dsplit"),
        ([torch.split_with_sizes, T.split_with_sizes], "+split_with_sizes"),
        ([torch.column_stack], "+column_stack"), ([torch.trace, T.trace], "+trace"),
        ([torch.diag, T.diag], "+diag"), ([torch.diagflat, T.diagflat], "+diagflat"),
        ([torch.diag_embed, T.diag_embed], "+diag_embed"), ([torch.kron, T.kron], "+kron"),
        ([torch.block_diag], "+block_diag"),
    ]:
        for fn in fns:
            recipe = more(kind[1:]) if kind.startswith("+") else make(kind)
            if fn in (torch.tile, T.tile):
                recipe = (lambda r: lambda g, x: r(g, x) if x.dim() else None)(recipe)
            out.append((fn, _rebind(fn, recipe)))
    return out


def _indexing_recipes():
    """(routed callable, recipe) for indexing reads and writes
    (functions/indexing/): positions drawn in range, written positions
    unique (torch leaves the winner of repeats open)."""
    def gen(g):
        return torch.Generator().manual_seed(g.randrange(2**31))

    def ok(x, floats=False):
        return x.dim() and x.numel() and x.dtype != torch.bool and \
            (not floats or x.dtype.is_floating_point)

    def src(g, x, shape):
        return random_values(g, 1, tuple(shape), x.dtype)[0]

    def read(kind):
        def recipe(g, x):
            if not ok(x):
                return None
            d, r = _dim(g, x) % x.dim(), gen(g)
            shape = tuple(x.shape)
            if kind == "gather":
                idx = torch.randint(0, shape[d], shape, generator=r)
                return Step("gather", None, (X, d, idx))
            if kind == "take":
                return Step("take", None, (X, torch.randint(0, x.numel(), (5,), generator=r)))
            if kind == "take_along_dim":
                idx = torch.randint(0, shape[d], shape, generator=r)
                return Step("take_along_dim", None, (X, idx, d))
            if kind == "mask":
                return Step("masked_select", None, (X, torch.rand(shape, generator=r) < 0.5))
            if kind == "nonzero":
                return Step("nonzero", None, (X,))
            return None
        return recipe

    def write(kind):
        def recipe(g, x):
            if not ok(x, floats=kind in ("scatter_reduce", "index_add")):
                return None
            d, r = _dim(g, x) % x.dim(), gen(g)
            shape = list(x.shape)
            if kind == "index_put":
                k = min(shape[0], 3)
                rows = torch.randperm(shape[0], generator=r)[:k]
                return Step("index_put", None, (X, (rows,), src(g, x, [k] + shape[1:])),
                            {"accumulate": g.random() < 0.5}, sums=True)
            k = min(shape[d], 2)
            index = torch.randperm(shape[d], generator=r)[:k]
            sub = shape[:d] + [k] + shape[d + 1:]
            if kind in ("index_add", "index_copy"):
                return Step(kind, None, (X, d, index, src(g, x, sub)), sums=True)
            if kind == "index_fill":
                return Step(kind, None, (X, d, index, 2))
            if kind == "put":
                pos = torch.randperm(x.numel(), generator=r)[:3]
                return Step(kind, None, (X, pos, src(g, x, [pos.numel()])),
                            {"accumulate": g.random() < 0.5}, sums=True)
            if kind == "masked_scatter":
                return Step(kind, None, (X, torch.rand(shape, generator=r) < 0.5,
                                         src(g, x, [x.numel()])))
            # scatter family: index of x's shape along d, one position per slice
            idx = torch.randint(0, shape[d], [1 if i == d else s for i, s in enumerate(shape)],
                                generator=r)
            if kind == "scatter":
                return Step(kind, None, (X, d, idx, src(g, x, idx.shape)))
            if kind == "scatter_add":
                return Step(kind, None, (X, d, idx, src(g, x, idx.shape)), sums=True)
            red = g.choice(["sum", "prod", "mean", "amax", "amin"])
            return Step(kind, None, (X, d, idx, src(g, x, idx.shape), red),
                        {"include_self": g.random() < 0.5}, sums=True)
        return recipe

    out = []
    for fns, make in [
        ([torch.gather, T.gather], read("gather")), ([torch.take, T.take], read("take")),
        ([torch.take_along_dim, T.take_along_dim], read("take_along_dim")),
        ([torch.masked_select, T.masked_select], read("mask")),
        ([torch.nonzero, T.nonzero, torch.argwhere, T.argwhere], read("nonzero")),
        ([torch.index_put, T.index_put], write("index_put")),
        ([torch.index_add, T.index_add], write("index_add")),
        ([torch.index_copy, T.index_copy], write("index_copy")),
        ([torch.index_fill, T.index_fill], write("index_fill")),
        ([torch.scatter, T.scatter], write("scatter")),
        ([torch.scatter_add, T.scatter_add], write("scatter_add")),
        ([torch.scatter_reduce, T.scatter_reduce], write("scatter_reduce")),
        ([torch.put, T.put], write("put")),
        ([torch.masked_scatter, T.masked_scatter], write("masked_scatter")),
    ]:
        for fn in fns:
            out.append((fn, _rebind(fn, make)))
    return out


def recipes():
    """(torch callable, recipe) for every op the fuzzer draws from."""
    out = _elementwise_recipes() + _shape_recipes() + _family_recipes() + _order_recipes()
    for fns, make in [
        ([torch.sum, T.sum], _reduction(None)),
        ([torch.mean, T.mean], _reduction(None, float_only=True)),
        ([torch.prod, T.prod], _reduction(None, keepdim=True)),
        ([torch.amax, T.amax, torch.amin, T.amin], _reduction(None)),
        ([torch.max, T.max, torch.min, T.min], _reduction(None, tuple_out=True)),
        ([torch.logsumexp, T.logsumexp], "logsumexp"),
        ([torch.norm, T.norm], _reduction(None, dims=False, float_only=True)),
        ([torch.var, T.var, torch.std, T.std], _reduction(None, extra=_var_args,
                                                          float_only=True)),
        ([torch.all, T.all, torch.any, T.any, torch.count_nonzero, T.count_nonzero],
         _reduction(None, keepdim=False)),
        ([torch.softmax, T.softmax, torch.log_softmax, T.log_softmax, F.softmax, F.log_softmax,
          torch.sparse.softmax, torch.sparse.log_softmax], _softmax(None)),
        ([torch.mm, T.mm, torch.sparse.mm], _mm(None)),
        ([torch.matmul, T.matmul, T.__matmul__], _matmul(None)),
        ([T.__rmatmul__], "rmatmul"),
        ([torch.mv, T.mv], _mm(None, vector=True)),
        ([torch.addmm, T.addmm, torch.sparse.addmm], _mm(None, bias=True)),
        ([torch.bmm, T.bmm], _bmm(None)),
    ]:
        for fn in fns:
            out.append((fn, _rebind(fn, make)))
    return out


def _rebind(fn, make):
    """A family recipe drawn for one of the family's callables."""
    if make == "logsumexp":
        def recipe(g, x):
            if not x.dtype.is_floating_point or not x.dim():
                return None
            return Step(_name(fn), fn, (X, _dim(g, x)), sums=True)
        return recipe
    if make == "rmatmul":
        def recipe(g, x):
            if x.dim() != 2 or not x.dtype.is_floating_point or x.dense_dim():
                return None
            return Step(_name(fn), fn, (X, random_values(g, 1, (2, x.shape[0]), x.dtype)[0]),
                        sums=True)
        return recipe

    def recipe(g, x):
        step = make(g, x)
        if step is not None:  # (a step may call fn through a wrapper of its own)
            step.func, step.name = step.func or fn, _name(fn)
        return step
    return recipe


# Routed callables the fuzzer does not draw, and why (each with its tests).
NOT_FUZZED = {
    "torch.distributed's collectives: they need a process group of several ranks "
    "(test/distributed/test_distributed.py, scenario torch_api, against the dense ones)":
        [dist.all_reduce, dist.broadcast, dist.all_gather, dist.reduce_scatter, dist.send,
         dist.recv, dist.all_gather_into_tensor] +
        ([dist.all_gather_single] if hasattr(dist, "all_gather_single") else []),
    "metadata and identity: no element values (test_tensor_methods, test_dropin)":
        [T.size, T.dim, T.ndimension, T.numel, T.nelement, T.element_size, T.is_floating_point,
         T.is_complex, T.get_device, T.__len__, T.__hash__, T.__format__, T.__repr__,
         T.is_coalesced, T.sparse_dim, T.dense_dim, T._nnz, T.requires_grad_,
         T.nbytes.__get__, T.is_sparse.__get__, torch._has_compatible_shallow_copy_type,
         T.is_shared, T.is_pinned],
    "components, not values (test_layouts, test_tensor)":
        [T.indices, T.values, T._indices, T._values, T.crow_indices, T.col_indices,
         T.ccol_indices, T.row_indices],
    "devices, shared or pinned memory, pickling: no arithmetic, and pinning needs an "
    "accelerator (test_tensor_methods, test_cuda)":
        [T.cuda, T.__reduce_ex__, T.__deepcopy__, T.share_memory_, T.pin_memory],
    "refused as torch refuses its own sparse tensors (TypeError: numpy has no sparse "
    "array; test_tensor_methods)": [T.numpy],
    "refused as torch refuses its own sparse tensors: no strides (test_distributed's "
    "fully_shard route)": [T.is_contiguous],
    "always refused: torch's tracers faking the tensor (test_compile)": [T._is_view],
    "fused inference kernels of nn.TransformerEncoderLayer / nn.MultiheadAttention, run on "
    "the mask's dense form; reached only from those modules (test_everyday_calls)":
        [torch._transformer_encoder_layer_fwd, torch._native_multi_head_attention],
    "dtypes outside the fuzzed four": [T.half, T.bfloat16, T.short, T.char, T.byte, T.cfloat,
                                       T.cdouble],
    "tell -0.0 from 0.0, which a max's tie order or a sum's order decides differently "
    "from dense": [torch.signbit, T.signbit],
    "random number generation: a random projection or starting basis, drawn differently "
    "from dense (test_lowrank compares subspaces)":
        [torch.svd_lowrank, torch.pca_lowrank, torch.lobpcg],
    "order statistics whose operands the fuzzer does not make (an integer vector of "
    "counts, a sorted sequence) or whose NaN answer torch leaves undefined "
    "(test_order_counting)":
        [torch.mode, T.mode, torch.bincount, T.bincount, torch.histc, T.histc, torch.histogram,
         T.histogram, torch.searchsorted],
    "in-place indexing writes: their out-of-place forms are fuzzed, and the in-place "
    "ones go through the same write and _adopt (test_indexing_fill's in-place steps)":
        [T.index_put_, torch.index_put_, T.__setitem__, T.index_add_, T.index_copy_,
         T.index_fill_, T.scatter_, T.scatter_add_, T.scatter_reduce_, T.put_,
         T.masked_scatter_],
    "resizing: the elements it adds hold the fill, and sparse_resize_and_clear_ leaves only "
    "the fill, which the dense program does not know (test_inplace)":
        [T.resize_as_, T.sparse_resize_, T.sparse_resize_and_clear_],
}


def _not_fuzzed():
    return {fn for fns in NOT_FUZZED.values() for fn in fns}


def unfuzzed_routes():
    """Routed callables with neither a recipe nor a NOT_FUZZED entry."""
    have = {fn for fn, _ in recipes()}
    skip = _not_fuzzed()
    props = {f for f in _routing.TABLE if getattr(f, "__name__", "") == "__get__" and
             f not in have}
    return [f for f in _routing.TABLE if f not in have and f not in skip and f not in props
            and f not in _routing._PASSTHROUGH]


# ---- running -------------------------------------------------------------------------

# Defects the fuzzer found and this branch leaves open, each recognised by
# a precise predicate (the op and the failure's class): counted and listed as
# known, so the bounded run in `make test` guards against everything else.
# Each entry says whose it is; remove it with the fix.
KNOWN = {
    "median/nanmedian/kthvalue of an expanded (stride 0) input: torch's CPU kernel reads "
    "it wrongly, NaN or not (torch.nanmedian(t.expand(2, 3, 1, 4), 0) of a (3, 1, 4) t "
    "differs from the same on .contiguous(), which gives t), and the dense program's "
    "broadcast_to, expand or expand_as is such a view; torch's to settle":
        lambda detail, text: any(k in detail for k in ("NaN positions differ", "values differ",
                                                       "infinities differ",
                                                       "beyond dense's own error"))
        and any(e in text for e in ("broadcast_to", "expand(", "expand_as("))
        and ("median" in text or "kthvalue" in text),
    "complex arithmetic with an infinite part: torch's scalar kernel (the fill, a 0-d "
    "tensor) and its vectorised one disagree on NaN (division by x + inf j), and so do its "
    "sums of uncoalesced duplicates (v.sum() is -inf-0.61j where v[0] + v[1] + v[2] is "
    "-inf+nanj for v = [-1.47-0.63j, -inf-0.71j, 0.14+0.73j]); torch's to settle":
        lambda detail, text: "NaN positions differ" in detail and "complex" in text and
        ("inf" in text or "uncoalesced" in text),
    "view of what dense holds as a strided view (an expand, a transpose, an unbind of a "
    "middle dim): a SparseFillTensor has no strides, so its view is the reshape "
    "(RFC.md#shape-and-indexing) where dense's view of the non-contiguous tensor raises; "
    "a deliberate leniency, not a wrong number":
        lambda detail, text: detail.startswith("dense raises RuntimeError: view size is not "
                                               "compatible") and "view(" in text,
    "gelu of +inf: torch's own kernels disagree (the vectorised/oneDNN kernel of a contiguous "
    "float tensor gives nan, the scalar kernel of a 0-d or expanded one inf; "
    "pytorch/pytorch#185770, fix proposed in #192318), and the fill is computed as a 0-d "
    "tensor; torch's to settle":
        lambda detail, text: "gelu(" in text and (
            "NaN positions differ" in detail or
            # nan_to_num later turns that nan/inf into two different numbers
            ("nan_to_num(" in text and "values differ" in detail)),
    "the sign of a zero part after a complex neg: torch's vectorised kernel negates 1.5 + 0j "
    "into -1.5 + 0j, its scalar kernel (a 0-d tensor: the fill) into -1.5 - 0j, and a branch "
    "cut (log, sqrt, angle, pow) then takes the other side; torch's to settle":
        lambda detail, text: "complex" in text and "neg" in text and "values differ" in detail
        and any(f in text for f in ("log", "sqrt", "angle", "pow", "acos", "asin", "atan")),
    "a periodic function (tan, sin, cos) of a half-precision argument in the thousands: "
    "one unit of the half dtype there spans several radians (bfloat16 at 4500: 32), so "
    "a last-bit difference upstream (a sum of duplicates in another order) gives another "
    "value, and dense's own result has no correct digit (-1.04 for -0.53)":
        lambda detail, text: ("beyond dense's own error" in detail or (
            "values differ" in detail and "float16" in text)) and any(
            f in text for f in ("torch.tan(", "torch.sin(", "torch.cos(", "_foreach_tan",
                                "_foreach_sin", "_foreach_cos", "Tensor.tan", "Tensor.sin",
                                "Tensor.cos")),
    "frac of a float32 value in the tens: a last-bit difference upstream (torch's scalar "
    "kernel, which computes the fill as a 0-d tensor, against its vectorised one, as for "
    "selu) is an absolute 1e-5 of the fraction, beyond the relative tolerance of a value "
    "below 1; both are float32's rounding of the same number":
        lambda detail, text: "frac" in text and "values differ (rtol 1e-06)" in detail,
    "var/std of values near the dtype's largest (nan_to_num of inf): dense's result is inf "
    "or finite by its kernel (torch.tensor([3.4e38, 0., 3.4e38, 0.]).std(correction=0) is "
    "inf, the same numbers along dim -2 of a (1, 4, 3) tensor give 1.7e38); torch's to settle":
        lambda detail, text: "infinities differ" in detail and "nan_to_num" in text and any(
            f in text for f in ("std(", "var(", "std_mean(", "var_mean(")),
    "kthvalue or topk among tied values: which tied element torch returns depends on its "
    "kernel (torch.kthvalue(torch.ones(3), 2) gives index 1, along dim 0 of "
    "torch.ones(3, 3) index 0; topk of [0., 0., -0., 0.] picks -0.0 first), so the gradient "
    "reaches another tied element than dense's (ours: the stable order's, RFC); values and "
    "indices' validity are checked by the forward; torch leaves it open":
        lambda detail, text: ("kthvalue(" in text or "topk(" in text) and (
            "gradient of leaf" in detail or "Hessian-vector product" in detail),
    "the sign of a zero in a product over an inner dim of 1: torch's mm gives -0.0 there "
    "(0 * -2 alone: torch.zeros(5, 1) @ -torch.ones(1, 2)) and +0.0 over 2 or more, as "
    "torch.mv always does; ours gives +0.0 throughout (a sum that starts at +0), which "
    "rsqrt or atan2 later tells apart; torch's to settle":
        lambda detail, text: bool(re.search(r"mm\(x, tensor\(1, \d+\)", text)) and any(
            k in detail for k in ("infinities differ", "NaN positions differ", "values differ")),
    "ldexp's gradient with an integer exponent: torch's backward raises 2 to it in "
    "integers, so a negative exponent gives a gradient of 0 (x = tensor([1.5], "
    "requires_grad=True); torch.ldexp(x, tensor([-2])).sum().backward() gives x.grad 0, "
    "not 0.25); ours is 2 ** e; torch's to settle":
        lambda detail, text: ("gradient of leaf" in detail or "Hessian-vector product" in detail)
        and bool(re.search(r"ldexp_?\(x, [^;]*torch\.(u?int\d+)", text)),
    "a half-precision product near float32's largest: dense accumulates a bfloat16 matmul "
    "in float32, where 2.4e38 * 2 overflows and inf - inf is NaN; ours accumulates half "
    "products in float64 (RFC.md, half precision) and rounds once, to inf":
        lambda detail, text: "bfloat16" in text and "NaN positions differ" in detail and any(
            f in text for f in ("matmul", "mm(", "__rmatmul__", "addmm", "linear", "mv(")),
    "zero_ after a function whose derivative is infinite at its input (acos at -1): dense "
    "autograd multiplies zero_'s zero gradient by that infinity (NaN); ours, like torch's "
    "sparse zero_, keeps no stored element and a fill cut from the graph, so the gradient "
    "is 0: the derivative of a constant; a deliberate difference, not a wrong number":
        lambda detail, text: "zero_(" in text and "gradient of leaf" in detail and
        "finite positions differ" in detail,
    "new_tensor (new_zeros, new_full, ...) of a conjugate view: torch's dense call raises "
    "its internal 'DispatchKey Conjugate doesn't correspond to a device' (the same call on "
    "x.resolve_conj() computes); ours returns the documented new tensor; torch's to settle":
        lambda detail, text: "DispatchKey Conjugate doesn't correspond to a device" in detail
        and "conj(" in text and ".new_" in text,
    "nan_to_num_ of a complex tensor that requires grad: torch's out-of-place nan_to_num "
    "refuses complex autograd ('does not support automatic differentiation for outputs with "
    "complex dtype') where its in-place nan_to_num_ computes; ours computes the in-place form "
    "out of place and so raises torch's own error: a refusal, not a wrong number; torch's to "
    "settle":
        lambda detail, text: "nan_to_num does not support automatic differentiation" in detail
        and "nan_to_num_(" in text,
    "a stored -0.0: torch's to_dense adds the stored values to zeros, which makes +0.0 "
    "(torch.sparse_coo_tensor([[0]], [-0.], (2,)).to_dense() is [0., 0.], its coalesce keeps "
    "-0.0); ours keeps the stored -0.0, as coalesce does (RFC), and copysign, signbit or "
    "atan2 later tells them apart; a deliberate difference, not a wrong number":
        lambda detail, text: any(f in text for f in ("copysign", "signbit", "atan2")) and any(
            k in detail for k in ("values differ", "beyond dense's own error",
                                  "infinities differ", "NaN positions differ")),
    "tan of a float32 value near its pole (cosh(1) = 1.5431, 0.028 below pi/2): torch's "
    "scalar and vectorised cosh round it 1 ulp apart on either side of the true value, and "
    "tan's condition number there (36) makes that a 1e-5 relative difference, beyond "
    "float32's tolerance; both are float32 roundings of the same number":
        lambda detail, text: "values differ (rtol 1e-06)" in detail and bool(
            re.search(r"; x = [^;]*\b(torch\.tan|Tensor\.tan_?|_foreach_tan_?)\(", text)),
    "softshrink of -0.0: torch's vectorised kernel gives +0.0 (16 or more elements), its "
    "scalar one -0.0 (a 0-d tensor such as a fill, or a short tensor), and atan2, copysign "
    "or a division later tells them apart; torch's to settle":
        lambda detail, text: "softshrink" in text and "values differ" in detail and any(
            f in text for f in ("atan2", "arctan2", "copysign", "reciprocal", "div", "signbit")),
    "ours, open: backward through floor_divide of a tensor with no element raises torch's "
    "'derivative for aten::floor_divide is not implemented' (the fill, a 0-d tensor, keeps "
    "the op in the graph; the dense program's empty tensors never reach it): a refusal with "
    "torch's own error, not a wrong number":
        lambda detail, text: "sparse backward raised" in detail and
        "derivative for aten::floor_divide" in detail,
    "fmod or remainder by a half-precision sum of uncoalesced duplicates: the half rounding "
    "of the sum depends on its order (ours sums in float32 and rounds once, dense's "
    "to_dense adds in the half type), and the remainder jumps by a whole divisor where the "
    "two roundings fall on either side of a multiple; both are roundings of the same sum":
        lambda detail, text: "values differ" in detail and "uncoalesced" in text and any(
            h in text for h in ("float16", "bfloat16")) and any(
            f in text for f in ("fmod", "remainder", "__mod__", "__rmod__")),
    "a product whose dense partial sums overflow (values near float32's largest, from "
    "nan_to_num of inf): dense gives inf where the exact sum is finite (3.4e38 * 0.686 + "
    "3.4e38 * 0.480 - 3.4e38 * 0.248 = 3.12e38), ours rounds the exact sum; RFC.md's "
    "products say the result depends on dense's order there":
        lambda detail, text: "infinities differ" in detail and "nan_to_num" in text and any(
            f in text for f in ("mm(", "matmul", "__matmul__", "__rmatmul__", "addmm", "mv(",
                                "linear", "smm(", "bmm(", "einsum")),
    "zeta's gradient for a 0-d float64 q beside a dimensioned integer x: torch's backward "
    "forms -x * zeta(x + 1, q) with x an integer tensor, which the 0-d q promotes only to "
    "the default float32 (-1.3718897104263306, a float32 value, for the float64 "
    "-1.3718898188646362 that ours and the same call on a 0-d x give); torch's to settle":
        lambda detail, text: "zeta(" in text and "gradient of leaf" in detail and bool(
            re.search(r"torch\.(u?int\d+|bool)>", text)),
}


def _known(detail: str, text: str):
    return next((name for name, test in KNOWN.items() if test(detail, text)), None)


@dataclass
class Outcome:
    status: str  # ok | refused | failed
    detail: str = ""


def build_program(seed: int):
    g = random.Random(seed)
    dtype = g.choice(DTYPES)
    x0 = make_operand(g, dtype)
    skip = _not_fuzzed()
    table = [r for r in recipes() if r[0] not in skip]
    steps = []
    shape_probe = x0.sparse()
    for _ in range(g.randint(1, 6)):
        for _attempt in range(20):
            fn, recipe = g.choice(table)
            step = recipe(g, shape_probe)
            if step is not None:
                break
        else:
            break
        try:
            nxt = _apply(step, shape_probe, sparse=True)
        except Exception:  # noqa: BLE001 -- the run reports it; stop growing here
            steps.append(step)
            break
        steps.append(step)
        if not isinstance(nxt, sf.SparseFillTensor):
            break
        shape_probe = nxt.detach()
    return x0, steps


def _materialise(a, sparse, wide=False):
    if isinstance(a, Pattern):
        return a.operand.sparse() if sparse else (a.operand.dense(wide), a.operand.stored())
    if isinstance(a, Operand):
        return a.sparse() if sparse else a.dense(wide)
    if isinstance(a, list):
        return [_materialise(v, sparse, wide) for v in a]
    return a


def _widen(a):
    """A float64 (complex128) copy of a lower-precision floating tensor: the
    reference program's operand."""
    if isinstance(a, torch.Tensor) and a.dtype in (torch.float32,) + HALVES:
        return a.detach().double()
    if isinstance(a, torch.Tensor) and a.dtype == torch.complex64:
        return a.detach().to(torch.complex128)
    if isinstance(a, (list, tuple)) and not isinstance(a, torch.Size):
        return type(a)(_widen(v) for v in a)
    return a


def _apply(step: Step, x, sparse: bool, widen=False):
    def sub(a):
        if a is X:
            return x
        if isinstance(a, list):
            return [sub(v) for v in a]
        out = _materialise(a, sparse, widen)
        return _widen(out) if widen else out
    args = [sub(a) for a in step.args]
    kwargs = {k: sub(v) for k, v in step.kwargs.items()}
    if step.inplace and step.func not in (T.detach, torch.detach):
        args[0] = args[0].clone()
    func = step.func if sparse else DENSE_TWIN.get(step.func, step.func)
    out = func(*args, **kwargs)
    if step.pick is not None and isinstance(out, (tuple, list)):
        out = out[step.pick] if len(out) else None
    return out


def _same(x, *args, **kwargs):
    return x


# The dense program's counterpart of callables that only make sense on
# sparse tensors: layout conversions keep the values, torch.sparse's
# functions compute what their dense forms do.
DENSE_TWIN = {
    T.coalesce: _same, T.to_dense: _same, T.to_sparse: _same, T.to_sparse_coo: _same,
    T.to_sparse_csr: _same,
    torch.sparse.softmax: torch.softmax, torch.sparse.log_softmax: torch.log_softmax,
    torch.sparse.mm: torch.mm, torch.sparse.addmm: torch.addmm,
    T.to_sparse_csc: _same, T.to_sparse_bsr: _same, T.to_sparse_bsc: _same,
    torch.empty_like: torch.zeros_like, T.new_empty: T.new_zeros,
    torch.smm: torch.mm, T.smm: torch.mm, torch.hspmm: torch.mm,
    torch.sspaddmm: torch.addmm, T.sspaddmm: torch.addmm,
    _sparse_sum: _dense_sum, _native_norm: _dense_native_norm,
    _sampled_addmm: _dense_sampled_addmm, _sparse_mask: _dense_sparse_mask,
}


def _finite(x) -> bool:
    if isinstance(x, sf.SparseFillTensor):
        x = x.to_dense()
    if isinstance(x, (list, tuple)):
        return all(_finite(v) for v in x)
    if not isinstance(x, torch.Tensor) or not x.dtype.is_floating_point:
        return True
    return bool(torch.isfinite(x.detach()).all())


def run_program(x0: Operand, steps, sparse: bool, seen=None, widen=False):
    """The program's result; `seen` (a list) collects every value on the way.
    `widen`: the dense program in float64 (the reference of half results)."""
    x = x0.sparse() if sparse else x0.dense(widen)
    x = _widen(x) if widen else x
    if seen is not None:
        seen.append(x)
    for step in steps:
        try:
            x = _apply(step, x, sparse, widen)
        except NotImplementedError as e:
            e._fuzz_step = step.name
            raise
        if seen is not None:
            seen.append(x)
        if x is None:
            return None
    return x


def _operands(x0, steps):
    out = [x0]
    def walk(a):
        if isinstance(a, Pattern):
            out.append(a.operand)
        elif isinstance(a, Operand):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for v in a:
                walk(v)
    for s in steps:
        walk(s.args)
        walk(list(s.kwargs.values()))
    return out


def _plain_leaves(steps):
    """The strided operands that need a gradient (plain_operand)."""
    return [t for t in _plain_tensors(steps) if t.requires_grad and t.is_leaf]


def _plain_tensors(steps):
    """The strided tensors among the steps' arguments."""
    out = []
    def walk(a):
        if isinstance(a, torch.Tensor) and not any(a is o for o in out):
            out.append(a)
        elif isinstance(a, (list, tuple)):
            for v in a:
                walk(v)
    for st in steps:
        walk(st.args)
        walk(list(st.kwargs.values()))
    return out


def _lowest_precision(operands, dtype, steps=(), seen=()):
    """float32 if the result or any operand is float32, a plain one too
    (float_power computes in float64 from float32 operands; hspmm with a
    float32 matrix, then ldexp by a float64 tensor: seed 794131), else the
    result's dtype; a half dtype
    before either (a plain operand's included: dense autograd's formulas
    compute in a half operand's dtype, e.g. atan2's other ** 2)."""
    plain = {t.dtype for t in _plain_tensors(steps)}
    # an intermediate float32 result too (i0 of an int64 tensor, then
    # tolist: a float64 list of float32 sums; seed 1524533)
    inter = {t.dtype for t in seen if isinstance(t, torch.Tensor)}
    for half in HALVES:
        if dtype == half or half in plain or any(o.values.dtype == half for o in operands):
            return half
    if dtype in (torch.float32, torch.complex64) or \
            (plain | inter) & {torch.float32, torch.complex64} or \
            any(o.values.dtype in (torch.float32, torch.complex64) for o in operands):
        return torch.float32
    return dtype


def _tolerance(dtype, sums):
    """The relative tolerance of floating results (module docstring)."""
    if dtype == torch.float64:
        return 1e-9 if sums else 1e-12
    return 1e-4 if sums else 1e-6


def compare(name, got, want, rtol, check_dtype=True, any_nonfinite=False):
    """None if equal within the rule, else a message. With `any_nonfinite`
    (gradients), where dense is inf or NaN the sparse value must be inf or
    NaN too, of any class: a fill's gradient is one number for a sum of
    per-element products whose class (inf or NaN) depends on their signs."""
    if isinstance(got, sf.SparseFillTensor):
        got = got.to_dense()
    if not isinstance(want, torch.Tensor) or not isinstance(got, torch.Tensor):
        return None if got == want else f"{name}: {got!r} != {want!r}"
    got, want = got.detach(), want.detach()
    # torch's own sparse tensor (to_sparse_coo of a strided result; the
    # dense program's twin of it is the identity): its elements
    got = got.to_dense() if got.layout != torch.strided else got
    want = want.to_dense() if want.layout != torch.strided else want
    if tuple(got.shape) != tuple(want.shape):
        return f"{name}: shape {tuple(got.shape)} != dense {tuple(want.shape)}"
    if check_dtype and got.dtype != want.dtype:
        return f"{name}: dtype {got.dtype} != dense {want.dtype}"
    if want.dtype.is_complex:  # real and imaginary parts, each by the rule
        # Where dense is not finite, torch's complex kernels themselves differ
        # (vectorised and scalar paths at branch cuts and special values):
        # those elements are not compared.
        got, want = got.resolve_conj(), want.resolve_conj()
        keep = torch.isfinite(want)
        got, want = torch.where(keep, got, 0), torch.where(keep, want, 0)
        return compare(name, torch.view_as_real(got), torch.view_as_real(want), rtol, False,
                       any_nonfinite)
    if not (want.dtype.is_floating_point or want.dtype.is_complex):
        return None if torch.equal(got.to(want.dtype), want) else \
            f"{name}: values differ\n got  {got}\n want {want}"
    got = got.to(want.dtype)
    if any_nonfinite:
        if not torch.equal(torch.isfinite(got), torch.isfinite(want)):
            return f"{name}: finite positions differ\n got  {got}\n want {want}"
        fin = torch.isfinite(want)
        got, want = got[fin], want[fin]
    if not torch.equal(torch.isnan(got), torch.isnan(want)):
        return f"{name}: NaN positions differ\n got  {got}\n want {want}"
    inf_g, inf_w = torch.isinf(got), torch.isinf(want)
    if not torch.equal(inf_g, inf_w) or not torch.equal(got[inf_g], want[inf_w]):
        return f"{name}: infinities differ\n got  {got}\n want {want}"
    fin = torch.isfinite(want)
    g, w = got[fin].double(), want[fin].double()
    if not g.numel():
        return None
    scale = max(1.0, w.abs().max().item())
    bad = (g - w).abs() > rtol * (w.abs() + scale)
    if bad.any():
        return f"{name}: values differ (rtol {rtol})\n got  {got}\n want {want}"
    return None


def _nonfinite_as_reference(got, want, reference):
    """`want` with its elements replaced by ours where only the two disagree
    on NaN or infinity and ours agrees with the float64 reference rounded to
    the half dtype: dense's rounding, not ours, changed the class there (a
    log_softmax of -1.01e-05 that dense rounds to 0 makes rsqrt inf, ours and
    the reference NaN)."""
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor) and
            isinstance(reference, torch.Tensor) and want.dtype.is_floating_point and
            got.shape == want.shape == reference.shape and got.dtype == want.dtype):
        return want
    r = reference.detach().to(want.dtype)
    g, w = got.detach(), want.detach()

    def cls(x):  # 0 finite, 1 NaN, 2 +inf, 3 -inf
        return torch.where(x.isnan(), 1, torch.where(x == math.inf, 2,
                                                     torch.where(x == -math.inf, 3, 0)))
    differ = cls(g) != cls(w)
    if not bool(differ.any()) or not bool((cls(g)[differ] == cls(r)[differ]).all()):
        return want
    return torch.where(differ, g, w)


def compare_half(got, want, reference, integer_steps=False):
    """A float16/bfloat16 result against dense's own error (module doc):
    dtype, shape and non-finite positions as dense; each finite element
    within twice dense's distance to the float64 reference plus two units of
    the half dtype's rounding of the reference. `integer_steps`: the program
    rounds to integers (floor_divide, floor, round, ...), where a value one
    half unit apart lands on the next integer: one more is allowed. Where
    dense itself has no correct digit, nothing is compared
    (_where_dense_is_hopeless)."""
    if isinstance(got, sf.SparseFillTensor):
        got = got.to_dense()
    want = _nonfinite_as_reference(got, want, reference)
    got = _where_dense_is_hopeless(got, want, reference)
    msg = compare("forward", got, want, math.inf)  # dtype, shape, NaN/inf positions
    if msg or not isinstance(want, torch.Tensor) or not want.dtype.is_floating_point:
        return msg
    o, d = got.detach().double(), want.detach().double()
    r = reference.detach().to(torch.float64) if isinstance(reference, torch.Tensor) else \
        torch.as_tensor(reference, dtype=torch.float64)
    fin = torch.isfinite(d) & torch.isfinite(r)
    eps = torch.finfo(want.dtype).eps
    allowed = 2 * (d - r).abs() + 2 * eps * (r.abs() + 1) + (1 if integer_steps else 0)
    bad = ((o - r).abs() > allowed) & fin
    if bad.any():
        return (f"forward ({want.dtype}): beyond dense's own error against float64\n"
                f" got  {got}\n want {want}\n ref  {r}")
    return None


def _where_dense_is_hopeless(got, want, reference):
    """`got` with dense's own result where dense has no correct digit: its
    distance to the float64 run beyond that value's magnitude (digamma or
    polygamma at a pole that the half rounding of a sum of duplicates meets
    or misses: dense 2.58, float64 -8.27, ours NaN from the correctly
    rounded -304). The function is ill-conditioned there at half precision;
    no result is more right than another."""
    if not (isinstance(got, torch.Tensor) and isinstance(want, torch.Tensor)
            and isinstance(reference, torch.Tensor) and want.dtype.is_floating_point
            and got.shape == want.shape == reference.shape and got.dtype == want.dtype):
        return got
    d, r = want.detach().double(), reference.detach().double()
    hopeless = torch.isfinite(d) & torch.isfinite(r) & ((d - r).abs() > r.abs())
    return torch.where(hopeless, want.detach(), got.detach()) if bool(hopeless.any()) else got


_INTEGER_STEPS = ("floor", "ceil", "round", "trunc", "fix")  # floor_divide, __rfloordiv__ too


def _rounds_to_integers(steps) -> bool:
    """Whether a step rounds to integers (or divides with a rounding mode)."""
    return any(any(k in s.name.rsplit(".", 1)[-1] for k in _INTEGER_STEPS) or
               "rounding_mode" in str(s) for s in steps)


def compare_half_integers(got, want, reference):
    """An integer result of a half-precision program (``x.int()`` after half
    arithmetic): a value one half unit apart truncates to the next integer,
    so each element may differ from the float64 reference by twice dense's
    own difference plus one."""
    if isinstance(got, sf.SparseFillTensor):
        got = got.to_dense()
    msg = compare("forward", got, want, math.inf, any_nonfinite=False) \
        if got.dtype != want.dtype or got.shape != want.shape else None
    if msg:
        return msg
    o, d, r = (t.detach().to(torch.float64) for t in (got, want, reference))
    if bool(((o - r).abs() > 2 * (d - r).abs() + 1).any()):
        return (f"forward ({want.dtype} from half arithmetic): beyond dense's own error against "
                f"float64\n got  {got}\n want {want}\n ref  {reference}")
    return None


def _variance_is_rounding_noise(steps, seen) -> bool:
    """Whether a std/var step's dense result holds a value within rounding of
    0 (at most 1000 ulps of its input's largest magnitude; squared for var)
    without being 0. Dense std's gradient (x - mean) / (n std) is then
    rounding noise over rounding noise, which no other summation order
    reproduces: there is no reference to compare with. Exact zeros (a
    constant slice) stay compared."""
    for i, step in enumerate(steps):
        name = step.name.rsplit(".", 1)[-1]
        if name not in ("std", "var") or not isinstance(seen[i + 1], torch.Tensor):
            continue
        out, inp = seen[i + 1].detach(), seen[i].detach()
        if not inp.dtype.is_floating_point or not inp.numel():
            continue
        scale = inp[torch.isfinite(inp)].abs().max() if bool(torch.isfinite(inp).any()) else 0.
        tiny = 1000 * torch.finfo(inp.dtype).eps * float(scale)
        tiny = tiny if name == "std" else tiny * tiny
        if bool(((out.abs() <= tiny) & (out != 0)).any()):
            return True
    return False


def _grads(loss, leaves, create_graph=False):
    gs = torch.autograd.grad(loss, leaves, allow_unused=True, create_graph=create_graph)
    return [torch.zeros_like(l) if g is None else g for g, l in zip(gs, leaves)]


def _refused_by(e, steps):
    """The step whose call raised (the innermost frame of this file's _apply)."""
    return str(getattr(e, "_fuzz_step", steps[-1].name if steps else "?"))


def check(seed: int, verbose=False, strict_grad=False) -> tuple[Outcome, str]:
    """Build and run program `seed`; the outcome and the program's text."""
    x0, steps = build_program(seed)
    text = f"seed {seed}: x = <{x0.desc}>; " + "; ".join(f"x = {s}" for s in steps)
    if verbose:
        print(text)
    sums = any(s.sums for s in steps)
    seen_sparse = []
    try:
        got = run_program(x0, steps, sparse=True, seen=seen_sparse)
    except NotImplementedError as e:
        return Outcome("refused", f"{_refused_by(e, steps)}: {str(e)[:200]}"), text
    except Exception as e:  # noqa: BLE001
        try:
            run_program(x0, steps, sparse=False)
        except Exception:  # noqa: BLE001 -- dense torch refuses too
            return Outcome("ok", "both raise"), text
        return Outcome("failed", f"sparse raised {type(e).__name__}: {e}; dense computes\n"
                                 f"{traceback.format_exc(limit=-3)}"), text
    seen = []
    try:
        want = run_program(x0, steps, sparse=False, seen=seen)
    except Exception as e:  # noqa: BLE001
        return Outcome("failed", f"dense raises {type(e).__name__}: {e}; sparse computed"), text
    if got is None or want is None:
        return Outcome("ok", "empty"), text
    dtype = want.dtype if isinstance(want, torch.Tensor) else torch.float64
    operands = _operands(x0, steps)
    low = _lowest_precision(operands, dtype, steps, seen)
    if low in HALVES:
        try:
            reference = run_program(x0, steps, sparse=False, widen=True)
        except Exception:  # noqa: BLE001 -- no float64 twin (a dtype argument): dense's rule
            reference = want
        comparable = isinstance(reference, torch.Tensor) and isinstance(want, torch.Tensor) \
            and reference.shape == want.shape
        if comparable and want.dtype in HALVES:
            msg = compare_half(got, want, reference, _rounds_to_integers(steps))
        elif comparable and not want.dtype.is_floating_point and not want.dtype.is_complex \
                and want.dtype != torch.bool and not reference.dtype.is_floating_point:
            msg = compare_half_integers(got, want, reference)
        else:
            msg = compare("forward", got, want, 1e-2)
    else:
        msg = compare("forward", got, want, _tolerance(low, sums))
    if msg:
        return Outcome("failed", msg), text
    if low in HALVES or any(o.values.dtype.is_complex for o in operands):
        return Outcome("ok", "forward only (half or complex operands)"), text
    # (A fill that covers no element is in no dense value: an infinite or
    # NaN one does not stop the gradient check, and no NaN may come of it.)
    if not strict_grad and not all(_finite(v) for v in seen + [o.dense() for o in operands]):
        return Outcome("ok", "forward only (non-finite values on the way)"), text
    if _variance_is_rounding_noise(steps, seen):
        return Outcome("ok", "forward only (numerically zero variance: no gradient "
                             "reference)"), text
    # First and second order.
    leaves = [l for op in operands for l in op.leaves()] + _plain_leaves(steps)
    sparse_out = got.to_dense() if isinstance(got, sf.SparseFillTensor) else got
    if not leaves or not isinstance(want, torch.Tensor) or not want.dtype.is_floating_point \
            or not want.requires_grad or not sparse_out.requires_grad:
        if isinstance(want, torch.Tensor) and want.requires_grad and not sparse_out.requires_grad:
            empty = " (0 elements)" if not want.numel() else ""
            return Outcome("failed", f"the sparse result is cut from the graph{empty}"), text
        return Outcome("ok"), text
    gen = torch.Generator().manual_seed(seed)
    w = torch.randn(want.shape, generator=gen, dtype=torch.float64).to(want.dtype)
    # A float32 leaf rounds its gradient (and, second order, the chain through
    # its cast) to float32, wherever dense and ours place the cast
    low = _lowest_precision(operands, want.dtype, steps, seen)
    # so does a float32 plain operand that is no leaf: dense's derivative
    # formulas round in its dtype (ldexp's 2 ** other, seed 620605)
    if any(t.dtype == torch.float32 for t in leaves + _plain_tensors(steps)) \
            and low == torch.float64:
        low = torch.float32
    rtol = _tolerance(low, True)
    order2 = want.dtype == torch.float64
    try:
        gs = _grads((sparse_out * w).sum(), leaves, create_graph=order2)
    except NotImplementedError as e:
        return Outcome("refused", f"backward: {str(e)[:160]}"), text
    except RuntimeError as e:
        try:
            _grads((want * w).sum(), leaves)
        except (RuntimeError, IndexError):  # dense torch has no derivative either
            return Outcome("ok", "both backwards refuse"), text
        return Outcome("failed", f"sparse backward raised {type(e).__name__}: {e}"), text
    try:
        gd = _grads((want * w).sum(), leaves, create_graph=order2)
    except (RuntimeError, IndexError) as e:
        # e.g. "derivative for aten::floor_divide is not implemented", or
        # torch's backward of an empty (0, 1) program indexing out of range
        return Outcome("ok", f"dense backward refuses: {str(e)[:80]}"), text
    for i, (a, b) in enumerate(zip(gs, gd)):
        msg = compare(f"gradient of leaf {i} ({tuple(leaves[i].shape)})", a, b, rtol,
                      any_nonfinite=True)
        if msg:
            return Outcome("failed", msg), text
    if not order2:
        return Outcome("ok"), text
    u = [torch.randn(l.shape, generator=gen, dtype=l.dtype) for l in leaves]
    def hvp(grads):
        terms = [(gg * uu).sum() for gg, uu in zip(grads, u) if gg.requires_grad]
        if not terms:
            return [torch.zeros_like(l) for l in leaves]
        return _grads(sum(terms), leaves)
    try:
        hs = hvp(gs)
    except NotImplementedError as e:
        return Outcome("refused", f"double backward: {str(e)[:160]}"), text
    except RuntimeError as e:
        try:
            hvp(gd)
        except RuntimeError:  # dense torch has no double backward either
            return Outcome("ok", "both double backwards refuse"), text
        return Outcome("failed", f"sparse double backward raised: {e}"), text
    try:
        hd = hvp(gd)
    except RuntimeError:  # e.g. "derivative for aten::hardsigmoid_backward is not implemented"
        return Outcome("ok", "dense double backward refuses"), text
    for i, (a, b) in enumerate(zip(hs, hd)):
        if not bool(torch.isfinite(b).all()):
            # A NaN second derivative with finite values on the way is dense
            # autograd at a point where the function is not twice
            # differentiable (norm at 0); no reference there.
            continue
        msg = compare(f"Hessian-vector product, leaf {i}", a, b, rtol, any_nonfinite=True)
        if msg:
            return Outcome("failed", msg), text
    return Outcome("ok"), text


def run(seed: int, n: int, verbose=False, budget_s=None, out=sys.stdout, strict_grad=False):
    """Run programs seed .. seed + n - 1 (or until budget_s); a summary dict."""
    counts, refusals, known, failures = Counter(), Counter(), Counter(), []
    t0 = time.monotonic()
    ran = 0
    for i in range(n):
        if budget_s is not None and time.monotonic() - t0 > budget_s:
            break
        s = seed + i
        try:
            outcome, text = check(s, verbose, strict_grad)
        except Exception as e:  # noqa: BLE001 -- a crash of the harness is a failure too
            outcome, text = Outcome("failed", f"harness: {type(e).__name__}: {e}\n"
                                              f"{traceback.format_exc()}"), f"seed {s}"
        ran += 1
        counts[outcome.status] += 1
        if outcome.status == "refused":
            refusals[outcome.detail.split(":")[0]] += 1
        if outcome.status == "failed" and _known(outcome.detail, text):
            outcome = Outcome("known", _known(outcome.detail, text))
            counts["failed"] -= 1
            counts["known"] += 1
            known[outcome.detail] += 1
        if outcome.status == "failed":
            failures.append((s, text, outcome.detail))
            print(f"FAILED {text}\n  {outcome.detail}\n  replay: .venv/bin/python "
                  f"tools/fuzz_ops.py --seed {s} -n 1 -v", file=out)
        elif verbose:
            print(f"  {outcome.status} {outcome.detail}", file=out)
    return {"ran": ran, "counts": +counts, "refusals": refusals, "known": known,
            "failures": failures,
            "seconds": time.monotonic() - t0}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-n", type=int, default=1000)
    p.add_argument("-v", "--verbose", action="store_true")
    p.add_argument("--strict-grad", action="store_true",
                   help="check gradients also where non-finite values occur on the way")
    a = p.parse_args(argv)
    r = run(a.seed, a.n, a.verbose, strict_grad=a.strict_grad)
    print(f"{r['ran']} programs in {r['seconds']:.1f} s: {dict(r['counts'])}")
    for name, c in r["known"].items():
        print(f"known defect, {c} programs: {name}")
    if r["refusals"]:
        print("refused (NotImplementedError), by op:")
        for name, c in r["refusals"].most_common():
            print(f"  {c:5d}  {name}")
    return 1 if r["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
