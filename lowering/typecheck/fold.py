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
