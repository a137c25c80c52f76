"""Scalar semantics for the reference interpreter (docs/semantics.md, "Arithmetic").

Every value is a numpy scalar of its exact type (`np.float32`, `np.int8`,
`np.bool_`, ...), so rounding and integer wraparound are those of compiled code.
The caller runs under `np.errstate(all="ignore")`: overflow is defined (it wraps)
and must not warn. Each `*_fn` builder is called once per IR node, when the
interpreter compiles it, and returns a plain function of the operand values.
"""

from __future__ import annotations

import math
import operator
import struct
from fractions import Fraction
from typing import Callable

import numpy as np

from .types import ALL_TYPES, ScalarType

NP_TYPES: dict[ScalarType, type] = {t: np.dtype(t.numpy_name).type for t in ALL_TYPES}
TRUE, FALSE = np.True_, np.False_

Fn2 = Callable[[object, object], object]
Fn1 = Callable[[object], object]

_COMPARE = {"==": operator.eq, "!=": operator.ne, "<": operator.lt,
            "<=": operator.le, ">": operator.gt, ">=": operator.ge}
_PLAIN = {"+": operator.add, "-": operator.sub, "*": operator.mul,
          "&": operator.and_, "|": operator.or_, "^": operator.xor}


def int_range(t: ScalarType) -> tuple[int, int]:
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def const_value(value, t: ScalarType):
    """The numpy scalar of type `t` for an IR constant (floats round to `t`)."""
    if t.is_bool:
        return np.bool_(bool(value))
    if t.is_float:
        return NP_TYPES[t](float(value))
    return NP_TYPES[t](int(value))


def scalar_arg(value, t: ScalarType, what: str):
    """Convert a caller's scalar to type `t`; ints must fit, bools must be bools."""
    if t.is_bool:
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what} must be a bool, got {value!r}")
        return np.bool_(value)
    if t.is_float:
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{what} must be a number, got {value!r}")
        return NP_TYPES[t](value)
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be an integer, got {value!r}")
    lo, hi = int_range(t)
    if not lo <= int(value) <= hi:
        raise OverflowError(f"{what} = {int(value)} does not fit in {t} ({lo}..{hi})")
    return NP_TYPES[t](int(value))


# --------------------------------------------------------------- binary ops


def binary_fn(op: str, t: ScalarType) -> Fn2:
    """`f(a, b)` for the binary `op` on operands of type `t` (not `and`/`or`:
    those short-circuit, so the interpreter handles them itself)."""
    if op in _COMPARE:
        return _COMPARE[op]
    if op in ("min", "max"):
        return _float_minmax(op) if t.is_float else _int_minmax(op)
    if t.is_float:
        return _float_op(op)
    if op in ("//", "%"):
        return _int_divmod(op, t)
    if op in ("<<", ">>"):
        return _shift(op, t)
    if op in _PLAIN:
        return _PLAIN[op]
    raise ValueError(f"no binary operator {op!r} on {t}")


def _float_op(op: str) -> Fn2:
    if op in ("+", "-", "*"):
        return _PLAIN[op]
    if op == "/":
        return operator.truediv
    if op == "//":
        return lambda a, b: np.floor(a / b)
    if op == "%":
        return lambda a, b: a - np.floor(a / b) * b
    raise ValueError(f"no float operator {op!r}")


def _int_divmod(op: str, t: ScalarType) -> Fn2:
    """Floor division / modulo; a zero divisor gives 0; MIN // -1 wraps to MIN."""
    zero = NP_TYPES[t](0)
    signed = t.is_signed

    def floordiv(a, b):
        if b == 0:
            return zero
        if signed and b == -1:
            return zero - a  # numpy's own MIN // -1 is not specified
        return a // b

    def mod(a, b):
        if b == 0 or (signed and b == -1):
            return zero
        return a % b

    return floordiv if op == "//" else mod


def _shift(op: str, t: ScalarType) -> Fn2:
    """The amount is read as unsigned; amounts >= the width give 0 (or the sign)."""
    T, bits = NP_TYPES[t], t.bits
    zero, minus_one = T(0), T(-1) if t.is_signed else T(0)
    amount_mask = (1 << bits) - 1

    def shl(a, b):
        amount = int(b) & amount_mask
        return zero if amount >= bits else a << T(amount)

    def shr(a, b):
        amount = int(b) & amount_mask
        if amount >= bits:
            return minus_one if a < 0 else zero
        return a >> T(amount)

    return shl if op == "<<" else shr


def _int_minmax(op: str) -> Fn2:
    if op == "min":
        return lambda a, b: a if a <= b else b
    return lambda a, b: a if a >= b else b


def _float_minmax(op: str) -> Fn2:
    """llvm.minimum / llvm.maximum: NaN wins, and -0.0 < +0.0."""
    want_negative_zero = op == "min"

    def pick(a, b):
        if a < b:
            return a if want_negative_zero else b
        if b < a:
            return b if want_negative_zero else a
        if a == b:  # equal: only the sign of a zero can differ
            return a if (math.copysign(1.0, a) < 0) == want_negative_zero else b
        return a if a != a else b

    return pick


# ---------------------------------------------------------------- unary ops


def unary_fn(op: str, t: ScalarType) -> Fn1:
    """`f(a)` for the unary `op` (neg, not, invert, or an intrinsic) on type `t`."""
    T = NP_TYPES[t]
    zero = T(0)
    match op:
        case "not":
            return lambda a: FALSE if a else TRUE
        case "invert":
            return operator.invert
        case "neg":
            return operator.neg if t.is_float else (lambda a: zero - a)
        case "abs":
            if t.is_float:
                return operator.abs
            return (lambda a: a) if not t.is_signed else (lambda a: a if a >= 0 else zero - a)
        case "exp" | "log" | "sqrt" | "tanh" | "floor" | "ceil" | "rint":
            return getattr(np, op)  # np.rint: ties to even
        case "rsqrt":
            one = T(1)
            return lambda a: one / np.sqrt(a)
        case "erf":
            return lambda a: T(math.erf(float(a)))
        case "bits" | "from_bits":
            return _bitcast_fn(op, t)
        case "opaque":
            return lambda a: a
    raise ValueError(f"no unary operator {op!r} on {t}")


def _bitcast_fn(op: str, t: ScalarType) -> Fn1:
    """The same bits read as the other type (`t` is the operand's): f32 <-> i32,
    f64 <-> i64 (u32/u64 read as f32/f64 too). Works lane-wise on arrays."""
    if op == "bits":
        width = np.dtype(f"int{t.bits}")
    else:
        width = np.dtype(f"float{t.bits}")
    return lambda a: a.view(width)


def cast_fn(src: ScalarType, dst: ScalarType) -> Fn1:
    """Conversion per the semantics: float->int saturates (NaN -> 0), int->int
    truncates or extends by the source's signedness, x -> bool is x != 0."""
    D = NP_TYPES[dst]
    if src == dst:
        return lambda a: a
    if dst.is_bool:
        zero = NP_TYPES[src](0)
        return lambda a: a != zero
    if src.is_float and not dst.is_float:
        return _saturate(dst)
    # numpy's astype is the C conversion: correctly rounded, wrapping for ints.
    return lambda a: a.astype(D)


def _saturate(dst: ScalarType) -> Fn1:
    D = NP_TYPES[dst]
    lo, hi = int_range(dst)
    low, high, zero = D(lo), D(hi), D(0)

    def convert(a):
        v = float(a)
        if v != v:
            return zero
        if v <= lo:
            return low
        if v >= hi:
            return high
        return D(int(v))  # int() truncates toward zero

    return convert


# ---------------------------------------------------------------------- fma


def fma_fn(t: ScalarType) -> Callable[[object, object, object], object]:
    """a * b + c rounded once. f32: exact product in f64, sum rounded to odd, then
    to f32 (exact: f64 has more than 24 + 2 bits). f64: `math.fma` when Python
    has it (3.13+), else the exact rational result rounded once."""
    if t.bits == 32:
        return _fma_f32
    exact = getattr(math, "fma", None)
    if exact is not None:
        return lambda a, b, c: np.float64(exact(float(a), float(b), float(c)))
    return _fma_f64


def _fma_f32(a, b, c):
    p, z = float(a) * float(b), float(c)  # the product of two f32s is exact in f64
    s = p + z
    if math.isfinite(s):
        # TwoSum: err is exactly (p + z) - s.
        bp = s - z
        err = (p - bp) + (z - (s - bp))
        if err != 0.0 and not _odd(s):
            s = math.nextafter(s, math.copysign(math.inf, err))
    return np.float32(s)


def _odd(x: float) -> bool:
    return bool(struct.unpack("<q", struct.pack("<d", x))[0] & 1)


def _fma_f64(a, b, c):
    x, y, z = float(a), float(b), float(c)
    if not (math.isfinite(x) and math.isfinite(y) and math.isfinite(z)):
        return np.float64(x * y + z)  # inf/nan: one rounding or two agree
    exact = Fraction(x) * Fraction(y) + Fraction(z)
    if exact == 0:
        # IEEE: an exact zero sum is +0 unless both addends are -0.
        return np.float64(x * y + z) if (x == 0 or y == 0) and z == 0 else np.float64(0.0)
    try:
        return np.float64(float(exact))  # int / int division rounds correctly
    except OverflowError:
        return np.float64(math.inf if exact > 0 else -math.inf)


# ------------------------------------------------------------------ memory


def unit_inner_stride(arr: np.ndarray) -> bool:
    """The array's innermost axis is contiguous (ir.UnitStrides)."""
    return arr.strides[-1] == arr.itemsize


def overlaps(a: np.ndarray, b: np.ndarray):
    """np.bool_: both arrays are non-empty and their byte ranges intersect."""
    ra, rb = _byte_range(a), _byte_range(b)
    if ra is None or rb is None:
        return FALSE
    return np.bool_(ra[0] <= rb[1] and rb[0] <= ra[1])


def _byte_range(arr: np.ndarray) -> tuple[int, int] | None:
    """(first byte, last byte) the array can touch, or None when it is empty."""
    if arr.size == 0:
        return None
    base = arr.__array_interface__["data"][0]
    lo = hi = 0
    for size, stride in zip(arr.shape, arr.strides):
        reach = (size - 1) * stride
        lo += min(reach, 0)
        hi += max(reach, 0)
    return base + lo, base + hi + arr.itemsize - 1


def out_of_bounds(kernel_name: str, tensor, span):
    """`fail(index, shape)`: raise the IndexError of an access to `tensor` (a
    `TensorParam`) outside its shape, naming the kernel, index, shape and line."""
    at = f" at {span.location}" if span is not None else ""

    def fail(ix, shape):
        index = tuple(int(i) for i in ix)
        raise IndexError(f"kernel '{kernel_name}': index {index} out of bounds for "
                         f"'{tensor.name}' with shape {tuple(shape)}{at}")

    return fail


def align_gap(arr: np.ndarray, indices, nbytes: int) -> np.int64:
    """ir.AlignGap on a real array: elements from the address of `arr[indices]`
    (computed, not read: it may lie past the end) to the next multiple of `nbytes`."""
    address = arr.__array_interface__["data"][0] + sum(int(i) * s for i, s in zip(indices, arr.strides))
    if address % arr.itemsize:
        return np.int64(0)
    return np.int64((-address) % nbytes // arr.itemsize)
