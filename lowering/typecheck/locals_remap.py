"""Finish local type inference: a local first given a literal (`acc = 0.0`) takes
the type of the first real value assigned to it (`acc += x[i]` with f64 `x`).
Uses made before that point refer to the provisional symbol; this rewrites them."""

from __future__ import annotations

from .. import ir
from ..rewrite import map_stmts


def apply_remap(body: tuple[ir.Stmt, ...], remap: dict[ir.Sym, ir.Sym]) -> tuple[ir.Stmt, ...]:
    if not remap:
        return body

    def final(sym: ir.Sym) -> ir.Sym:
        while sym in remap:
            sym = remap[sym]
        return sym

    def expr_fn(e: ir.Expr) -> ir.Expr:
        match e:
            case ir.Var(sym, span) if sym in remap:
                return ir.Var(final(sym), span)
            case ir.Cast(value, t) if value.type == t:
                return value
        return e

    def stmt_fn(s: ir.Stmt):
        match s:
            case ir.Assign(sym, value, span) if sym in remap:
                new = final(sym)
                return ir.Assign(new, convert(value, new.type), span)
        return None

    return map_stmts(body, expr_fn, stmt_fn)


def convert(value: ir.Expr, t) -> ir.Expr:
    if value.type == t:
        return value
    if isinstance(value, ir.Const) and not t.is_bool:
        return ir.Const(float(value.value) if t.is_float else int(value.value), t, value.span)
    return ir.Cast(value, t, value.span)
