"""Vector IR (the `vectorize` directive) compiled with LLVM vector types.

Kernels in the language with `@schedule(vectorize(...))`, built into a shared
library, run on sizes around the lane count, contiguous and strided (the
strided ones take the gather/scatter path of the general body), and compared
with numpy and with the same kernels built without their `@schedule` line
(the scalar back-end, itself checked against docs/semantics.md). A masked tail
must not touch the page after the array. Pattern checks look at the IR and the
assembly; every module looked at is verified. No test here measures time.
"""

from __future__ import annotations

import math
import re
import subprocess
import sys
from dataclasses import replace
from fractions import Fraction

import llvmlite.binding as llvm
import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.backends.target import host_target
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.lowering import ir
from dsl.lowering.rewrite import map_stmts
from dsl.lowering.interpret import run_kernel
from dsl.lowering.types import I64
from dsl.pipeline import STAGES, compile_source

AVX2 = "+avx2" in host_target().features and "+fma" in host_target().features
SIZES = (0, 1, 7, 8, 9, 63, 64, 1000)
INTS = {"i32": 8, "i64": 8, "u8": 16}  # type -> lanes
FLOATS = {"f32": 8, "f64": 4}
# Lanes of the tail: peeled (a scalar loop) or masked.
TAILS = {"peel": "", "mask": ", tail=mask"}


def _saxpys() -> str:
    out = []
    for t, lanes in {**INTS, **FLOATS}.items():
        for tail, opt in TAILS.items():
            out.append(f"""
@schedule(vectorize(i, {lanes}{opt}))
def saxpy_{t}_{tail}(alpha: {t}, x: {t}[N], y: {t}[N], out: {t}[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
""")
    return "".join(out)


def _int_kernels(t: str, lanes: int) -> str:
    signed = not t.startswith("u")
    last = "abs(a[i])" if signed else "~a[i]"
    big, small = (f"{t}(2147483647)", f"{t}(-2147483648)") if signed else (f"{t}(255)", f"{t}(0)")
    return f"""
@schedule(vectorize(i, {lanes}, tail=mask))
def iops_{t}(a: {t}[N], b: {t}[N], out: {t}[13, N]):
    for i in range(N):
        out[0, i] = a[i] + b[i]
        out[1, i] = a[i] - b[i]
        out[2, i] = a[i] * b[i]
        out[3, i] = a[i] // b[i]
        out[4, i] = a[i] % b[i]
        out[5, i] = a[i] << b[i]
        out[6, i] = a[i] >> b[i]
        out[7, i] = min(a[i], b[i])
        out[8, i] = max(a[i], b[i])
        out[9, i] = a[i] & b[i]
        out[10, i] = a[i] | b[i]
        out[11, i] = a[i] ^ b[i]
        out[12, i] = {last}

@schedule(vectorize(i, {lanes}))
def idiv_{t}(a: {t}[N], out: {t}[2, N]):
    for i in range(N):
        out[0, i] = a[i] // 3
        out[1, i] = a[i] % 7

@schedule(vectorize(i, {lanes}, tail=mask))
def ireduce_{t}(x: {t}[N], out: {t}[4]):
    s = {t}(0)
    p = {t}(1)
    lo = {big}
    hi = {small}
    for i in range(N):
        s += x[i]
        p *= x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    out[0] = s
    out[1] = p
    out[2] = lo
    out[3] = hi
"""


def _float_kernels(t: str, lanes: int) -> str:
    return f"""
@schedule(vectorize(i, {lanes}, tail=mask))
def fops_{t}(x: {t}[N], y: {t}[N], out: {t}[7, N], cmp: bool[3, N], sat: i32[N], sat8: u8[N]):
    for i in range(N):
        out[0, i] = min(x[i], y[i])
        out[1, i] = max(x[i], y[i])
        out[2, i] = x[i] // y[i]
        out[3, i] = x[i] % y[i]
        out[4, i] = fma(x[i], y[i], 1.5)
        out[5, i] = x[i] / y[i]
        out[6, i] = -x[i]
        cmp[0, i] = x[i] != y[i]
        cmp[1, i] = x[i] < y[i]
        cmp[2, i] = x[i] == y[i]
        sat[i] = i32(x[i] * 1e10)
        sat8[i] = u8(x[i] * 100.0)

@schedule(vectorize(i, {lanes}))
def math_{t}(x: {t}[N], out: {t}[9, N]):
    for i in range(N):
        out[0, i] = exp(x[i])
        out[1, i] = log(abs(x[i]))
        out[2, i] = sqrt(abs(x[i]))
        out[3, i] = floor(x[i])
        out[4, i] = ceil(x[i])
        out[5, i] = abs(x[i])
        out[6, i] = tanh(x[i])
        out[7, i] = erf(x[i])
        out[8, i] = rsqrt(abs(x[i]))

@options(reassociate=True)
@schedule(vectorize(i, {lanes}, tail=mask))
def freduce_{t}(x: {t}[N], out: {t}[4]):
    s = {t}(0)
    p = {t}(1)
    lo = {t}(1e30)
    hi = {t}(-1e30)
    for i in range(N):
        s += x[i]
        p *= x[i]
        lo = min(lo, x[i])
        hi = max(hi, x[i])
    out[0] = s
    out[1] = p
    out[2] = lo
    out[3] = hi
"""


OTHERS = """
@options(reassociate=True)
@schedule(vectorize(i, 8, tail=mask))
def dot(x: f32[N], y: f32[N], out: f32[1]):
    acc = 0.0
    for i in range(N):
        acc += x[i] * y[i]
    out[0] = acc

@schedule(vectorize(i, 8, tail=mask))
def half(alpha: f32, x: f16[N], y: f32[N], out: f16[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]

@schedule(split(i, 8, tail=mask), vectorize(i.inner))
def logic(a: bool[N], x: f32[N], t: f32, out: bool[2, N], sel: f32[N]):
    for i in range(N):
        p = x[i] > t
        q = a[i]
        out[0, i] = (p and q) or not (p or q)
        out[1, i] = p != q
        v = x[i]
        sel[i] = v if q else -v

@schedule(vectorize(j, 8, tail=mask))
def cols(A: f32[M, K], b: f32[K], out: f32[M, K], outT: f32[K, M]):
    for i in range(M):
        for j in range(K):
            out[i, j] = A[i, j] * b[j]
            outT[j, i] = A[i, j] - b[j]

@schedule(vectorize(i, 4))
def spread(X: f64[N, 3], out: f64[N, 2]):
    for i in range(N):
        out[i, 1] = X[i, 0] + X[i, 2]
        out[i, 0] = -X[i, 1]

@schedule(split(i, 8, tail=mask), parallel(i.outer), vectorize(i.inner))
def pscale(x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        t = x[i] * 2.0
        out[i] = t + t * y[i]

@schedule(vectorize(i, 8, tail=mask))
def casts(x: f64[N], k: i64[N], b: bool[N], f: f32[N, 3], n: i32[N, 3], u: u8[N, 2], flags: bool[N, 2]):
    for i in range(N):
        f[i, 0] = f32(x[i])
        f[i, 1] = f32(b[i]) + f32(u8(k[i]))
        f[i, 2] = f32(i32(k[i]))
        n[i, 0] = i32(x[i] * 1e9)
        n[i, 1] = i32(k[i]) + i32(b[i])
        n[i, 2] = i32(u8(k[i]))
        u[i, 0] = u8(x[i])
        u[i, 1] = u8(k[i] >> 3)
        flags[i, 0] = bool(x[i])
        flags[i, 1] = bool(k[i] & 3)

@schedule(vectorize(i, 8, tail=mask))
def reverse(x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[N - 1 - i]

@schedule(vectorize(i, 8))
def take_diagonal(A: f32[N, N], out: f32[N]):
    for i in range(N):
        out[i] = A[i, i]
        A[i, i] = 0.0

@schedule(vectorize(i, 16, tail=mask))
def bytes_masked(x: u8[N], y: u8[N], out: u8[N]):
    for i in range(N):
        out[i] = x[i] * 3 + y[i]
"""

KERNELS = (_saxpys() + "".join(_int_kernels(t, n) for t, n in INTS.items())
           + "".join(_float_kernels(t, n) for t, n in FLOATS.items()) + OTHERS)


def _unscheduled(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.startswith("@schedule"))


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, str]:
    """Paths of the vectorized library ('vec') and of the unscheduled one ('ref')."""
    out = {}
    for key, text in (("vec", KERNELS), ("ref", _unscheduled(KERNELS))):
        job = compile_source(Source("vec.tk", text), CompileOptions(), stop_after="obj")
        out[key] = str(link_shared(job.obj, tmp_path_factory.mktemp(key) / f"{key}.so", job.target))
    return out


@pytest.fixture(scope="module")
def vec(built):
    return dsl.load(built["vec"])


@pytest.fixture(scope="module")
def ref(built):
    return dsl.load(built["ref"])


def run(lib, name: str, **args) -> dict:
    """Call kernel `name` on copies of `args`; return the arrays after the call."""
    args = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    getattr(lib, name)(**args)
    return args


def same_as_scalar(vec, ref, name: str, **args) -> dict:
    """Run both builds; every array must come out identical (NaNs included)."""
    got, want = run(vec, name, **args), run(ref, name, **args)
    for key, value in got.items():
        if isinstance(value, np.ndarray):
            assert np.array_equal(value, want[key], equal_nan=value.dtype.kind == "f"), (name, key)
    return got


def np_dtype(t: str) -> np.dtype:
    return np.dtype({"i32": np.int32, "i64": np.int64, "u8": np.uint8, "f32": np.float32, "f64": np.float64}[t])


def random(rng, t: str, n: int) -> np.ndarray:
    if t.startswith("f"):
        return rng.standard_normal(n).astype(np_dtype(t))
    info = np.iinfo(np_dtype(t))
    return rng.integers(info.min, info.max, n, dtype=info.dtype, endpoint=True)


def views(a: np.ndarray) -> list[np.ndarray]:
    """`a` contiguous, and the same values as a stride-2 view and a reversed view."""
    wide = np.empty(2 * a.size, a.dtype)
    wide[::2] = a
    backwards = a[::-1].copy()[::-1]  # negative stride
    return [a, wide[::2], backwards]


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
        "erf": np.vectorize(math.erf, otypes=[float]), "rsqrt": lambda v: 1 / np.sqrt(np.abs(v))}


@pytest.mark.parametrize("t", FLOATS)
@pytest.mark.parametrize("n", (0, 3, 4, 9, 64, 1000))
def test_math_intrinsics_lane_wise(vec, ref, t, n):
    x = random(np.random.default_rng(n), t, n) * 3
    got = run(vec, f"math_{t}", x=x, out=np.zeros((9, n), x.dtype))["out"]
    want = run(ref, f"math_{t}", x=x, out=np.zeros((9, n), x.dtype))["out"]
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


PERMUTE = """@schedule(vectorize(i, 8, tail=mask))
def permute(x: f32[N], out: f32[N], back: f32[N]):
    for i in range(N):
        out[i] = x[i]
        back[i] = x[i]
"""


def _square_mod_n(index: ir.Expr, n: ir.Sym) -> ir.Expr:
    """(index * index) % N: a vector index that is no ramp (the bounds prover
    cannot show it in bounds, so this is built by hand)."""
    return ir.Binary("%", ir.Binary("*", index, index, I64), ir.Var(n), I64)


def test_gather_and_scatter_at_computed_indices(tmp_path):
    """out[i] = x[(i*i) % N] and back[(i*i) % N] = x[i]: the scatter's collisions
    leave the value of the last iteration, as a serial loop does."""
    job = compile_source(Source("permute.tk", PERMUTE), CompileOptions(), stop_after="guard")
    kernel = job.program.kernels[0]
    n = kernel.dims[0]

    def permuted(st):  # in the full-vector loop and the masked last step alike
        if isinstance(st, ir.Store) and st.tensor.name == "out":
            return replace(st, value=replace(st.value, indices=(_square_mod_n(st.value.indices[0], n),)))
        if isinstance(st, ir.Store) and st.tensor.name == "back":
            return replace(st, indices=(_square_mod_n(st.indices[0], n),))
        return None

    kernel = replace(kernel, body=map_stmts(kernel.body, None, permuted))
    job.program = replace(job.program, kernels=(kernel,))
    for stage in STAGES:
        if stage.name in ("llvm", "obj"):
            stage.run(job)
    text = str(job.llvm)
    assert "@llvm.masked.gather.v8f32" in text and "@llvm.masked.scatter.v8f32" in text
    lib = dsl.load(link_shared(job.obj, tmp_path / "permute.so", job.target))
    for size in (1, 7, 8, 9, 63, 64, 1000):
        x = np.arange(1, size + 1, dtype=np.float32)
        for xv in views(x):
            out, back = np.zeros(size, np.float32), np.zeros(size, np.float32)
            lib.permute(xv, out, back)
            squares = np.arange(size) ** 2 % size
            assert np.array_equal(out, x[squares])
            expect = np.zeros(size, np.float32)
            for i, j in enumerate(squares):
                expect[j] = x[i]
            assert np.array_equal(back, expect)


# ------------------------------------------------------------------ masked tails at a page end

PAGE_CHILD = r"""
import ctypes, mmap, sys
import numpy as np
import dsl

PAGE = mmap.PAGESIZE
libc = ctypes.CDLL(None, use_errno=True)
libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
keep = []


def guarded(values, at_end=True):
    # A copy of `values` against an inaccessible page: its last byte the last of
    # a page (at_end), else its first byte the first of a page.
    mm = mmap.mmap(-1, 3 * PAGE)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mm))
    for page in (0, 2):
        assert libc.mprotect(base + page * PAGE, PAGE, 0) == 0
    keep.append(mm)
    size = values.size * values.itemsize
    start = 2 * PAGE - size if at_end else PAGE
    out = np.frombuffer(mm, np.uint8)[start: start + size].view(values.dtype).reshape(values.shape)
    out[:] = values
    return out


lib = dsl.load(sys.argv[1])
rng = np.random.default_rng(0)
for n in (1, 7, 9, 15, 17, 63, 64, 1000):
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    gx, gy, out = guarded(x), guarded(y), guarded(np.zeros(n, np.float32))
    lib.saxpy_f32_mask(np.float32(2), gx, gy, out)  # masked loads and a masked store
    assert np.array_equal(out, np.float32(2) * x + y)
    rx, ry, rout = guarded(x, False)[::-1], guarded(y, False)[::-1], guarded(np.zeros(n, np.float32), False)[::-1]
    lib.saxpy_f32_mask(np.float32(2), rx, ry, rout)  # the same through masked gathers and scatters
    assert np.array_equal(rout, np.float32(2) * x[::-1] + y[::-1])
    res = guarded(np.zeros(1, np.float32))
    lib.dot(gx, gy, res)
    assert abs(res[0] - np.dot(x.astype(np.float64), y)) < 1e-3 * (1 + n)
    a, b = rng.integers(0, 256, n, dtype=np.uint8), rng.integers(0, 256, n, dtype=np.uint8)
    ga, gb, gout = guarded(a), guarded(b), guarded(np.zeros(n, np.uint8))
    lib.bytes_masked(ga, gb, gout)
    assert np.array_equal(gout, a * np.uint8(3) + b)
    h, hout = guarded(x.astype(np.float16)), guarded(np.zeros(n, np.float16))
    lib.half(np.float32(2), h, gy, hout)
    assert np.array_equal(hout, (np.float32(2) * x.astype(np.float16).astype(np.float32) + y).astype(np.float16))
    flags, bools, sel = guarded(x > 0), guarded(np.zeros((2, n), bool)), guarded(np.zeros(n, np.float32))
    lib.logic(flags, gx, np.float32(0.1), bools, sel)
    assert np.array_equal(sel, np.where(x > 0, x, -x))
print("ok")
"""


def test_masked_tails_never_touch_the_next_page(built):
    """Arrays end exactly at a page followed by a PROT_NONE page (or start right
    after one, read backwards): reading or writing a masked-off lane would fault."""
    child = subprocess.run([sys.executable, "-c", PAGE_CHILD, built["vec"]], capture_output=True, text=True,
                           timeout=300)
    assert child.returncode == 0 and child.stdout.strip() == "ok", (child.returncode, child.stderr[-2000:])


# ------------------------------------------------------------------ IR and assembly patterns


def _compile(text: str, stage: str, opt_level: int = 0):
    job = compile_source(Source("p.tk", text), CompileOptions(opt_level=opt_level), stop_after=stage)
    if stage == "llvm":
        ir_text = str(job.llvm)
        llvm.parse_assembly(ir_text).verify()
        return ir_text
    return job.asm


def _function(ir_text: str, name: str) -> str:
    """The text of `define ... @name(...) { ... }` in a module."""
    start = re.search(rf"^define [^\n]*@{re.escape(name)}\(", ir_text, re.MULTILINE).start()
    return ir_text[start: ir_text.index("\n}\n", start)]


SAXPY = """@schedule(vectorize(i, 8))
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
"""


def test_saxpy_unit_body_is_contiguous_and_general_body_gathers():
    text = _compile(SAXPY, "llvm")
    unit, general = _function(text, "saxpy__unit"), _function(text, "saxpy__any")
    assert "load <8 x float>" in unit and "store <8 x float>" in unit
    assert "llvm.fma.v8f32" in unit or ("fmul contract <8 x float>" in unit and "fadd contract <8 x float>" in unit)
    assert "align 4" in unit and "align 32" not in unit  # numpy promises the element size only
    assert "masked" not in unit
    assert "@llvm.masked.gather.v8f32.v8p0" in general and "@llvm.masked.scatter.v8f32.v8p0" in general
    optimized = _compile(SAXPY, "llvm", opt_level=3)  # still valid after the optimizer
    assert "<8 x float>" in optimized


def test_masked_tail_dot_uses_masked_loads_and_a_reassociating_reduction():
    text = _compile(KERNELS[KERNELS.index("@options(reassociate=True)\n@schedule(vectorize(i, 8, tail=mask))\ndef dot"):]
                    .split("\n\n@schedule")[0], "llvm")
    unit = _function(text, "dot__unit")
    assert re.search(r"call <8 x float> @llvm\.masked\.load\.v8f32\.p0\(ptr align 4 ", unit)
    assert re.search(r"call reassoc contract float @llvm\.vector\.reduce\.fadd\.v8f32\(float -0\.0", unit)
    assert "@llvm.masked.gather.v8f32.v8p0" in _function(text, "dot__any")


def test_reductions_use_nan_propagating_and_integer_intrinsics():
    source = _float_kernels("f32", 8) + _int_kernels("u8", 16)
    text = _compile(source, "llvm")
    for name in ("fminimum.v8f32", "fmaximum.v8f32", "fmul.v8f32", "add.v16i8", "mul.v16i8",
                 "umin.v16i8", "umax.v16i8"):
        assert f"@llvm.vector.reduce.{name}(" in text
    math = _function(text, "math_f32__unit")
    for name in ("exp", "log", "sqrt", "floor", "ceil", "fabs", "tanh"):
        assert f"@llvm.{name}.v8f32(" in math
    assert "@llvm.fptosi.sat.v8i32.v8f32(" in text and "@llvm.fptoui.sat.v8i8.v8f32(" in text
    assert "@llvm.minimum.v8f32(" in text and "fcmp une <8 x float>" in text


@pytest.mark.skipif(not AVX2, reason="needs an AVX2+FMA host")
def test_vectorized_saxpy_loop_is_vfmadd_on_ymm_without_spills():
    """The contiguous loop: packed loads/stores and FMAs on ymm, nothing on the stack.
    (The general body's gather loop is scalarized by LLVM on this CPU; not checked.)"""
    asm = _compile(SAXPY, "asm", opt_level=3)
    contiguous = [body for body in _loops(asm) if re.search(r"vfmadd\w+\s.*%ymm", body)
                  and re.search(r"vmovups\s.*%ymm", body) and "vinsertps" not in body]
    assert contiguous, "no loop of packed loads and vfmadd on ymm registers"
    for body in contiguous:
        assert "(%rsp)" not in body, f"a loop spills to the stack:\n{body}"


def _loops(asm: str) -> list[str]:
    """The single-block loops: a label, then instructions up to a jump back to it."""
    lines = asm.splitlines()
    loops, label, start = [], None, 0
    for k, line in enumerate(lines):
        if re.fullmatch(r"\.LBB\w+:", line):
            label, start = line[:-1], k
            continue
        jump = re.fullmatch(r"\s+j\w+\s+(\.LBB\w+)", line)
        if jump and jump.group(1) == label:
            loops.append("\n".join(lines[start: k + 1]))
    return loops
