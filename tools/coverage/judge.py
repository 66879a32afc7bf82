"""The rules that judge one case of `make coverage` (cases.py builds and runs
the cases): whether a result equals the dense op's, whether an exception is a
clean refusal, and an op's status from its cases' outcomes:
  pass     the result's dense form equals the dense op's (`compare`)
  refused  a clean refusal (`clean_refusal`)
  wrong    a result that differs (values, dtype, shape, NaN positions, type)
  error    any other exception

Example::

    >>> compare(torch.ones(2), torch.ones(2)) is None
    True
"""
from __future__ import annotations

import math
import os

import torch

# Outcomes and statuses, worst first: a status is never allowed to move left.
STATUS_RANK = {"wrong": 0, "error": 1, "refused": 2, "partial": 3, "pass": 4}

# float64 results: equal to the dense op's up to rounding of another order of
# summation, nothing looser.
F64_RTOL = 1e-7
# Lower precision: ref is the op in float64 on the same values, and an error is
# |x - ref| / (|ref| + the mean |ref| of the output) element by element (the
# mean keeps elements that cancel to ~0 from counting as relative errors).
# Ours passes when its largest error is at most FACTOR times dense's largest
# plus FLOOR_ULPS * eps of the dtype (a rounding step where dense happened to
# be exact everywhere).
FACTOR = 8.0
FLOOR_ULPS = 2.0


def _function_names(op) -> set:
    names = {op.name.split(".")[-1], op.aten_name or ""}
    names |= {a.name.split(".")[-1] for a in getattr(op, "aliases", ()) or ()}
    fn = getattr(op.op, "__name__", "")
    if fn and fn != "<lambda>":
        names.add(fn)
    return {n.strip("_") for n in names if n and n.strip("_")}


def clean_refusal(exc: BaseException, op) -> bool:
    """A refusal we accept: a NotImplementedError raised by torch_sparsefill's
    own code (the innermost frame of its traceback lies in the package) whose
    message names the function: its OpInfo name, aten name, an alias or its
    Python name. A refusal that names only a step torch's code called on our
    tensor (``F.upsample_bilinear`` refused as ``interpolate``) is an error: the
    user reads a function they did not call. An argument error that dense
    torch raises too never gets here: a sample whose dense op raises is not a
    case."""
    if not raised_by_package(exc):
        return False
    message = str(exc)
    return any(name in message for name in _function_names(op))


def raised_by_package(exc: BaseException) -> bool:
    """Whether exc is a NotImplementedError raised by torch_sparsefill's code."""
    if not isinstance(exc, NotImplementedError):
        return False
    tb = exc.__traceback__
    last = None
    while tb is not None:
        last = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    import torch_sparsefill
    package = os.path.dirname(os.path.abspath(torch_sparsefill.__file__))
    return last is not None and os.path.abspath(last).startswith(package + os.sep)


def _first_line(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}".strip()
    return text.splitlines()[0][:300]


def _dense(x):
    if isinstance(x, torch.Tensor) and x.layout != torch.strided:
        return x.to_dense()
    return x


def _close(ours: torch.Tensor, dense: torch.Tensor, ref: torch.Tensor | None) -> str | None:
    """None when ours matches dense (float64: to rounding; lower precision: by
    error against ref, the float64 result); else what differs."""
    nan_o, nan_d = torch.isnan(ours), torch.isnan(dense)
    if not torch.equal(nan_o, nan_d):
        return f"NaN at {int((nan_o != nan_d).sum())} positions where dense differs"
    if dense.numel() == 0:
        return None
    keep = ~nan_d
    if not keep.any():  # NaN everywhere, in both
        return None
    o, d = ours[keep].to(torch.complex128 if ours.is_complex() else torch.float64), \
        dense[keep].to(torch.complex128 if dense.is_complex() else torch.float64)

    def err(x, y):
        # equal infinities are no error (inf - inf is NaN)
        return torch.where(x == y, torch.zeros((), dtype=torch.float64), (x - y).abs())

    if dense.dtype in (torch.float64, torch.complex128) or ref is None:
        eps = 0.0 if dense.dtype in (torch.float64, torch.complex128) else \
            torch.finfo(dense.dtype).eps
        rtol = max(F64_RTOL, FLOOR_ULPS * eps)
        scale = d.abs()
        finite = torch.isfinite(scale)
        mean = scale[finite].mean() if finite.any() else torch.zeros((), dtype=torch.float64)
        tol = rtol * (scale + mean)
        e = err(o, d)
    else:
        r = ref[keep].to(o.dtype)
        eps = torch.finfo(dense.dtype).eps
        scale = r.abs()
        finite = torch.isfinite(scale)
        mean = scale[finite].mean() if finite.any() else torch.zeros((), dtype=torch.float64)
        # an output that is 0 everywhere: any error of ours is infinitely larger
        scale = (scale + mean).clamp_min(torch.finfo(torch.float64).tiny)
        dense_err = (err(d, r) / scale).nan_to_num(nan=math.inf).max()
        e = err(o, r) / scale
        tol = (FACTOR * dense_err + FLOOR_ULPS * eps) * torch.ones_like(e)
    bad = ~(e <= tol)  # a NaN error (inf against finite) is bad too
    if bad.any():
        i = int(bad.nonzero()[0, 0])
        return (f"{int(bad.sum())} of {e.numel()} values differ, e.g. {o[i].item()} "
                f"vs dense {d[i].item()}")
    return None


def compare(ours, dense, ref=None) -> str | None:
    """None when our result equals the dense op's result `dense` (ref: the same
    op in float64, for a lower precision); else what differs. Tensors of any
    layout compare by their dense form; tuples element by element; numbers by
    value (NaN equal to NaN). ``compare(torch.ones(2), torch.ones(2))`` is None."""
    dense = _dense(dense)
    if isinstance(dense, torch.Tensor):
        if not isinstance(ours, torch.Tensor):
            return f"{type(ours).__name__} where dense returns a tensor"
        ours = _dense(ours)
        if ours.shape != dense.shape:
            return f"shape {tuple(ours.shape)} vs dense {tuple(dense.shape)}"
        if ours.dtype != dense.dtype:
            return f"dtype {ours.dtype} vs dense {dense.dtype}"
        ours, dense = ours.detach().cpu(), dense.detach().cpu()
        if dense.is_floating_point() or dense.is_complex():
            r = _dense(ref).detach().cpu() if isinstance(ref, torch.Tensor) else None
            if r is not None and r.shape != dense.shape:
                r = None
            return _close(ours, dense, r)
        return None if torch.equal(ours, dense) else \
            f"{int((ours != dense).sum())} of {dense.numel()} values differ"
    if isinstance(dense, (tuple, list)):
        if not isinstance(ours, (tuple, list)) or len(ours) != len(dense):
            return f"{type(ours).__name__} where dense returns {len(dense)} results"
        refs = ref if isinstance(ref, (tuple, list)) and len(ref) == len(dense) else \
            [None] * len(dense)
        for i, (o, d, r) in enumerate(zip(ours, dense, refs)):
            why = compare(o, d, r)
            if why:
                return f"result {i}: {why}"
        return None
    if isinstance(ours, torch.Tensor):
        return f"a tensor where dense returns {type(dense).__name__}"
    if isinstance(dense, float) and isinstance(ours, (int, float)):
        if math.isnan(dense) and math.isnan(ours):
            return None
        return None if math.isclose(ours, dense, rel_tol=F64_RTOL, abs_tol=F64_RTOL) else \
            f"{ours} vs dense {dense}"
    return None if type(ours) is type(dense) and ours == dense else f"{ours!r} vs dense {dense!r}"


# Ops whose positions torch leaves open among equal elements (an unstable
# sort, topk, kthvalue, median, mode): their indices pass when they select
# values equal to dense's, and the values themselves equal dense's.
OPEN_TIES = {"sort", "argsort", "topk", "kthvalue", "median", "nanmedian", "mode"}


def ties_open(op, base_in, args, kwargs, ours, dense) -> str | None:
    """None when `ours` differs from `dense` only in which of equal elements
    its indices name (for an op of OPEN_TIES, not asked to be stable); else
    the difference compare() reports."""
    why = compare(ours, dense)
    if not why or op.name not in OPEN_TIES or kwargs.get("stable"):
        return why
    dim = kwargs.get("dim", -1)
    if op.name in ("topk", "kthvalue") and len(args) > 1:
        dim = args[1]
    elif op.name not in ("topk", "kthvalue") and args and isinstance(args[0], int):
        dim = args[0]
    if not base_in.dim():
        return why
    x = base_in.detach().cpu()

    def picked(idx):
        idx = _dense(idx).detach().cpu()
        if idx.dim() < x.dim():
            return x.gather(dim, idx.unsqueeze(dim)).squeeze(dim)
        return x.gather(dim, idx)

    if op.name == "argsort":
        return None if compare(picked(ours), picked(dense)) is None else why
    if not isinstance(ours, (tuple, list)) or len(ours) != 2:
        return why
    if compare(ours[0], dense[0]) or compare(picked(ours[1]), _dense(dense[0])):
        return why
    return None


def op_status(counts: dict) -> str | None:
    """An op's status from its case outcomes: wrong when any case is, else error
    when any is, else pass (every case), partial (some refused) or refused;
    None without cases. ``op_status({"pass": 3, "refused": 1})`` is "partial"."""
    for worst in ("wrong", "error"):
        if counts.get(worst):
            return worst
    passed, refused = counts.get("pass", 0), counts.get("refused", 0)
    if not passed + refused:
        return None
    return "pass" if not refused else "partial" if passed else "refused"
