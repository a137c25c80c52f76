"""`UnitStrides()` made a constant in one copy of a kernel body.

The backend emits a kernel's body once for unit innermost strides and once
for any (backends/llvm/versions.py). Before each, `fold_unit_strides` puts
the copy's value in place of every `UnitStrides()` and keeps only the branch
that runs, so the other is never built, optimized or compiled (a
contraction's general copy held every read-in-place tile: two thirds of its
compile time). Constants are folded by `arith.fold`. Statements without the
node stay the same objects.

    >>> body = fold_unit_strides(kernel.body, False)  # doctest: +SKIP
"""

from __future__ import annotations

from dataclasses import replace

from . import ir
from .arith import fold
from .rewrite import map_expr, walk_expr
from .types import BOOL


def fold_unit_strides(body: tuple[ir.Stmt, ...], value: bool) -> tuple[ir.Stmt, ...]:
    """`body` with `UnitStrides()` as `value`: an `If` on a condition that
    becomes constant keeps one branch, a `Realign` that becomes `False` goes."""
    out: list[ir.Stmt] = []
    changed = False
    for s in body:
        new = _stmt(s, value)
        changed = changed or new is not s
        if new is not None:
            out.append(new)
    return tuple(out) if changed else body


def _stmt(s: ir.Stmt, value: bool) -> ir.Stmt | None:
    match s:
        case ir.If(cond, then, orelse):
            cond = _cond(cond, value)
            if cond is not s.cond and isinstance(cond, ir.Const):  # the dead branch goes
                kept = fold_unit_strides(then if cond.value else orelse, value)
                return replace(s, cond=ir.Const(True, BOOL, cond.span), then=kept, orelse=())
            then_, orelse_ = fold_unit_strides(then, value), fold_unit_strides(orelse, value)
            if cond is s.cond and then_ is then and orelse_ is orelse:
                return s
            return replace(s, cond=cond, then=then_, orelse=orelse_)
        case ir.For(body=inner, when=when):
            inner_ = fold_unit_strides(inner, value)
            when_ = None if when is None else _cond(when, value)
            return s if inner_ is inner and when_ is when else replace(s, body=inner_, when=when_)
        case ir.Realign(when=when):
            when_ = _cond(when, value)
            if isinstance(when_, ir.Const) and not when_.value:
                return None
            return s if when_ is when else replace(s, when=when_)
    return s


def _cond(e: ir.Expr, value: bool) -> ir.Expr:
    """`e` with the constant in place of `UnitStrides()` and `and`, `or` and
    `not` of constants folded; `e` itself when it has no `UnitStrides()`."""
    if not any(isinstance(x, ir.UnitStrides) for x in walk_expr(e)):
        return e
    return map_expr(e, lambda x: ir.Const(value, BOOL, x.span) if isinstance(x, ir.UnitStrides) else fold(x))
