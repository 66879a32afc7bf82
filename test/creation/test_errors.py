"""Bad input gets a clear Python exception naming the argument, never a crash.
One test per rule; the C core's own status codes are covered by test/cpp."""
import pytest
import torch

import torch_sparsefill as sf

coo = sf.sparse_coo_tensor
csr = sf.sparse_csr_tensor


@pytest.mark.parametrize("make, error, message", [
    # indices
    (lambda: coo([[0, 5]], [1., 2.], (3,)), RuntimeError, r"indices\[0, 1\] = 5 is out of range"),
    (lambda: coo([[0, 1], [0, -1]], [1., 2.], (3, 3)), RuntimeError,
     r"indices\[1, 1\] = -1 is negative"),
    (lambda: coo(torch.tensor([[0., 1.]]), [1., 2.], (3,)), TypeError,
     "indices must be an integer tensor"),
    (lambda: coo([0, 1], [1., 2.], (3,)), ValueError, "indices must be 2-D"),
    (lambda: coo([[0, 1]], [1., 2., 3.], (3,)), ValueError, "values has 3 rows but indices has 2"),
    # size
    (lambda: coo([[0, 2]], [1., 2.], (2,)), RuntimeError, "out of range for size 2"),
    (lambda: coo([[0]], [1.], (-3,)), ValueError, "size must be non-negative"),
    (lambda: coo([[0]], [1.], (3, 4)), ValueError, "sparse_dim \\+ dense_dim"),
    (lambda: coo([[0]], [[1., 2.]], (3, 5)), ValueError, "dense part"),
    (lambda: coo([[0], [0]], [1.], (2**40, 2**40)), RuntimeError, "overflow"),
    # fill
    (lambda: coo([[0]], [[1., 2.]], (3, 2), fill_value=torch.ones(3)), ValueError,
     "fill_value of shape"),
    (lambda: coo([[0]], [1], (3,), fill_value=0.5), TypeError, "fill_value 0.5"),
    (lambda: coo([[0]], [1.], (3,), fill_value=torch.tensor(1j)), TypeError,
     "fill_value of dtype torch.complex64 cannot be cast"),
    (lambda: coo([[0]], [1.], (3,), fill_value=torch.tensor(1.0, device="meta")), RuntimeError,
     "fill_value is on meta"),
    (lambda: coo([[0]], [1.], (3,), fill_value="x"), TypeError, "fill_value 'x'"),
    # values
    (lambda: coo([[0]], torch.tensor(1.), (3,)), ValueError, "values must have a leading"),
    (lambda: coo([[0]], torch.ones(1).to_sparse(), (3,)), TypeError, "values must be a strided"),
    (lambda: coo([[0]], [1], (3,), requires_grad=True), RuntimeError, "floating point"),
    # CSR
    (lambda: csr([0, 1], [0, 1], [1., 2.], (2, 2)), RuntimeError, "crow_indices must have length"),
    (lambda: csr([1, 1, 2], [0, 1], [1., 2.], (2, 2)), RuntimeError, r"crow_indices\[0\] must be 0"),
    (lambda: csr([0, 2, 1], [0, 1], [1., 2.], (2, 2)), RuntimeError, "non-decreasing"),
    (lambda: csr([0, 1, 1], [0, 1], [1., 2.], (2, 2)), RuntimeError,
     r"crow_indices\[-1\] must equal"),
    (lambda: csr([0, 1, 2], [0, 7], [1., 2.], (2, 2)), RuntimeError,
     r"col_indices\[1\] = 7 is out of range"),
    (lambda: csr([0, 2, 2], [1, 0], [1., 2.], (2, 2)), RuntimeError, "strictly increasing"),
    (lambda: csr([0, 2, 2], [1, 1], [1., 2.], (2, 2)), RuntimeError, "strictly increasing"),
    (lambda: csr(torch.tensor([0, 1]), torch.tensor([0], dtype=torch.int32), [1.], (1, 1)),
     TypeError, "same dtype"),
    (lambda: csr([0, 1], [0], [1.], (1, 1, 1)), ValueError, "2 sparse"),
    (lambda: csr([[0, 1]], [0], [1.], (1, 1)), ValueError, "must have the same batch shape"),
    # to_sparse / full
    (lambda: sf.to_sparse(torch.ones(3, 2), dense_dim=3), ValueError, "dense_dim must be"),
    (lambda: sf.to_sparse(torch.ones(3, 2), fill_value=torch.ones(3), dense_dim=1), ValueError,
     "fill_value of shape"),
    (lambda: sf.to_sparse([1, 2]), TypeError, "x must be a tensor"),
    (lambda: sf.full((2,), 1., layout=torch.sparse_csr), ValueError, "2 dimensions"),
    (lambda: sf.fill_value(torch.ones(2)), TypeError, "expected a sparse tensor"),
])
def test_bad_input(make, error, message):
    with pytest.raises(error, match=message):
        make()


def test_mixed_devices():
    with pytest.raises(RuntimeError, match="indices are on|values are on"):
        coo(torch.tensor([[0]]), torch.ones(1, device="meta"), (3,))


def test_binary_size_mismatch():
    a = sf.full((3,), 1.)
    b = sf.full((4,), 1.)
    with pytest.raises(RuntimeError, match="same size"):
        a + b


def test_op_level_errors_name_the_argument():
    ops = torch.ops.sparsefill
    with pytest.raises(RuntimeError, match="indices must be an integer tensor"):
        ops.coo_check(torch.zeros(1, 1), [3])
    with pytest.raises(RuntimeError, match="src"):
        ops.gather_with_fill(torch.ones(2), torch.tensor(0.), torch.tensor([0, 5]))
    with pytest.raises(RuntimeError, match="size must be non-negative"):
        ops.coo_linearize(torch.zeros(1, 1, dtype=torch.long), [-1])
