"""Typed expressions under construction, literals, and implicit conversions.

Literals are *weak*: `2` and `0.5` take the type of whatever they meet (`x * 2`
stays f32, like numpy's scalars). Arithmetic on literals alone is folded here, so
a weak expression is always a constant; the one exception is a local whose type
is still being inferred (the first pass of `kernel.py`), read as a weak value.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from dsl.grammar.diagnostics import DiagnosticBag, Span

from .. import ir
from ..types import BOOL, F32, F64, I64, ScalarType, common_type, widens_to


@dataclass(frozen=True, slots=True)
class TExpr:
    """An IR expression plus whether it is a weak literal ('int', 'float' or None)."""

    expr: ir.Expr
    weak: str | None = None

    @property
    def type(self) -> ScalarType:
        return self.expr.type


POISON = None  # an expression that already failed; checking goes on around it


def weak_const(value, span: Span) -> TExpr:
    if isinstance(value, bool):
        return TExpr(ir.Const(value, BOOL, span))
    if isinstance(value, int):
        return TExpr(ir.Const(value, I64, span), "int")
    return TExpr(ir.Const(float(value), F32, span), "float")


def default_type(weak: str) -> ScalarType:
    return I64 if weak == "int" else F32


def int_range(t: ScalarType) -> tuple[int, int]:
    if t.is_signed:
        return -(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1
    return 0, (1 << t.bits) - 1


def retype(te: TExpr, target: ScalarType, bag: DiagnosticBag, span: Span | None) -> ir.Expr | None:
    """Give a weak expression the concrete type `target` (or report why it can't)."""
    expr = te.expr
    if not isinstance(expr, ir.Const):
        return ir.Cast(expr, target, span)  # first-pass placeholder, never compiled
    value = expr.value
    if te.weak == "float" and not target.is_float:
        bag.error(span, f"float literal {value!r} cannot be used as {target}; write an integer or cast explicitly")
        return None
    if target.is_bool:
        bag.error(span, f"number {value!r} used where a bool is expected")
        return None
    if target.is_int:
        lo, hi = int_range(target)
        if not lo <= value <= hi:
            bag.error(span, f"integer literal {value} does not fit in {target} (range {lo}..{hi})")
            return None
        return ir.Const(int(value), target, expr.span)
    try:
        as_float = float(value)
    except OverflowError:
        as_float = math.inf
    if math.isinf(as_float) or _overflows(as_float, target):
        bag.error(span, f"literal {value!r} is too large for {target}")
        return None
    return ir.Const(as_float, target, expr.span)


# Rounding to nearest-even sends a value to infinity from halfway between the
# largest finite float and the next power of two: 3.4028235e38, the shortest
# decimal for f32's max, is above the max itself but rounds down to it.
_F32_ROUNDS_TO_INF = 2.0**128 - 2.0**103


def _overflows(value: float, target: ScalarType) -> bool:
    if target.bits != 32:
        return False  # a finite Python float is a finite f64
    return math.isfinite(value) and abs(value) >= _F32_ROUNDS_TO_INF


def coerce(te: TExpr | None, target: ScalarType, bag: DiagnosticBag, span: Span | None, what: str) -> ir.Expr | None:
    """Convert `te` to `target` implicitly: literals adapt, strong types only widen."""
    if te is None:
        return None
    if te.weak:
        return retype(te, target, bag, span)
    if te.type == target:
        return te.expr
    if widens_to(te.type, target):
        return ir.Cast(te.expr, target, span)
    bag.error(
        span,
        f"{what}: cannot convert {te.type} to {target} implicitly (it could lose precision)",
        f"cast explicitly, e.g. {target}(...)",
    )
    return None


def concrete(te: TExpr | None, bag: DiagnosticBag, span: Span | None) -> ir.Expr | None:
    """A weak expression alone takes its default type (i64 or f32)."""
    if te is None:
        return None
    if te.weak:
        return retype(te, default_type(te.weak), bag, span)
    return te.expr


def unify(a: TExpr, b: TExpr, bag: DiagnosticBag, span: Span, op: str):
    """The common type of two operands and both converted to it (None on error)."""
    if a.weak and b.weak:
        weak = "float" if "float" in (a.weak, b.weak) else "int"
        target = default_type(weak)
    elif a.weak or b.weak:
        strong, weak_side = (b, a) if a.weak else (a, b)
        target = strong.type
        if weak_side.weak == "float" and not target.is_float:
            target = common_type(target, F64)
    else:
        target = common_type(a.type, b.type)
    if target is None:
        left, right = _describe(a), _describe(b)
        bag.error(span, f"operands of '{op}' have types {left} and {right} with no lossless common type",
                  "cast one side explicitly")
        return None, None, None
    return target, coerce(a, target, bag, span, f"left operand of '{op}'"), coerce(b, target, bag, span, f"right operand of '{op}'")


def _describe(te: TExpr) -> str:
    return f"a {te.weak} literal" if te.weak else str(te.type)
