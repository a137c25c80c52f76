"""Folding of arithmetic on literals (`2 * 3`, `-1.5`, `1 << 4`), with Python's
exact integers: a literal expression keeps its value until it meets a type."""

from __future__ import annotations

import math

from dsl.grammar.diagnostics import DiagnosticBag, Span

from .coerce import TExpr, weak_const

_INT_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "//": lambda a, b: a // b if b else 0,
    "%": lambda a, b: a % b if b else 0,
    "&": lambda a, b: a & b,
    "|": lambda a, b: a | b,
    "^": lambda a, b: a ^ b,
    "<<": lambda a, b: a << b,
    ">>": lambda a, b: a >> b,
}

_FLOAT_OPS = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b if b else math.copysign(math.inf, a) if a else math.nan,
    "//": lambda a, b: math.floor(a / b) if b else math.nan,
    "%": lambda a, b: a - math.floor(a / b) * b if b else math.nan,
}

MAX_LITERAL_BITS = 4096  # keeps `1 << 10**9` from eating the machine


def fold_binary(op: str, a: TExpr, b: TExpr, bag: DiagnosticBag, span: Span) -> TExpr | None:
    x, y = a.expr.value, b.expr.value
    both_int = a.weak == "int" and b.weak == "int"
    try:
        if op == "**":
            if both_int and 0 <= y <= 64 and abs(x).bit_length() * max(y, 1) <= MAX_LITERAL_BITS:
                return weak_const(x**y, span)
            if not both_int:
                return weak_const(float(x) ** float(y), span)
            bag.error(span, "constant power too large")
            return None
        if both_int:
            if op == "/":
                bag.error(span, "'/' on integers; use '//' for floor division or write a float literal")
                return None
            if op in ("<<", ">>") and (y < 0 or y > MAX_LITERAL_BITS):
                bag.error(span, "shift count out of range")
                return None
            return weak_const(_INT_OPS[op](x, y), span)
        if op not in _FLOAT_OPS:
            bag.error(span, f"'{op}' needs integer operands")
            return None
        return weak_const(_FLOAT_OPS[op](float(x), float(y)), span)
    except OverflowError:
        bag.error(span, "constant expression overflows")
        return None


def fold_unary(op: str, a: TExpr, bag: DiagnosticBag, span: Span) -> TExpr | None:
    x = a.expr.value
    if op == "-":
        return weak_const(-x, span)
    if op == "+":
        return a
    if op == "~" and a.weak == "int":
        return weak_const(~x, span)
    if op == "not":
        bag.error(span, "'not' needs a bool operand, not a number")
        return None
    bag.error(span, f"'{op}' needs an integer operand")
    return None


def _safe(fn):
    def apply(x: float) -> float:
        try:
            return fn(x)
        except ValueError:  # outside the domain: what the float function gives at run time
            return math.nan
        except OverflowError:
            return math.inf
    return apply


def _rounding(fn):
    """A rounding function as the hardware's: infinities and NaN unchanged, and
    a zero result keeps x's sign (floor(-0.0) and rint(-0.4) are -0.0)."""
    return lambda x: math.copysign(float(fn(x)), x) if math.isfinite(x) else x


_FLOAT_FUNCTIONS = {
    "exp": _safe(math.exp), "log": _safe(lambda x: -math.inf if x == 0 else math.log(x)),
    "sqrt": _safe(math.sqrt), "rsqrt": _safe(lambda x: math.inf if x == 0 else 1 / math.sqrt(x)),
    "tanh": math.tanh, "erf": math.erf, "floor": _rounding(math.floor), "ceil": _rounding(math.ceil),
    "rint": _rounding(round),  # Python's round: ties to even
}


def fold_intrinsic(name: str, args: list[TExpr], span: Span) -> TExpr | None:
    """`sqrt(2.0)`, `abs(-2)`, `max(1, 2.5)` on literals: a literal again (weak, so
    `x * sqrt(2.0)` stays in x's type). None when `name` does not fold."""
    values = [a.expr.value for a in args]
    if name == "abs":
        return TExpr(weak_const(abs(values[0]), span).expr, args[0].weak)
    if name in ("min", "max"):
        kind = "float" if any(a.weak == "float" for a in args) else "int"
        best = (min if name == "min" else max)(values)
        return TExpr(weak_const(float(best) if kind == "float" else best, span).expr, kind)
    fn = _FLOAT_FUNCTIONS.get(name)
    return None if fn is None else weak_const(fn(float(values[0])), span)
