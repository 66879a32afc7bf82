"""Index components edited in place through the public accessors
(RFC.md#edited-components): every edit of every component of every layout,
then every op family. An invalid edit must end in a Python exception naming
the pattern (never a crash, never a result); a valid edit must give what a
tensor built from the edited components gives.

The cases run in one child process (`python this_file.py`), which prints a
line before and after each case: when the child dies, the test names the
case that killed it. The same rules on one tensor in-process, and the cost
of the check, are at the end.
"""
import copy
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torch_sparsefill as sf

F = torch.nn.functional

# ---- the tensors: one per layout, each with three stored elements (blocks) ---------------


def _coo():
    return sf.sparse_coo_tensor([[0, 1, 2], [1, 0, 2]], [1., 2., 3.], (3, 3), fill_value=0.5)


def _compressed(layout):
    def make():
        if layout in (torch.sparse_bsr, torch.sparse_bsc):
            values = torch.arange(12.).reshape(3, 2, 2)
            return sf.sparse_compressed_tensor([0, 1, 3], [1, 0, 1], values, (4, 4),
                                               layout=layout, fill_value=0.5)
        return sf.sparse_compressed_tensor([0, 1, 2, 3], [1, 0, 2], [1., 2., 3.], (3, 3),
                                           layout=layout, fill_value=0.5)
    return make


def _batched():
    return sf.sparse_csr_tensor(torch.tensor([[0, 1, 2], [0, 2, 2]]),
                                torch.tensor([[1, 0], [0, 1]]),
                                torch.tensor([[1., 2.], [3., 4.]]), (2, 2, 2), fill_value=0.5)


LAYOUTS = {"coo": _coo, "csr": _compressed(torch.sparse_csr),
           "csc": _compressed(torch.sparse_csc), "bsr": _compressed(torch.sparse_bsr),
           "bsc": _compressed(torch.sparse_bsc), "batched_csr": _batched}


def _parts(A):
    """The index components as the accessors hand them out."""
    if A.layout == torch.sparse_coo:
        return (A._indices(),)
    if A.layout in (torch.sparse_csc, torch.sparse_bsc):
        return A.ccol_indices(), A.row_indices()
    return A.crow_indices(), A.col_indices()


def _set(i, value, which):
    def edit(A):
        _parts(A)[which][i] = value
    return edit


def _swap_coo(A):
    idx = A._indices()
    idx[:, [0, 1]] = idx[:, [1, 0]].clone()


def _duplicate_coo(A):
    idx = A._indices()
    idx[:, 1] = idx[:, 0].clone()


# name -> (layouts it applies to, edit, whether the edited pattern is valid)
COO_EDITS = {
    "index_out_of_range": (_set((0, -1), 99, 0), False),
    "index_negative": (_set((1, 0), -1, 0), False),
    "resize": (lambda A: A._indices().resize_(2, 2), False),
    "transposed": (lambda A: A._indices().t_(), False),
    "unsorted_valid": (_swap_coo, True),
    "duplicate_valid": (_duplicate_coo, True),
}
COMPRESSED_EDITS = {
    "compressed_beyond_nse": (_set(1, 5, 0), False),
    "compressed_negative": (_set(1, -1, 0), False),
    "compressed_non_monotone": (_set(2, 0, 0), False),
    "compressed_wrong_last": (_set(-1, 2, 0), False),
    "compressed_first_not_zero": (_set(0, 1, 0), False),
    "plain_negative": (_set(0, -1, 1), False),
    "plain_out_of_range": (_set(0, 99, 1), False),
    "plain_resize": (lambda A: _parts(A)[1].resize_(1), False),
    "compressed_resize": (lambda A: _parts(A)[0].resize_(1), False),
    "plain_valid": (_set(0, 0, 1), True),
}
BATCHED_EDITS = {
    "compressed_beyond_nse": (_set((0, 1), 5, 0), False),
    "compressed_wrong_last": (_set((1, -1), 1, 0), False),
    "plain_out_of_range": (_set((0, 0), 99, 1), False),
    "plain_negative": (_set((1, 0), -1, 1), False),
    "plain_resize": (lambda A: _parts(A)[1].resize_(1), False),
    "plain_valid": (_set((0, 1), 1, 1), True),
}


def edits_of(layout):
    if layout == "coo":
        return COO_EDITS
    return BATCHED_EDITS if layout == "batched_csr" else COMPRESSED_EDITS


# ---- the ops: every family, each taking the (edited) tensor ---------------------------------


def _dense_like(A, *tail):
    return torch.linspace(-1., 1., A.shape[-1] * max(1, len(tail) and tail[0])).reshape(
        A.shape[-1], *tail) if tail else torch.linspace(-1., 1., A.shape[-1])


def _sdpa(A):
    L = A.shape[-1]
    q = torch.linspace(-1., 1., L * 4).reshape(1, L, 4)
    return F.scaled_dot_product_attention(q, q, q, attn_mask=A)


def _pickled(A):
    buffer = io.BytesIO()
    torch.save(A, buffer)
    buffer.seek(0)
    return torch.load(buffer)


OPS = {
    "to_dense": lambda A: A.to_dense(),
    "repr": repr,
    "clone": lambda A: A.clone(),
    "detach": lambda A: A.detach(),
    "to_float64": lambda A: A.to(torch.float64),
    "coalesce": lambda A: A.coalesce(),
    "to_sparse_coo": lambda A: A.to_sparse_coo(),
    "to_sparse_csr": lambda A: A.to_sparse_csr(),
    "to_sparse_csc": lambda A: A.to_sparse_csc(),
    "to_sparse_bsr": lambda A: A.to_sparse(layout=torch.sparse_bsr, blocksize=(1, 1)),
    "eliminate_fill": lambda A: A.eliminate_fill(),
    "exp": torch.exp,
    "neg": lambda A: -A,
    "times_two": lambda A: A * 2,
    "two_plus": lambda A: 2 + A,
    "add_self": lambda A: A + A,
    "add_clone": lambda A: A + sf.full(A.shape, 1.),
    "mul_dense": lambda A: A * _dense_like(A),
    "where": lambda A: torch.where(A > 1, A, 0.),
    "sum": lambda A: A.sum(),
    "sum_0": lambda A: A.sum(0),
    "sum_last": lambda A: torch.sum(A, -1),
    "amax": lambda A: A.amax(-1),
    "mean": lambda A: A.mean(),
    "softmax": lambda A: torch.softmax(A, -1),
    "log_softmax_0": lambda A: torch.log_softmax(A, 0),
    "index_select": lambda A: A.index_select(0, torch.tensor([0, 1])),
    "getitem": lambda A: A[0],
    "cat": lambda A: torch.cat([A, A]),
    "stack": lambda A: torch.stack([A, A]),
    "transpose": lambda A: A.transpose(-1, -2),
    "matmul_dense": lambda A: A @ _dense_like(A, 2),
    "dense_matmul": lambda A: _dense_like(A, A.shape[-2]).t() @ A,
    "mv": lambda A: A @ _dense_like(A),
    "sdpa_mask": _sdpa,
    "pickle": _pickled,
    "deepcopy": copy.deepcopy,
}
# Computed before the edit, read after it: results share the pattern.
BEFORE = {
    "exp_then_edit": lambda A: torch.exp(A),
    "times_two_then_edit": lambda A: A * 2,
    "backward_after_edit": lambda A: _grad_program(A),
}


def _grad_program(A):
    A.requires_grad_()
    loss = (torch.exp(A).to_dense() * 2).sum()

    def finish():
        loss.backward()
        return A.grad
    return finish


def _materialize(x):
    if callable(x) and not isinstance(x, torch.Tensor):
        x = x()
    if isinstance(x, sf.SparseFillTensor):
        return x.to_dense().detach()
    if isinstance(x, torch.Tensor):
        return x.detach()
    return x


def _rebuilt(A):
    """A tensor built by the constructor from A's (edited) components."""
    values, fill = A._values().detach(), A._fill_value().detach()
    if A.layout == torch.sparse_coo:
        return sf.sparse_coo_tensor(A._indices().clone(), values, A.shape, fill_value=fill)
    comp, plain = (c.clone() for c in _parts(A))
    return sf.sparse_compressed_tensor(comp, plain, values, A.shape, layout=A.layout,
                                       fill_value=fill)


def _outcome(thunk):
    try:
        return "value", _materialize(thunk())
    except Exception as e:  # noqa: BLE001 -- any clean Python exception is an answer
        return "raised", f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def _same(a, b):
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and torch.equal(
            torch.nan_to_num(a, 7.), torch.nan_to_num(b, 7.))
    return type(a) is type(b) and (isinstance(a, str) or a == b)


def run_case(layout, edit_name, op_name):
    """One case: None when it holds, else what went wrong."""
    edit, valid = edits_of(layout)[edit_name]
    A = LAYOUTS[layout]()
    op = OPS.get(op_name)
    if op is None:  # begun before the edit: its result may share the pattern or not
        before = _outcome(lambda: BEFORE[op_name](LAYOUTS[layout]()))
        pending = BEFORE[op_name](A)
        edit(A)
        kept = []
        kind, got = _outcome(lambda: kept.append(pending() if callable(pending) else pending)
                             or kept[0])
        if kind == "raised" or _same(got, before[1]):
            return None
        if not valid:
            return "a result sharing an invalid pattern was read without an error"
        # The result shares the edited pattern: it means its components.
        if not _same(got, _materialize(_rebuilt(kept[0]))):
            return f"a result on the edited pattern reads {got}, its components say otherwise"
        return None
    else:
        edit(A)
        kind, got = _outcome(lambda: op(A))
    if not valid:
        if kind == "value":
            return "an invalid pattern gave a result instead of an error"
        return None
    try:
        ref = _rebuilt(A)
    except Exception as e:  # noqa: BLE001
        return f"the edit marked valid is refused by the constructor: {e}"
    ref_kind, want = _outcome(lambda: op(ref))
    if ref_kind != kind:
        return f"edited: {kind} {str(got)[:200]}; rebuilt: {ref_kind} {str(want)[:200]}"
    if kind == "value" and not _same(got, want):
        return f"edited and rebuilt tensors disagree: {got} vs {want}"
    return None


def all_cases():
    return [(layout, edit, op) for layout in LAYOUTS for edit in edits_of(layout)
            for op in list(OPS) + list(BEFORE)]


def _child():
    """Runs every case, one JSON line before and after each."""
    for layout, edit, op in all_cases():
        name = f"{layout}-{edit}-{op}"
        print(json.dumps({"start": name}), flush=True)
        try:
            problem = run_case(layout, edit, op)
        except Exception as e:  # noqa: BLE001 -- the harness itself must not stop
            problem = f"harness: {type(e).__name__}: {e}"
        print(json.dumps({"done": name, "problem": problem}), flush=True)


def test_no_edit_crashes_and_every_invalid_edit_raises():
    here = Path(__file__)
    proc = subprocess.run([sys.executable, str(here)], capture_output=True, text=True,
                          cwd=here.parents[2], timeout=600)
    started, problems, done = None, [], 0
    for line in proc.stdout.splitlines():
        record = json.loads(line)
        if "start" in record:
            started = record["start"]
        else:
            done += 1
            started = None
            if record["problem"]:
                problems.append(f"{record['done']}: {record['problem']}")
    assert proc.returncode == 0, (f"the child died (status {proc.returncode}) in case "
                                  f"{started}:\n{proc.stderr[-2000:]}")
    assert done == len(all_cases()) > 1500, done
    assert not problems, f"{len(problems)} of {done} cases:\n" + "\n".join(problems[:40])


# ---- in-process: the messages and what a valid edit changes --------------------------------


def test_the_issue_repro_raises_naming_the_component():
    C = sf.sparse_csr_tensor([0, 1, 2], [0, 1], [1., 2.], (2, 2))
    C.crow_indices()[1] = 5
    with pytest.raises(RuntimeError, match=r"edited in place.*crow_indices"):
        C.to_dense()
    B = sf.sparse_bsr_tensor([0, 1], [0], torch.ones(1, 2, 2), (2, 4))
    B.col_indices()[0] = -1
    with pytest.raises(RuntimeError, match=r"edited in place.*col_indices\[0\] = -1"):
        B.to_dense()
    A = sf.sparse_coo_tensor([[0, 1, 2]], [1., 2., 3.], (4,), fill_value=1.)
    A._indices()[0, -1] = 99
    for op in (lambda: A.sum(), lambda: torch.softmax(A, 0), lambda: torch.cat([A, A])):
        with pytest.raises(RuntimeError, match=r"indices were edited in place.*99"):
            op()


def test_a_valid_edit_is_accepted_and_updates_the_coalesced_facts():
    A = sf.sparse_coo_tensor([[0, 1]], [1., 2.], (3,), fill_value=5., is_coalesced=True)
    A._indices()[0, 0] = 2  # unsorted now: still valid
    assert torch.equal(A.to_dense(), torch.tensor([5., 2., 1.]))
    assert not A.is_coalesced()
    assert torch.equal(A.sum(), torch.tensor(8.))
    A._indices()[0, 0] = 1  # a duplicate: the dense element is the sum
    assert torch.equal(A.to_dense(), torch.tensor([5., 3., 5.]))
    assert torch.equal(A.sum(), torch.tensor(13.))


def test_values_edited_in_place_need_no_check():
    A = sf.sparse_coo_tensor([[0, 1]], [1., 2.], (3,), fill_value=5.)
    stamp = A._sf_checked
    A._values()[0] = 7.
    assert A._sf_checked == stamp and torch.equal(A.to_dense(), torch.tensor([7., 2., 5.]))


if __name__ == "__main__":
    _child()
