"""dsl.ops elementwise ops against numpy: every shape class (0-size, scalar,
1, odd, rank > 3), broadcast, transposed, sliced and reversed views, scalar
operands on either side, `out=` (in place, overlapping, strided), and the
errors a bad call gets."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

RNG = np.random.default_rng(7)
BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
          "maximum": np.maximum, "minimum": np.minimum}
UNARY_EXACT = {"relu": lambda x: np.maximum(x, np.float32(0)), "sqrt": np.sqrt, "abs": np.abs,
               "neg": np.negative, "square": np.square, "copy": np.copy}


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def views():
    """(name, x, y) pairs whose broadcast shapes cover the cases."""
    base = rand(6, 10, 12)
    yield "0-size", rand(0, 3), rand(0, 3)
    yield "0-d", np.array(1.5, np.float32), np.array(-2.0, np.float32)
    yield "one", rand(1), rand(1)
    yield "odd", rand(17), rand(17)
    yield "2d", rand(33, 7), rand(33, 7)
    yield "broadcast", rand(3, 1, 5), rand(4, 5)
    yield "row broadcast", rand(255, 64), rand(64)
    yield "transposed", base[0].T, rand(12, 10)
    yield "strided", base[:, ::2, 1::3], base[::-1, 1::2, ::3]
    yield "rank 5 strided", rand(2, 3, 4, 5, 6)[:, ::2, :, ::2, ::3], rand(2, 2, 4, 3, 2)
    yield "large", rand(1 << 17), rand(1 << 17)


@pytest.mark.parametrize("op", sorted(BINARY))
@pytest.mark.parametrize("case", list(views()), ids=lambda c: c[0])
def test_binary_matches_numpy(op, case):
    _, x, y = case
    with np.errstate(all="ignore"):
        want = BINARY[op](x, y)
        got = getattr(dsl.ops, op)(x, y)
    assert got.shape == want.shape and got.dtype == np.float32
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("op", sorted(BINARY))
def test_scalar_on_either_side(op):
    x = rand(5, 7)[:, ::2]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(getattr(dsl.ops, op)(x, 2.5), BINARY[op](x, np.float32(2.5)))
        np.testing.assert_array_equal(getattr(dsl.ops, op)(-1.25, x), BINARY[op](np.float32(-1.25), x))


def test_nan_propagates_through_maximum_and_minimum():
    x = np.array([np.nan, 1, -np.inf, 2], np.float32)
    y = np.array([0, np.nan, 3, np.inf], np.float32)
    np.testing.assert_array_equal(dsl.ops.maximum(x, y), np.maximum(x, y))
    np.testing.assert_array_equal(dsl.ops.minimum(x, y), np.minimum(x, y))


@pytest.mark.parametrize("op", sorted(UNARY_EXACT))
@pytest.mark.parametrize("case", list(views()), ids=lambda c: c[0])
def test_exact_unary_ops(op, case):
    _, x, _ = case
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(getattr(dsl.ops, op)(x), UNARY_EXACT[op](x))


@pytest.mark.parametrize("op", ["exp", "log", "tanh", "erf", "sigmoid", "silu", "gelu"])
@pytest.mark.parametrize("case", list(views()), ids=lambda c: c[0])
def test_math_ops_on_every_view(op, case):
    """The views reach the same elements as a contiguous copy would."""
    _, x, _ = case
    want = getattr(dsl.ops, op)(np.ascontiguousarray(x))
    np.testing.assert_array_equal(getattr(dsl.ops, op)(x), want)


def test_results_are_laid_out_as_numpy_s():
    """order='K': a new result follows its inputs' layout when they agree
    (Fortran, transposed, reversed: positive strides in the same order), C
    order when they do not; and the numbers are those of contiguous inputs."""
    f = np.asfortranarray(rand(33, 70))
    t = rand(5, 6, 7).transpose(2, 0, 1)
    r = rand(40, 50)[::-1, ::-1]
    c = np.ascontiguousarray
    for name, args, numpy_op in (("exp", (f,), np.exp), ("add", (f, f), np.add), ("neg", (t,), np.negative),
                                 ("sub", (f, 1.0), np.subtract), ("silu", (r,), np.exp), ("mul", (r, r), np.multiply),
                                 ("add", (f, c(f)), np.add), ("copy", (t,), np.copy)):
        got = getattr(dsl.ops, name)(*args)
        assert got.strides == numpy_op(*args).strides, name
        np.testing.assert_array_equal(got, getattr(dsl.ops, name)(*(c(a) if isinstance(a, np.ndarray) else a
                                                                       for a in args)))


def test_out_preallocated_strided_and_in_place():
    x, y = rand(64, 33), rand(33)
    out = np.zeros((64, 66), np.float32)[:, ::2]
    assert dsl.ops.mul(x, y, out=out) is out
    np.testing.assert_array_equal(out, x * y)
    z = x.copy()
    dsl.ops.add(z, y, out=z)
    np.testing.assert_array_equal(z, x + y)
    dsl.ops.silu(z, out=z)
    np.testing.assert_array_equal(z, dsl.ops.silu(x + y))


def test_python_numbers_and_lists_are_float32():
    np.testing.assert_array_equal(dsl.ops.add([1.0, 2.0], [[0.5], [1.5]]), np.float32([[1.5, 2.5], [2.5, 3.5]]))
    assert dsl.ops.sum([1, 2, 3]) == 6.0


def test_copy_broadcasts_into_out():
    out = np.empty((3, 8), np.float32)[:, ::2]
    dsl.ops.copy(np.arange(4, dtype=np.float32), out=out)
    np.testing.assert_array_equal(out, np.broadcast_to(np.arange(4, dtype=np.float32), (3, 4)))


def test_overlapping_out_reads_inputs_first():
    x = np.arange(10, dtype=np.float32)
    want = x[1:] + x[:-1]
    dsl.ops.add(x[1:], x[:-1], out=x[1:])
    np.testing.assert_array_equal(x[1:], want)
    # Contiguous operands of one shape, one element apart: long enough that
    # an in-place kernel would read elements it had already written.
    y = np.arange(1000, dtype=np.float32)
    dsl.ops.mul(y[:-1], 2.0, out=y[1:])
    np.testing.assert_array_equal(y[1:], 2 * np.arange(999, dtype=np.float32))
    dsl.ops.neg(y[:-1], out=y[1:])
    np.testing.assert_array_equal(y[1:], -np.concatenate(([0], 2 * np.arange(998))))


def test_out_is_the_input_through_another_view():
    x = rand(8, 128)
    want = np.exp(x.astype(np.float64)).astype(np.float32)
    y = x.copy()
    dsl.ops.exp(y, out=y.reshape(8, 128)[:])  # the same memory, element for element
    np.testing.assert_allclose(y, want, rtol=3e-7)


def test_gelu_rejects_unknown_approximation():
    with pytest.raises(ValueError, match="dsl.ops.gelu: 'approximate' must be 'none' or 'tanh'"):
        dsl.ops.gelu(rand(3), approximate="erf")


@pytest.mark.parametrize("call, error, message", [
    (lambda: dsl.ops.add(np.ones(3), np.ones(3, np.float32)), TypeError, "dsl.ops.add: 'x' must be float32"),
    (lambda: dsl.ops.mul(rand(3), rand(4)), ValueError, r"dsl.ops.mul: shapes do not broadcast: x\(3,\), y\(4,\)"),
    (lambda: dsl.ops.add(rand(3), rand(3), out=np.empty(4, np.float32)), ValueError, "'out' has shape"),
    (lambda: dsl.ops.exp(rand(3), out=np.empty(3)), TypeError, "dsl.ops.exp: 'out' must be float32"),
    (lambda: dsl.ops.relu(rand(3), out=np.broadcast_to(np.float32(0), (3,))), ValueError, "'out' is read-only"),
    (lambda: dsl.ops.copy(rand(3, 4), out=np.empty(4, np.float32)), ValueError, "does not broadcast to 'out'"),
])
def test_bad_calls_name_the_op_and_parameter(call, error, message):
    with pytest.raises(error, match=message):
        call()


FUSED = """
from mathfn import silu_f32, gelu_tanh_f32

def swiglu(gate: f32[M, N], up: f32[M, N], out: f32[M, N]):
    out[m, n] = silu_f32(gate[m, n]) * up[m, n]

def gelu_bias(x: f32[M, N], bias: f32[N], out: f32[M, N]):
    out[m, n] = gelu_tanh_f32(x[m, n] + bias[n])
"""


def test_fused_chains_are_kernels_importing_the_math(tmp_path):
    """A chain of ops fuses into one pass by writing it as a kernel: any .tk
    file can import the helpers of stdlib/mathfn.tk."""
    from dsl.backends.link import link_shared
    from dsl.pipeline import compile_file

    (tmp_path / "fused.tk").write_text(FUSED)
    job = compile_file(tmp_path / "fused.tk", stop_after="obj")
    lib = dsl.load(link_shared(job.obj, tmp_path / "fused.so", job.target))
    gate, up, bias = rand(37, 129), rand(37, 129), rand(129)
    out = np.empty_like(gate)
    lib.swiglu(gate, up, out)
    np.testing.assert_allclose(out, dsl.ops.mul(dsl.ops.silu(gate), up), rtol=1e-6, atol=1e-30)
    lib.gelu_bias(gate, bias, out)
    np.testing.assert_allclose(out, dsl.ops.gelu(gate + bias, approximate="tanh"), rtol=1e-6, atol=1e-30)


def test_broadcasts_replay_their_first_calls_on_new_operands():
    """A second call with the same shapes replays the kernel calls recorded
    at the first, on the new arrays; an `out` that overlaps an input it is
    not takes the general path, which reads the input first."""
    for _ in range(2):
        x, b = rand(5, 3, 40), rand(3, 40)
        np.testing.assert_array_equal(dsl.ops.add(x, b), x + b)
        out = np.empty((5, 3, 40), np.float32)
        assert dsl.ops.sub(b, x, out=out) is out
        np.testing.assert_array_equal(out, b - x)
    for _ in range(2):  # in place: recorded as such, and not replayed for a separate `out`
        x, b, out = rand(4, 64), rand(64), np.empty((4, 64), np.float32)
        want = x + b
        assert dsl.ops.add(x, b, out=x) is x
        np.testing.assert_array_equal(x, want)
        dsl.ops.add(want, b, out=out)
        np.testing.assert_array_equal(out, want + b)
    x = rand(4, 64)
    want = x + x[0]
    dsl.ops.add(x, x[0], out=x)
    np.testing.assert_array_equal(x, want)
