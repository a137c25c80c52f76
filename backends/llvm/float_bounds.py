"""Float values known to be small enough to convert to an integer without
saturating.

A conversion `i32(x)` of a float must give llvm.fptosi.sat's answer for any x
(x86 has no saturating vector conversion: five instructions around a plain
one). Under a `Select` whose condition is `abs(x) < c` (x a local, c a
constant), x is known to be finite and below c in magnitude; so is any sum,
difference or product of such values and constants, within a bound that
allows for rounding. C's `(int8_t)(int32_t)v` guarded by `fabsf(v) < 2^31`
(stdlib's c_int8) and ggml's nearest_int, `(v + 1.5 * 2^23) - 1.5 * 2^23`
guarded by `fabsf(v) < 2^22`, then convert with one cvttps2dq. A lane that
fails the condition converts to poison, which the select around discards.
Only a local x: nothing can assign it between the test and the conversion.
"""

from __future__ import annotations

from contextlib import contextmanager

from dsl.lowering.ir import Binary, Const, Expr, Unary, Var

from .context import FunctionContext

_ROUNDING = 1.0 + 2.0 ** -20  # each operation's relative rounding, generously (f32: 2^-24)


@contextmanager
def guarded_by(cx: FunctionContext, cond: Expr):
    """While emitting the side of a select that runs where `cond` holds."""
    match cond:
        case Binary(op="<", lhs=Unary(op="abs", operand=Var(sym=x)), rhs=Const(value=c)) if x.type.is_float:
            cx.float_bounds.append((x, float(c)))
            try:
                yield
            finally:
                cx.float_bounds.pop()
        case _:
            yield


def fits_integer(cx: FunctionContext, value: Expr, to) -> bool:
    """Does float `value` truncate into signed integer type `to` wherever it is evaluated now?"""
    if not (value.type.is_float and to.is_int and to.is_signed):
        return False
    limit = 2.0 ** (to.bits - 1)
    found = _bound(cx, value)
    if found is None:
        return False
    bound, strict = found
    return bound <= limit if strict else bound < limit


def _bound(cx: FunctionContext, e: Expr) -> tuple[float, bool] | None:
    """(b, strict): |e| < b (strict) or |e| <= b; None when nothing bounds e."""
    match e:
        case Var(sym=sym):
            limits = [c for x, c in cx.float_bounds if x is sym]
            return (min(limits), True) if limits else None
        case Const(value=v) if isinstance(v, (int, float)) and not isinstance(v, bool):
            return abs(float(v)), False
        case Unary(op="neg" | "abs", operand=a):
            return _bound(cx, a)
        case Binary(op="+" | "-" | "*", lhs=a, rhs=b):
            left, right = _bound(cx, a), _bound(cx, b)
            if left is None or right is None:
                return None
            exact = left[0] + right[0] if e.op != "*" else left[0] * right[0]
            return exact * _ROUNDING, False
    return None
