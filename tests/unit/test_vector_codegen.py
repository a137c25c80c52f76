"""Vector IR (the `vectorize` directive) compiled with LLVM vector types.

Kernels in the language with `@schedule(vectorize(...))`, built into a shared
library, run on sizes around the lane count, contiguous and strided (the
strided ones take the gather/scatter path of the general body), and compared
with numpy and with the same kernels built without their `@schedule` line
(the scalar back-end, itself checked against docs/semantics.md). A masked tail
must not touch the page after the array (test_vector_memory.py); the IR and
assembly patterns are in test_vector_patterns.py. No test here measures time.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest

import dsl
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.lowering import ir
from dsl.lowering.interpret import run_kernel
from dsl.pipeline import compile_source

from vector_kernels import (FLOATS, INTS, KERNELS, SIZES, TAILS, np_dtype, random, run, same_as_scalar,
                            views)

# ------------------------------------------------------------------ elementwise


@pytest.mark.parametrize("tail", TAILS)
@pytest.mark.parametrize("t", [*INTS, *FLOATS])
@pytest.mark.parametrize("n", SIZES)
def test_saxpy_contiguous_and_strided(vec, ref, t, tail, n):
    rng = np.random.default_rng(n)
    x, y = random(rng, t, n), random(rng, t, n)
    alpha = x.dtype.type(1.5 if t.startswith("f") else 3)
    for xv, yv in zip(views(x), reversed(views(y))):
        for out in views(np.zeros(n, x.dtype)):
            getattr(vec, f"saxpy_{t}_{tail}")(alpha, xv, yv, out)
            if t.startswith("f"):
                # `contract`: a*x+y may be one FMA (rounded once), or not.
                assert np.all((out == alpha * xv + yv) | (out == fused(alpha, xv, yv)))
            else:
                assert np.array_equal(out, alpha * xv + yv)
    got = same_as_scalar(vec, ref, f"saxpy_{t}_{tail}", alpha=alpha, x=x, y=y, out=np.zeros(n, x.dtype))
    assert got["out"].shape == (n,)


def fused(a, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """a * x + y rounded once (exactly, through fractions), elementwise."""
    a, x, y = np.broadcast_arrays(a, x, y)
    exact = [Fraction(float(p)) * Fraction(float(u)) + Fraction(float(v)) for p, u, v in zip(a, x, y)]
    return np.array([float(f) for f in exact]).astype(x.dtype)


def wrap(v: int, t: str) -> int:
    bits = np_dtype(t).itemsize * 8
    v &= (1 << bits) - 1
    return v - (1 << bits) if not t.startswith("u") and v >= 1 << (bits - 1) else v


def ref_int(op: int, a: int, b: int, t: str) -> int:
    """docs/semantics.md for out[op] of iops_<t>."""
    bits = np_dtype(t).itemsize * 8
    amount = b & ((1 << bits) - 1)
    signed = not t.startswith("u")
    results = {
        3: lambda: 0 if b == 0 else wrap(a // b, t),
        4: lambda: 0 if b == 0 else wrap(a % b, t),
        5: lambda: 0 if amount >= bits else wrap(a << amount, t),
        6: lambda: ((-1 if a < 0 else 0) if amount >= bits else a >> amount),
        7: lambda: min(a, b), 8: lambda: max(a, b),
        12: lambda: wrap(abs(a), t) if signed else wrap(~a, t),
    }
    if op in results:
        return results[op]()
    return wrap(eval(f"a {['+', '-', '*', '', '', '', '', '', '', '&', '|', '^'][op]} b"), t)


def edge_values(t: str) -> list[int]:
    info = np.iinfo(np_dtype(t))
    bits = info.bits
    vals = {info.min, info.min + 1, info.max, info.max - 1, 0, 1, 2, 3, 7, bits - 1, bits, bits + 1}
    if info.min < 0:
        vals |= {-1, -2, -3, -7, -bits}
    return sorted(vals)


@pytest.mark.parametrize("t", INTS)
def test_integer_operators_lane_wise(vec, ref, t):
    vals = edge_values(t)
    dtype = np_dtype(t)
    a = np.array([x for x in vals for _ in vals], dtype)
    b = np.array([y for _ in vals for y in vals], dtype)
    for n in (*SIZES[:-1], a.size):
        got = same_as_scalar(vec, ref, f"iops_{t}", a=a[:n], b=b[:n], out=np.zeros((13, n), dtype))["out"]
        for op in range(13):
            expect = [ref_int(op, int(x), int(y), t) for x, y in zip(a[:n], b[:n])]
            assert got[op].tolist() == expect, (t, op)
    got = same_as_scalar(vec, ref, f"idiv_{t}", a=a, out=np.zeros((2, a.size), dtype))["out"]
    assert got[0].tolist() == [wrap(int(x) // 3, t) for x in a]
    assert got[1].tolist() == [wrap(int(x) % 7, t) for x in a]


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("n", SIZES)
def test_float_operators_lane_wise(vec, ref, t, n):
    rng = np.random.default_rng(n)
    x, y = random(rng, t, n), random(rng, t, n)
    x[::5], y[::7], y[3::11], x[2::13] = np.nan, 0.0, np.inf, -np.inf
    outs = dict(out=np.zeros((7, n), x.dtype), cmp=np.zeros((3, n), bool), sat=np.zeros(n, np.int32),
                sat8=np.zeros(n, np.uint8))
    got = same_as_scalar(vec, ref, f"fops_{t}", x=x, y=y, **outs)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["out"][0], np.minimum(x, y))
        np.testing.assert_array_equal(got["out"][1], np.maximum(x, y))
        np.testing.assert_array_equal(got["out"][5], x / y)
        assert got["cmp"].tolist() == [(x != y).tolist(), (x < y).tolist(), (x == y).tolist()]
        big = (x * x.dtype.type(1e10)).astype(np.float64)
        assert got["sat"].tolist() == [0 if math.isnan(v) else int(np.clip(v, -2**31, 2**31 - 1)) for v in big]
        scaled = (x * x.dtype.type(100)).astype(np.float64)
        assert got["sat8"].tolist() == [0 if math.isnan(v) else int(np.clip(v, 0, 255)) for v in scaled]


MATH = {"exp": np.exp, "log": lambda v: np.log(np.abs(v)), "sqrt": lambda v: np.sqrt(np.abs(v)),
        "floor": np.floor, "ceil": np.ceil, "abs": np.abs, "tanh": np.tanh,
        "erf": np.vectorize(math.erf, otypes=[float]), "rsqrt": lambda v: 1 / np.sqrt(np.abs(v)),
        "rint": np.rint}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("n", (0, 3, 4, 9, 64, 1000))
def test_math_intrinsics_lane_wise(vec, ref, t, n):
    x = random(np.random.default_rng(n), t, n) * 3
    got = run(vec, f"math_{t}", x=x, out=np.zeros((10, n), x.dtype))["out"]
    want = run(ref, f"math_{t}", x=x, out=np.zeros((10, n), x.dtype))["out"]
    rtol = 1e-6 if t == "f32" else 1e-14  # libm: within an ulp or two
    for k, (name, fn) in enumerate(MATH.items()):
        np.testing.assert_allclose(got[k], fn(x.astype(np.float64)), rtol=rtol, atol=1e-30, err_msg=name)
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=1e-30, err_msg=name)


@pytest.mark.parametrize("n", SIZES)
def test_casts_lane_wise(vec, ref, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n) * 300
    x[::6], x[1::9], x[2::11] = np.nan, 0.0, -np.inf
    k, b = random(rng, "i64", n), rng.integers(0, 2, n).astype(bool)
    outs = dict(f=np.zeros((n, 3), np.float32), n=np.zeros((n, 3), np.int32), u=np.zeros((n, 2), np.uint8),
                flags=np.zeros((n, 2), bool))
    got = same_as_scalar(vec, ref, "casts", x=x, k=k, b=b, **outs)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got["f"][:, 0], x.astype(np.float32))
        np.testing.assert_array_equal(got["f"][:, 2], k.astype(np.int32).astype(np.float32))
    assert np.array_equal(got["n"][:, 1], k.astype(np.int32) + b)
    assert np.array_equal(got["u"][:, 1], (k >> 3).astype(np.uint8))
    assert np.array_equal(got["flags"], np.stack([x != 0, (k & 3) != 0], axis=1))


@pytest.mark.parametrize("n", SIZES)
def test_f16_storage_and_u8_masked(vec, ref, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float16), rng.standard_normal(n).astype(np.float32)
    for xv in views(x):
        out = np.zeros(n, np.float16)
        vec.half(np.float32(2.0), xv, y, out)  # 2 * x is exact: FMA or not, one rounding to f16
        np.testing.assert_array_equal(out, (np.float32(2) * xv.astype(np.float32) + y).astype(np.float16))
    a, b = random(rng, "u8", n), random(rng, "u8", n)
    got = same_as_scalar(vec, ref, "bytes_masked", x=a, y=b, out=np.zeros(n, np.uint8))
    assert np.array_equal(got["out"], a * np.uint8(3) + b)


@pytest.mark.parametrize("n", SIZES)
def test_bool_logic_and_vector_select(vec, ref, n):
    rng = np.random.default_rng(n)
    a, x = rng.integers(0, 2, n).astype(bool), rng.standard_normal(n).astype(np.float32)
    got = same_as_scalar(vec, ref, "logic", a=a, x=x, t=np.float32(0.1), out=np.zeros((2, n), bool),
                         sel=np.zeros(n, np.float32))
    p = x > np.float32(0.1)
    assert np.array_equal(got["out"][0], (p & a) | ~(p | a))
    assert np.array_equal(got["out"][1], p != a)
    assert np.array_equal(got["sel"], np.where(a, x, -x))


@pytest.fixture(scope="module")
def loop_ir() -> dict[str, ir.Kernel]:
    """The vectorized loop IR of KERNELS, for the reference interpreter."""
    job = compile_source(Source("vec.tk", KERNELS), CompileOptions(), stop_after="guard")
    return {k.name: k for k in job.program.kernels}


@pytest.mark.parametrize("n", (9, 64))
def test_compiled_vectors_equal_the_interpreter(vec, loop_ir, n):
    """The interpreter's vector semantics (docs/semantics.md, "Vectors") is the definition."""
    rng = np.random.default_rng(n)
    x, y = random(rng, "f32", n), random(rng, "f32", n)
    x[::5], y[::7] = np.nan, 0.0
    edges = np.array(edge_values("i32") * 4, np.int32)[:n]
    cases = {
        "iops_i32": dict(a=random(rng, "i32", n), b=edges, out=np.zeros((13, n), np.int32)),
        "iops_u8": dict(a=random(rng, "u8", n), b=random(rng, "u8", n) % 12, out=np.zeros((13, n), np.uint8)),
        "ireduce_i64": dict(x=random(rng, "i64", n), out=np.zeros(4, np.int64)),
        "fops_f32": dict(x=x, y=y, out=np.zeros((7, n), np.float32), cmp=np.zeros((3, n), bool),
                         sat=np.zeros(n, np.int32), sat8=np.zeros(n, np.uint8)),
        "logic": dict(a=x > 0, x=y, t=0.5, out=np.zeros((2, n), bool), sel=np.zeros(n, np.float32)),
        "reverse": dict(x=x, out=np.zeros(n, np.float32)),
        "spread": dict(X=rng.standard_normal((n, 3)), out=np.zeros((n, 2))),
    }
    for name, args in cases.items():
        got = run(vec, name, **args)
        want = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
        run_kernel(loop_ir[name], want)
        for key, value in got.items():
            if isinstance(value, np.ndarray):
                assert np.array_equal(value, want[key], equal_nan=value.dtype.kind == "f"), (name, key)


# ------------------------------------------------------------------ reductions


@pytest.mark.parametrize("t", INTS)
@pytest.mark.parametrize("n", SIZES)
def test_integer_reductions_are_exact(vec, ref, t, n):
    rng = np.random.default_rng(n)
    for x in views(random(rng, t, n)):
        got = same_as_scalar(vec, ref, f"ireduce_{t}", x=x, out=np.zeros(4, x.dtype))["out"]
        big, small = (255, 0) if t == "u8" else (2**31 - 1, -2**31)  # the kernel's initial values
        values = [int(v) for v in x]
        expect = [wrap(sum(values), t), wrap(math.prod(values), t), min([big, *values]), max([small, *values])]
        assert got.tolist() == expect


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("n", SIZES)
def test_float_reductions_with_reassociation(vec, t, n):
    rng = np.random.default_rng(n)
    x = (rng.random(n) + 0.5).astype(np_dtype(t))
    for xv in views(x):
        got = run(vec, f"freduce_{t}", x=xv, out=np.zeros(4, x.dtype))["out"]
        rtol = 1e-4 if t == "f32" else 1e-12
        np.testing.assert_allclose(got[:2], [xv.astype(np.float64).sum(), np.prod(xv.astype(np.float64))],
                                   rtol=rtol)
        assert got[2:].tolist() == [min(xv.min(initial=1e30), 1e30), max(xv.max(initial=-1e30), -1e30)]
    if n:
        x[n // 2] = np.nan  # min and max propagate NaN
        got = run(vec, f"freduce_{t}", x=x, out=np.zeros(4, x.dtype))["out"]
        assert np.isnan(got).all()


@pytest.mark.parametrize("n", (*SIZES, 10_000))
def test_masked_dot(vec, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    for xv, yv in zip(views(x), views(y)):
        got = run(vec, "dot", x=xv, y=yv, out=np.zeros(1, np.float32))["out"]
        np.testing.assert_allclose(got[0], np.dot(xv.astype(np.float64), yv), rtol=1e-4, atol=1e-4)


# ------------------------------------------------------------------ 2-D, gathers, parallel


@pytest.mark.parametrize("m,k", [(0, 5), (1, 1), (3, 7), (5, 8), (4, 9), (2, 64), (3, 1000)])
def test_inner_and_outer_axis_vectors(vec, m, k):
    rng = np.random.default_rng(m * 1000 + k)
    a, b = rng.standard_normal((m, k)).astype(np.float32), rng.standard_normal(k).astype(np.float32)
    wide = np.zeros((m, 2 * k), np.float32)
    wide[:, ::2] = a
    for av in (a, wide[:, ::2], np.asfortranarray(a), a[::-1][::-1]):
        out, out_t = np.zeros((m, k), np.float32), np.zeros((k, m), np.float32)
        vec.cols(av, b, out, out_t)  # outT[j, i]: a scatter along the outer axis
        assert np.array_equal(out, av * b) and np.array_equal(out_t, (av - b).T)
    x = rng.standard_normal((k, 3))
    for xv in (x, np.asfortranarray(x)):
        out = np.zeros((k, 2))
        vec.spread(xv, out)  # gathers X[i, 0], X[i, 2] at stride 3; scatters at stride 2
        assert np.array_equal(out[:, 1], xv[:, 0] + xv[:, 2]) and np.array_equal(out[:, 0], -xv[:, 1])


@pytest.mark.parametrize("n", SIZES[:-1])
def test_reversed_and_diagonal_indices(vec, n):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    for xv in views(x):
        out = np.zeros(n, np.float32)
        vec.reverse(xv, out)
        assert np.array_equal(out, xv[::-1])
    a = rng.standard_normal((n, n)).astype(np.float32)
    for av in (a.copy(), np.array(a, order="F"), np.zeros((n, 2 * n), np.float32)[:, ::2]):
        av[...] = a
        out = np.zeros(n, np.float32)
        vec.take_diagonal(av, out)  # a gather and a scatter of a splatted 0.0, lanes N+1 apart
        assert np.array_equal(out, np.diagonal(a))
        assert np.array_equal(av, a - np.diag(np.diagonal(a)))


@pytest.mark.parametrize("threads", [1, 2])
def test_vector_locals_in_a_parallel_loop(vec, threads):
    dsl.set_num_threads(threads)
    try:
        for n in (*SIZES, 100_000):
            rng = np.random.default_rng(n)
            x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
            for xv in views(x):
                out = np.zeros(n, np.float32)
                vec.pscale(xv, y, out)
                t = xv * np.float32(2)
                assert np.all((out == t + t * y) | (out == fused(t, y, t)))
    finally:
        dsl.set_num_threads(0)


