"""Foreign arrays without copies: torch tensors (through `__dlpack__`) and
buffer-protocol objects as the inputs and outputs of `@dsl.kernel` kernels and
of `dsl.ops`, with the results visible in the caller's tensor."""

import array

import numpy as np
import pytest

import dsl
from dsl import N, f32
from dsl.ops.arrays import as_view

torch = pytest.importorskip("torch")


@dsl.kernel
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


def same_memory(view: np.ndarray, tensor) -> bool:
    strides = tuple(s * tensor.element_size() for s in tensor.stride())
    return view.ctypes.data == tensor.data_ptr() and view.strides == strides


def test_kernel_writes_into_a_torch_tensor():
    x, y, out = torch.randn(100), torch.randn(100), torch.empty(100)
    saxpy(2.0, x, y, out)
    assert torch.allclose(out, 2 * x + y)


def test_kernel_takes_non_contiguous_torch_views():
    x = torch.randn(50, 4)[:, 1]          # stride 4
    y = torch.randn(100).flip(0)[::2]     # a flipped copy, then stride 2
    big = torch.full((150,), -7.0)
    saxpy(0.5, x, y, big[::3])
    assert torch.allclose(big[::3], 0.5 * x + y)
    assert (big[1::3] == -7.0).all() and (big[2::3] == -7.0).all()


def test_kernel_sees_the_tensor_itself_not_a_copy():
    # The same memory as input and output is refused by the kernel's overlap check,
    # which only sees it if no copy was made.
    x = torch.randn(10)
    with pytest.raises(ValueError, match="overlap|shares memory"):
        saxpy(2.0, x, x, x)


def test_kernel_refuses_a_torch_tensor_of_the_wrong_dtype():
    with pytest.raises(TypeError, match=r"saxpy\(\): parameter 'x' expects an array of float32.*float64"):
        saxpy(2.0, torch.randn(4, dtype=torch.float64), torch.randn(4), torch.empty(4))


def test_kernel_takes_buffers():
    x = array.array("f", [1.0, 2.0, 3.0])
    out = memoryview(bytearray(12)).cast("f")
    saxpy(2.0, x, array.array("f", [1.0, 1.0, 1.0]), out)
    assert out.tolist() == [3.0, 5.0, 7.0]


def test_ops_views_torch_inputs_without_copies():
    t = torch.randn(6, 8).T[1:, ::2]
    view = as_view("test", "x", t)
    assert same_memory(view, t)


def test_ops_matmul_into_a_torch_out():
    a, b = torch.randn(30, 40), torch.randn(50, 40)
    c = torch.empty(30, 50)
    result = dsl.ops.matmul(a, b.T, out=c)
    assert torch.allclose(c, a @ b.T, atol=1e-4)
    assert same_memory(result, c)


def test_ops_write_into_a_non_contiguous_torch_out():
    x = torch.randn(20, 16)
    wide = torch.zeros(16, 40)
    out = wide[:, ::2].T                  # [20, 16], strides (2, 40)
    dsl.ops.softmax(x, axis=-1, out=out)
    assert torch.allclose(out, torch.softmax(x, -1), atol=1e-6)
    assert (wide[:, 1::2] == 0).all()
    dsl.ops.add(x, 1.0, out=out)
    assert torch.equal(out, x + 1.0)


def test_ops_quantized_with_torch_tensors():
    w, x = torch.randn(8, 512), torch.randn(512)
    blocks = torch.from_numpy(dsl.ops.quantize(w, "q4_k"))
    y = dsl.ops.qmatvec(blocks, x, "q4_k", (8, 512))
    dense = torch.empty(8, 512)
    dsl.ops.dequantize(blocks, "q4_k", (8, 512), out=dense)
    np.testing.assert_array_equal(y, dsl.ops.qmatvec(blocks.numpy(), x.numpy(), "q4_k", (8, 512)))
    np.testing.assert_array_equal(dense.numpy(), dsl.ops.dequantize(blocks.numpy(), "q4_k", (8, 512)))


@pytest.mark.parametrize("call, message", [
    (lambda a, o: dsl.ops.matmul(a, a.T, out=o.double()), "matmul: out has dtype float64"),
    (lambda a, o: dsl.ops.add(a, a, out=o.double()), "add: 'out' must be float32, got float64"),
    (lambda a, o: dsl.ops.add(a.bfloat16(), a), "add: 'x': cannot view Tensor as an array"),
    (lambda a, o: dsl.ops.gelu(a.requires_grad_()), "detach"),
    (lambda a, o: dsl.ops.matmul(a.int(), a.T), "matmul: unsupported dtype int32"),
])
def test_ops_refuse_torch_tensors_they_cannot_use(call, message):
    a, o = torch.randn(4, 4), torch.empty(4, 4)
    with pytest.raises(TypeError, match=message):
        call(a, o)


@pytest.mark.parametrize("op", ["softmax", "log_softmax", "layer_norm", "rms_norm"])
def test_row_ops_in_place_into_the_input(op):
    """out=x, as numpy allows: the row kernels read a copy of x."""
    x = torch.randn(16, 40)
    want = getattr(dsl.ops, op)(x.numpy().copy())
    getattr(dsl.ops, op)(x, out=x)
    np.testing.assert_array_equal(x.numpy(), want)
