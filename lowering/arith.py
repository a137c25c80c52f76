"""Building i64 index arithmetic, folded as it is built.

Transforms and the bounds guard compose index expressions; folding constants
and identities here keeps printed IR readable (`i.outer * 4 + i.inner`, not
`0 + (i.outer * 4 + i.inner)`) and the generated checks small.
"""

from __future__ import annotations

from . import ir
from .types import BOOL, I64 as _I64


def i64(value: int) -> ir.Const:
    return ir.Const(value, _I64)


def _const(e: ir.Expr) -> int | None:
    return e.value if isinstance(e, ir.Const) else None


# Index arithmetic built by the transforms, folded as it is built so printed IR
# stays readable (`i.outer * 4 + i.inner`, not `0 + (i.outer * 4 + i.inner)`).

def add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y is not None:
        return i64(x + y)
    if x == 0:
        return b
    if y == 0:
        return a
    return ir.Binary("+", a, b, _I64)


def sub(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y is not None:
        return i64(x - y)
    if y == 0:
        return a
    return ir.Binary("-", a, b, _I64)


def mul(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y is not None:
        return i64(x * y)
    if x == 1:
        return b
    if y == 1:
        return a
    return ir.Binary("*", a, b, _I64)


def floordiv(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y:
        return i64(x // y)
    if y == 1:
        return a
    return ir.Binary("//", a, b, _I64)


def share_start(q: ir.Expr, total: ir.Expr, parts: ir.Expr) -> ir.Expr:
    """Where part q of `parts` starts when they share `total` items evenly
    (sizes differ by at most one): q * total // parts."""
    return floordiv(mul(q, total), parts)


def roundup(x: ir.Expr, f: int) -> ir.Expr:
    """x rounded up to a multiple of the constant f (x >= 0)."""
    return mul(floordiv(add(x, i64(f - 1)), i64(f)), i64(f))


def maximum(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y is not None:
        return i64(max(x, y))
    return ir.Binary("max", a, b, _I64)


def minimum(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    x, y = _const(a), _const(b)
    if x is not None and y is not None:
        return i64(min(x, y))
    return ir.Binary("min", a, b, _I64)


def compare(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary(op, a, b, BOOL)


def both(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary("and", a, b, BOOL)


_FOLDERS = {"+": add, "-": sub, "*": mul, "//": floordiv, "max": maximum, "min": minimum}


def fold(e: ir.Expr) -> ir.Expr:
    """Re-fold one node whose operands may have become constants: i64
    arithmetic, and `and`, `or` or `not` of a constant."""
    match e:
        case ir.Binary(op, lhs, rhs) if e.type == _I64 and op in _FOLDERS:
            return _FOLDERS[op](lhs, rhs)
        case ir.Binary("and" | "or" as op, lhs, rhs):
            for known, other in ((lhs, rhs), (rhs, lhs)):
                if isinstance(known, ir.Const):
                    # and: True leaves the other, False decides; or: the reverse
                    return other if bool(known.value) == (op == "and") else known
        case ir.Unary("not", ir.Const(value)):
            return ir.Const(not value, BOOL, e.span)
    return e
