"""The kernels and helpers the vector tests share: each kernel with its
`@schedule(vectorize(...))`, the same text run as written for reference, and
ways to call and compare them."""

from __future__ import annotations

import numpy as np

SIZES = (0, 1, 7, 8, 9, 63, 64, 1000)
INTS = {"i32": 8, "i64": 8, "u8": 16}  # type -> lanes
FLOATS = {"f32": 8, "f64": 4}
# Lanes of the tail: peeled (a scalar loop) or masked.
TAILS = {"peel": "", "mask": ", tail=mask"}


def saxpys() -> str:
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


def int_kernels(t: str, lanes: int) -> str:
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

""" + reduction_kernel("ireduce", t, lanes, big, small)


def reduction_kernel(name: str, t: str, lanes: int, big: str, small: str, options: str = "") -> str:
    """Sum, product, min and max of x in one vectorized loop."""
    return options + f"""@schedule(vectorize(i, {lanes}, tail=mask))
def {name}_{t}(x: {t}[N], out: {t}[4]):
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


def float_kernels(t: str, lanes: int) -> str:
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
def math_{t}(x: {t}[N], out: {t}[10, N]):
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
        out[9, i] = rint(x[i])

""" + reduction_kernel("freduce", t, lanes, f"{t}(1e30)", f"{t}(-1e30)", "@options(reassociate=True)\n")


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

KERNELS = (saxpys() + "".join(int_kernels(t, n) for t, n in INTS.items())
           + "".join(float_kernels(t, n) for t, n in FLOATS.items()) + OTHERS)


def unscheduled(text: str) -> str:
    """The same kernels run as written (`@schedule()`): the scalar back-end."""
    return "\n".join("@schedule()" if line.startswith("@schedule") else line for line in text.splitlines())



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


