"""Cases for the examples of `examples/*.tk` beyond the first ones (test_examples.py):
inputs, a float64 reference and an error bound for each kernel.

Bounds follow test_examples.py: a sum of n terms in any order, with or without
FMA, is within gamma(n) * sum|term| of the exact sum (Higham 3.1); each
bound below says which sums it covers, with a factor of 2 of slack for the
few roundings around them, so a correct kernel cannot fail while a dropped
or doubled term (an error of one |term|) does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

U = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float64): 2.0 ** -53}
U32 = U[np.dtype(np.float32)]
ALL_LAYOUTS = ("contiguous", "transposed", "stepped", "reversed", "broadcast")


def gamma(n: int, dtype) -> float:
    u = U[np.dtype(dtype)]
    return n * u / (1 - n * u)


@dataclass
class Case:
    """How to make inputs for a kernel, its reference, and its error bound."""

    make: Callable  # (rng, size) -> list of arguments
    outputs: tuple[int, ...]  # argument positions written by the kernel
    reference: Callable  # (*args) -> float64 result for the (single) output
    bound: Callable  # (*args) -> allowed |compiled - reference| (array or scalar)
    exact_vs_interpreter: bool  # no multiply feeds an add: bitwise equal to the interpreter
    layouts: tuple[str, ...] = field(default=ALL_LAYOUTS)  # the layouts the inputs can take
    fixed: tuple[int, ...] = ()  # argument positions kept in their own layout (quantized blocks)


def f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def f64(a):
    return np.asarray(a, np.float64)


def bmm_case():
    """out[n] = a[n] @ b[n]; the sizes drawn from 0, 1, 7, 64 (and 1000 for one axis)."""
    shapes = {0: (2, 0, 7, 3), 1: (1, 1, 1, 1), 7: (7, 7, 7, 7), 64: (3, 64, 64, 64), 1000: (2, 7, 1000, 7)}

    def make(rng, size):
        n, i, k, j = shapes[size]
        return [f32(rng, n, i, k), f32(rng, n, k, j), np.full((n, i, j), np.nan, np.float32)]

    def reference(a, b, out):
        return f64(a) @ f64(b)

    def bound(a, b, out):
        return gamma(a.shape[2], np.float32) * (np.abs(f64(a)) @ np.abs(f64(b)))

    return Case(make, (2,), reference, bound, False)


def _conv(x, w):
    """out[b, p, q, f] = sum over r, s, c of x[b, p + r, q + s, c] * w[r, s, c, f], in float64."""
    r, s = w.shape[:2]
    windows = np.lib.stride_tricks.sliding_window_view(f64(x), (r, s), axis=(1, 2))  # b p q c r s
    return np.einsum("bpqcrs,rscf->bpqf", windows, f64(w))


def conv2d_case():
    shapes = {0: (0, 5, 5, 3, 3, 3, 2), 1: (1, 1, 1, 1, 1, 1, 1), 7: (1, 7, 7, 7, 3, 3, 7),
              64: (2, 10, 9, 8, 3, 2, 64), 1000: (1, 12, 10, 1000, 1, 3, 2)}

    def make(rng, size):
        b, h, w, c, r, s, f = shapes[size]
        return [f32(rng, b, h, w, c), f32(rng, r, s, c, f), np.full((b, h - r + 1, w - s + 1, f), np.nan, np.float32)]

    def reference(x, w, out):
        return _conv(x, w)

    def bound(x, w, out):
        return gamma(int(np.prod(w.shape[:3])), np.float32) * _conv(np.abs(x), np.abs(w))

    return Case(make, (2,), reference, bound, False)


def _rows(rng, size, scale=1.0, shift=0.0):
    r, c = {0: (0, 7), 1: (1, 1), 7: (7, 0), 64: (64, 1000), 1000: (1000, 7)}[size]
    return (f32(rng, r, c) * scale + shift).astype(np.float32)


def softmax_case():
    """exp's argument x - max is rounded once (relative error u, so exp's result is
    off by u * |x - max| relatively), exp itself by a few ulp, the sum by
    gamma(C), the scaling by 2u."""

    def make(rng, size):
        x = _rows(rng, size, scale=4.0)
        return [x, np.full(x.shape, np.nan, np.float32)]

    def reference(x, out):
        e = np.exp(f64(x) - f64(x).max(axis=1, keepdims=True, initial=-np.inf))
        return e / e.sum(axis=1, keepdims=True)

    def bound(x, out):
        spread = np.abs(f64(x) - f64(x).max(axis=1, keepdims=True, initial=-np.inf)).max(initial=0)
        return 2 * reference(x, out) * (U32 * (spread + 8) + gamma(x.shape[1] + 2, np.float32))

    return Case(make, (1,), reference, bound, False)


def layer_norm_case():
    """The mean is off by gamma(C) * mean|x| (delta); the variance's sum of squares
    by gamma(C + 2) relatively plus 2 * delta * mean|x - mean| from the mean's error,
    which moves 1/sqrt(var + eps) by half that relatively; the last line adds
    three roundings."""

    def make(rng, size):
        x = _rows(rng, size, scale=2.0, shift=3.0)
        c = x.shape[1]
        return [x, f32(rng, c), f32(rng, c), np.float32(1e-5), np.full(x.shape, np.nan, np.float32)]

    def reference(x, gamma_, beta, eps, out):
        if x.size == 0:
            return np.zeros(x.shape)
        x = f64(x)
        mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(var + float(eps)) * f64(gamma_) + f64(beta)

    def bound(x, gamma_, beta, eps, out):
        if x.size == 0:
            return 0.0
        x64, c = f64(x), x.shape[1]
        mean, var = x64.mean(axis=1, keepdims=True), x64.var(axis=1, keepdims=True)
        inv = 1 / np.sqrt(var + float(eps))
        delta = gamma(c, np.float32) * np.abs(x64).mean(axis=1, keepdims=True)
        rel_inv = gamma(c + 6, np.float32) + delta * np.abs(x64 - mean).mean(axis=1, keepdims=True) * inv ** 2
        centered = np.abs(x64 - mean) + delta
        return 2 * (np.abs(f64(gamma_)) * (centered * inv * (rel_inv + 3 * U32) + delta * inv)
                    + 3 * U32 * (np.abs(reference(x, gamma_, beta, eps, out)) + np.abs(f64(beta))))

    return Case(make, (4,), reference, bound, False)


def q4k_case():
    """y = silu(W @ x) with W a q4_k tensor. The kernel sums (scale * q - min) * x
    over K terms: each weight is exact but for the rounding of scale * q - min
    (|min| <= 4 max|W| of the row with plenty of room: q = 0 gives w = -min),
    so z is within gamma(K + 16) * (|W| + 8 max|W|) @ |x|; silu's slope is at
    most 1.1. The blocks stay as quantize made them (a byte layout has no
    strided variants); x and y take every layout."""
    import dsl

    shapes = {0: (0, 1), 1: (1, 1), 7: (7, 2), 64: (64, 1), 1000: (1000, 1)}

    def make(rng, size):
        n, blocks = shapes[size]
        w = f32(rng, n, 256 * blocks)
        packed = dsl.ops.quantize(w, "q4_k").reshape(n, blocks, 144)
        return [packed, f32(rng, 256 * blocks), np.full(n, np.nan, np.float32)]

    def weights(w):
        n, blocks, _ = w.shape
        if n == 0:
            return np.zeros((0, 256 * blocks))
        return f64(dsl.ops.dequantize(w, "q4_k", (n, 256 * blocks)))

    def reference(w, x, y):
        z = weights(w) @ f64(x)
        return z / (1 + np.exp(-z))

    def bound(w, x, y):
        a = np.abs(weights(w))
        rowmax = a.max(axis=1, keepdims=True, initial=0)
        z_err = gamma(a.shape[1] + 16, np.float32) * ((a + 8 * rowmax) @ np.abs(f64(x)))
        return 1.1 * z_err + 8 * U32 * np.abs(reference(w, x, y))

    return Case(make, (2,), reference, bound, False, fixed=(0,))


MORE_CASES = {
    "bmm_seed": bmm_case(),
    "bmm_seed_scheduled": bmm_case(),
    "conv2d_nhwc": conv2d_case(),
    "softmax_rows": softmax_case(),
    "layer_norm_rows": layer_norm_case(),
    "q4k_matvec_silu": q4k_case(),
}
