"""Bad calls to a kernel, compiled and interpreted: each raises the right
exception, before any element is written, with a message naming the kernel and
the parameter. Good calls on unusual layouts (Fortran order, negative strides)
give correct results."""

import numpy as np
import pytest

import dsl
from dsl import M, N, f32, i32


def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


def scale_i(k: i32, x: i32[N], out: i32[N]):
    for i in range(N):
        out[i] = k * x[i]


def four(x: f32[4], out: f32[4]):
    for i in range(4):
        out[i] = x[i] + 1.0


def twice(A: f32[M, N], out: f32[M, N]):
    for i in range(M):
        for j in range(N):
            out[i, j] = A[i, j] * 2.0


def double(x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[i] * 2.0


FUNCTIONS = {f.__name__: f for f in (saxpy, scale_i, four, twice, double)}


@pytest.fixture(scope="module", params=["compiled", "interpreted"])
def kernels(request):
    interpret = request.param == "interpreted"
    return {name: dsl.kernel(fn, interpret=interpret) for name, fn in FUNCTIONS.items()}


SENTINEL = -123.0


def f(*shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape) + 1


def out(*shape, dtype=np.float32):
    return np.full(shape, SENTINEL, dtype)


def read_only(a):
    a.setflags(write=False)
    return a


def misaligned(n):
    """A float32 array one byte into a buffer: not aligned to 4 bytes."""
    return np.frombuffer(bytearray(4 * n + 4), np.float32, offset=1, count=n)


def overlapping():
    buf = out(16)
    return (1.0, buf[0:8], f(8), buf[4:12])


def interleaved():
    buf = out(16)
    return (1.0, buf[0::2], f(8), buf[1::2])  # disjoint, but their ranges overlap (documented)


def same_array():
    a = f(8)
    return (1.0, a, f(8), a)


# (id, kernel, make the arguments, exception, substrings of the message besides the kernel name)
BAD_CALLS = [
    ("dtype-in", "saxpy", lambda: (1.0, f(8).astype(np.float64), f(8), out(8)), TypeError, ["'x'", "float32"]),
    ("dtype-out", "saxpy", lambda: (1.0, f(8), f(8), out(8, dtype=np.int32)), TypeError, ["'out'", "float32"]),
    ("dtype-int", "scale_i", lambda: (2, np.ones(8, np.int64), out(8, dtype=np.int32)), TypeError, ["'x'", "int32"]),
    ("rank-high", "saxpy", lambda: (1.0, f(2, 4), f(8), out(8)), ValueError, ["'x'", "1 dimensions"]),
    ("rank-0d-array", "saxpy", lambda: (1.0, f(8), np.zeros((), np.float32), out(8)), ValueError, ["'y'"]),
    ("rank-low", "twice", lambda: (f(8), out(2, 4)), ValueError, ["'A'", "2 dimensions"]),
    ("shape-in", "saxpy", lambda: (1.0, f(8), f(7), out(8)), ValueError, ["'y'", "'x'"]),
    ("shape-out", "saxpy", lambda: (1.0, f(8), f(8), out(9)), ValueError, ["'out'", "'x'"]),
    ("shape-axis1", "twice", lambda: (f(2, 3), out(2, 4)), ValueError, ["'out'", "axis 1", "'A'"]),
    ("shape-axis0", "twice", lambda: (f(2, 3), out(3, 3)), ValueError, ["'out'", "axis 0", "'A'"]),
    ("const-in", "four", lambda: (f(5), out(4)), ValueError, ["'x'", "size 4"]),
    ("const-out", "four", lambda: (f(4), out(3)), ValueError, ["'out'", "size 4"]),
    ("read-only-out", "saxpy", lambda: (1.0, f(8), f(8), read_only(out(8))), ValueError, ["'out'", "read-only"]),
    ("broadcast-out", "double", lambda: (f(8), np.broadcast_to(out(1), (8,))), ValueError, ["'out'", "read-only"]),
    ("alias-same", "saxpy", same_array, ValueError, ["'out'", "'x'"]),
    ("alias-overlap", "saxpy", overlapping, ValueError, ["'out'", "'x'"]),
    ("alias-interleaved", "saxpy", interleaved, ValueError, ["'out'", "'x'"]),
    ("alias-2d-transpose", "twice", lambda: (lambda a: (a, a.T))(out(3, 3)), ValueError, ["'out'", "'A'"]),
    ("list", "saxpy", lambda: (1.0, [1.0] * 8, f(8), out(8)), TypeError, ["'x'"]),
    ("none", "saxpy", lambda: (1.0, f(8), None, out(8)), TypeError, ["'y'"]),
    ("string", "saxpy", lambda: (1.0, "abcdefgh", f(8), out(8)), TypeError, ["'x'"]),
    ("string-out", "saxpy", lambda: (1.0, f(8), f(8), "out"), TypeError, ["'out'"]),
    ("float-for-i32", "scale_i", lambda: (1.5, np.ones(8, np.int32), out(8, dtype=np.int32)), TypeError, ["'k'"]),
    ("huge-for-i32", "scale_i", lambda: (2 ** 31, np.ones(8, np.int32), out(8, dtype=np.int32)), OverflowError,
     ["'k'", "i32"]),
    ("tiny-for-i32", "scale_i", lambda: (-2 ** 31 - 1, np.ones(8, np.int32), out(8, dtype=np.int32)), OverflowError,
     ["'k'"]),
    ("bool-for-i32", "scale_i", lambda: (True, np.ones(8, np.int32), out(8, dtype=np.int32)), TypeError, ["'k'"]),
    ("str-for-f32", "saxpy", lambda: ("2.0", f(8), f(8), out(8)), TypeError, ["'alpha'"]),
    ("none-for-f32", "saxpy", lambda: (None, f(8), f(8), out(8)), TypeError, ["'alpha'"]),
    ("array-for-f32", "saxpy", lambda: (f(1), f(8), f(8), out(8)), TypeError, ["'alpha'"]),
    ("misaligned-in", "saxpy", lambda: (1.0, misaligned(8), f(8), out(8)), ValueError, ["'x'", "aligned"]),
    ("misaligned-out", "double", lambda: (f(8), misaligned(8)), ValueError, ["'out'", "aligned"]),
]


def _outputs(args):
    return [a for a in args if isinstance(a, np.ndarray) and a.flags.writeable and a.dtype == np.float32]


@pytest.mark.parametrize("name,make,exc,parts", [pytest.param(*c[1:], id=c[0]) for c in BAD_CALLS])
def test_bad_call(kernels, name, make, exc, parts):
    args = make()
    before = [a.copy() for a in _outputs(args)]
    with pytest.raises(exc) as info:
        kernels[name](*args)
    assert type(info.value) is exc
    text = str(info.value)
    assert f"{name}()" in text, text
    for part in parts:
        assert part in text, text
    for a, b in zip(_outputs(args), before):  # nothing written before the checks pass
        np.testing.assert_array_equal(a, b)


# The parameter named by these is the one missing, unexpected or repeated.
BAD_BINDINGS = [
    ("too-few", (1.0, f(8), f(8)), {}, ["missing", "'out'"]),
    ("none-given", (), {}, ["missing", "'alpha'", "'x'", "'y'", "'out'"]),
    ("unknown-keyword", (1.0, f(8), f(8)), {"out": out(8), "z": 1}, ["unexpected", "'z'"]),
    ("keyword-twice", (1.0, f(8), f(8), out(8)), {"x": f(8)}, ["multiple values", "'x'"]),
]


@pytest.mark.parametrize("args,kwargs,parts", [pytest.param(*c[1:], id=c[0]) for c in BAD_BINDINGS])
def test_bad_binding(kernels, args, kwargs, parts):
    with pytest.raises(TypeError) as info:
        kernels["saxpy"](*args, **kwargs)
    text = str(info.value)
    assert "saxpy()" in text
    for part in parts:
        assert part in text, text


def test_too_many_arguments(kernels):
    with pytest.raises(TypeError, match=r"saxpy\(\) takes 4 arguments but 5 were given"):
        kernels["saxpy"](1.0, f(8), f(8), out(8), out(8))


def test_keywords_bind_like_python(kernels):
    x, y, o = f(5), f(5) * 3, out(5)
    kernels["saxpy"](y=y, out=o, alpha=2.0, x=x)
    np.testing.assert_array_equal(o, 2 * x + y)


def test_non_native_byte_order_is_rejected_compiled():
    k = dsl.kernel(double, interpret=False)
    with pytest.raises(TypeError, match=r"double\(\).*'x'"):
        k(f(4).astype(">f4"), out(4))


def test_non_native_byte_order_is_rejected_interpreted():
    k = dsl.kernel(double, interpret=True)
    for args, param in (((f(4).astype(">f4"), out(4)), "'x'"), ((f(4), out(4).astype(">f4")), "'out'")):
        with pytest.raises(TypeError) as info:
            k(*args)
        assert "double()" in str(info.value) and param in str(info.value)


def test_scalar_limits_are_accepted(kernels):
    x = np.array([1, -1], np.int32)
    o = out(2, dtype=np.int32)
    kernels["scale_i"](2 ** 31 - 1, x, o)
    np.testing.assert_array_equal(o, [2 ** 31 - 1, -(2 ** 31 - 1)])
    kernels["scale_i"](np.int64(-2 ** 31), np.array([1], np.int32), o[:1])
    assert o[0] == -2 ** 31


# ------------------------------------------------------------------ good calls on odd layouts


def test_fortran_order(kernels):
    a = np.asfortranarray(f(3, 5))
    o = np.asfortranarray(out(3, 5))
    kernels["twice"](a, o)
    np.testing.assert_array_equal(o, 2 * a)


def test_transposed_view(kernels):
    a = f(5, 3).T
    o = out(5, 3).T
    kernels["twice"](a, o)
    np.testing.assert_array_equal(o, 2 * a)


def test_negative_strides(kernels):
    x, y = f(9)[::-1], (f(9) * 10)[::-1]
    big = out(20)
    o = big[17:0:-2]  # 9 elements, stride -2
    kernels["saxpy"](np.float32(0.5), x, y, o)
    np.testing.assert_array_equal(o, np.float32(0.5) * x + y)
    untouched = np.ones(20, bool)
    untouched[17:0:-2] = False
    assert (big[untouched] == SENTINEL).all()


def test_negative_strides_2d(kernels):
    a = f(4, 6)[::-1, ::-2]
    o = out(4, 3)[::-1, ::-1]
    kernels["twice"](a, o)
    np.testing.assert_array_equal(o, 2 * a)


def test_read_only_and_broadcast_inputs(kernels):
    x = read_only(f(6))
    y = np.broadcast_to(np.float32(3), (6,))
    o = out(6)
    kernels["saxpy"](2.0, x, y, o)
    np.testing.assert_array_equal(o, 2 * x + 3)


def test_buffer_protocol_objects(kernels):
    o = out(4)
    kernels["double"](memoryview(f(4)), memoryview(o))
    np.testing.assert_array_equal(o, 2 * f(4))


def test_empty_arrays(kernels):
    o = out(0)
    kernels["saxpy"](1.0, f(0), f(0), o)
    kernels["twice"](f(0, 3), out(0, 3))


# ------------------------------------------------------------------ inplace


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
def test_inplace_kernel_accepts_out_aliasing_in(interpret):
    k = dsl.kernel(double, inplace=True, interpret=interpret)
    a = f(6)
    k(a, a)
    np.testing.assert_array_equal(a, 2 * f(6))
    b = f(7)
    k(b[1:], b[:-1])  # each element is read before the one below it is written
    np.testing.assert_array_equal(b, np.append(2 * f(7)[1:], 7))


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
def test_inplace_still_checks_everything_else(interpret):
    k = dsl.kernel(double, inplace=True, interpret=interpret)
    with pytest.raises(ValueError, match=r"double\(\).*'out'.*read-only"):
        k(f(3), read_only(out(3)))
    with pytest.raises(ValueError, match=r"double\(\).*'out'"):
        k(f(3), out(4))
