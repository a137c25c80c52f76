"""Lane-wise semantics for the reference interpreter (docs/semantics.md, "Vectors").

A vector value is a numpy array of shape (lanes,) and its element dtype. Each
`*_fn` builder here returns a function that applies the scalar rule of
`interpret_ops` to every lane, taking arrays or numpy scalars (broadcast to the
lanes), so that lane k of the result is exactly what the scalar function gives
on lane k of the operands:

    >>> shl = binary_fn("<<", I8)
    >>> shl(np.array([1, 1, -1], np.int8), np.array([3, 9, -1], np.int64))
    array([8, 0, 0], dtype=int8)

Where a numpy array form could differ from the scalar rule in an edge case
(floor division by 0 or -1, shift amounts, the sign of a zero from min/max,
saturating casts) it is spelled out with `np.where`; what has no exact array
form (erf, f64 fma, float min/max folds) runs the scalar function lane by lane.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np

from . import interpret_ops as ops
from .interpret_ops import NP_TYPES, int_range
from .types import ScalarType

Fn = Callable[..., object]


def lanewise(f: Fn, t: ScalarType) -> Fn:
    """`f` (a scalar function) applied lane by lane; the result has type `t`."""
    T = NP_TYPES[t]

    def apply(*args):
        lanes = np.broadcast_arrays(*args)
        return np.array([f(*lane) for lane in zip(*lanes)], dtype=T)

    return apply


# --------------------------------------------------------------- binary ops


def binary_fn(op: str, t: ScalarType) -> Fn:
    """Lane-wise `op` on operands of type `t` (not `and`/`or`: see the compiler)."""
    if op in ("min", "max"):
        if t.is_float:
            return _float_minmax(op)
        return np.minimum if op == "min" else np.maximum
    if t.is_int and op in ("//", "%"):
        return _int_divmod(op, t)
    if t.is_int and op in ("<<", ">>"):
        return _shift(op, t)
    # Comparisons, + - * & | ^ and the float ops are numpy ufuncs or expressions
    # of them: the same loops, lane by lane, as on scalars.
    return ops.binary_fn(op, t)


def _int_divmod(op: str, t: ScalarType) -> Fn:
    """Floor division / modulo; a zero divisor gives 0; MIN // -1 wraps to MIN."""
    T = NP_TYPES[t]
    zero, one, minus_one = T(0), T(1), T(-1) if t.is_signed else None
    signed = t.is_signed

    def special(b):
        return (b == zero) | (b == minus_one) if signed else b == zero

    def floordiv(a, b):
        odd = special(b)
        q = a // np.where(odd, one, b)
        if signed:
            q = np.where(b == minus_one, zero - a, q)
        return np.where(b == zero, zero, q)

    def mod(a, b):
        odd = special(b)
        return np.where(odd, zero, a % np.where(odd, one, b))

    return floordiv if op == "//" else mod


def _shift(op: str, t: ScalarType) -> Fn:
    """The amount is read as unsigned; amounts >= the width give 0 (or the sign)."""
    T, bits = NP_TYPES[t], t.bits
    zero, minus_one = T(0), T(-1) if t.is_signed else T(0)
    amount_mask = np.uint64((1 << bits) - 1)

    def amounts(b):
        # Casting to u64 keeps the two's complement bits, as `int(b) & mask` does.
        amount = np.asarray(b).astype(np.uint64) & amount_mask
        big = amount >= bits
        return big, np.where(big, 0, amount).astype(T)

    def shl(a, b):
        big, k = amounts(b)
        return np.where(big, zero, a << k)

    def shr(a, b):
        big, k = amounts(b)
        return np.where(big, np.where(a < zero, minus_one, zero), a >> k)

    return shl if op == "<<" else shr


def _float_minmax(op: str) -> Fn:
    """llvm.minimum / llvm.maximum lane-wise: NaN wins, and -0.0 < +0.0."""
    want_negative_zero = op == "min"

    def pick(a, b):
        lt, gt, eq = a < b, b < a, a == b
        strict = lt if want_negative_zero else gt
        zero_sign = eq & (np.signbit(a) == want_negative_zero)
        nan = ~(lt | gt | eq) & (a != a)
        return np.where(strict | zero_sign | nan, a, b)

    return pick


# ---------------------------------------------------------------- unary ops


def unary_fn(op: str, t: ScalarType) -> Fn:
    """Lane-wise unary `op` (neg, not, invert, or an intrinsic) on type `t`."""
    if op == "not":
        return np.logical_not
    if op == "abs" and t.is_signed:
        zero = NP_TYPES[t](0)
        return lambda a: np.where(a >= zero, a, zero - a)
    if op == "erf":
        return lanewise(ops.unary_fn(op, t), t)
    return ops.unary_fn(op, t)  # operators and numpy ufuncs: already lane-wise


def cast_fn(src: ScalarType, dst: ScalarType) -> Fn:
    """Lane-wise conversion (the scalar rules: see `interpret_ops.cast_fn`)."""
    if src.is_float and dst.is_int:
        return _saturate(dst)
    return ops.cast_fn(src, dst)  # `!=`, `astype` or the identity: lane-wise


def _saturate(dst: ScalarType) -> Fn:
    """Float -> int: truncate toward zero, clamp to the range, NaN -> 0.

    Comparing with float(lo) / float(hi) is exact here: lo is a power of two (or
    0), and hi = 2**k - 1 either is a double or rounds up to 2**k with no double
    in between."""
    D = NP_TYPES[dst]
    lo, hi = int_range(dst)
    low, high, zero = D(lo), D(hi), D(0)
    flo, fhi = float(lo), float(hi)

    def convert(a):
        v = np.asarray(a).astype(np.float64)
        under, over = v <= flo, v >= fhi
        inside = ~(under | over | (v != v))
        out = np.where(inside, np.trunc(np.where(inside, v, 0.0)), 0.0).astype(D)
        return np.where(under, low, np.where(over, high, np.where(inside, out, zero)))

    return convert


def fma_fn(t: ScalarType) -> Fn:
    """Lane-wise a * b + c rounded once (f32: array form of `interpret_ops._fma_f32`)."""
    if t.bits == 32:
        return _fma_f32
    return lanewise(ops.fma_fn(t), t)


def _fma_f32(a, b, c):
    a, b, c = (x.astype(np.float64) for x in np.broadcast_arrays(a, b, c))
    p, z = a * b, c  # the product of two f32s is exact in f64
    s = p + z
    bp = s - z
    err = (p - bp) + (z - (s - bp))  # TwoSum: exactly (p + z) - s where s is finite
    even = (s.view(np.int64) & 1) == 0
    to_odd = np.isfinite(s) & (err != 0.0) & even
    s = np.where(to_odd, np.nextafter(s, np.copysign(np.inf, err)), s)
    return s.astype(np.float32)


# --------------------------------------------------------------- reductions


def hreduce_fn(op: str, t: ScalarType) -> Callable[[np.ndarray], object]:
    """The lanes of a vector folded left to right with the scalar `op`
    (+, *, min, max), as a numpy scalar of type `t`:

        >>> hreduce_fn("+", F32)(np.array([1e8, 1, -1e8, 1], np.float32))
        np.float32(1.0)
    """
    T = NP_TYPES[t]
    if op in ("+", "*"):
        # `accumulate` is the sequential left fold r[k] = r[k-1] op v[k] (a
        # `reduce` of floats would sum pairwise); integer wraparound is exact.
        ufunc = np.add if op == "+" else np.multiply
        return lambda v: ufunc.accumulate(v, dtype=T)[-1]
    if t.is_float:
        pick = ops.binary_fn(op, t)
        return lambda v: functools.reduce(pick, v)
    ufunc = np.minimum if op == "min" else np.maximum
    return lambda v: ufunc.reduce(v)
