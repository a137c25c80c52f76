"""Finding, replacing and renaming loops in loop IR, for the schedule transforms."""

from __future__ import annotations

from dataclasses import replace

from dsl.grammar.diagnostics import Diagnostic, Span, did_you_mean

from .. import ir
from ..ir import fresh
from ..arith import add, floordiv, fold, i64, maximum, mul, sub  # noqa: F401 (re-exported)
from ..rewrite import map_expr, map_stmts, walk_stmts


class ScheduleError(Exception):
    """A directive that cannot be applied; reported at the directive's span."""

    def __init__(self, span: Span | None, message: str, *notes: str):
        super().__init__(message)
        self.span, self.message, self.notes = span, message, notes


def loop_names(body) -> list[str]:
    return [s.name for s in walk_stmts(body) if isinstance(s, ir.For)]


def find_loop(body, name: str, span: Span | None) -> ir.For:
    found = [s for s in walk_stmts(body) if isinstance(s, ir.For) and s.name == name]
    if not found:
        names = loop_names(body)
        known = f"loops here: {', '.join(dict.fromkeys(names))}" if names else "this kernel has no loops"
        raise ScheduleError(span, f"no loop named '{name}'", *did_you_mean(name, names), known)
    if len(found) > 1:
        lines = ", ".join(str(s.span.line) for s in found if s.span is not None)
        raise ScheduleError(span, f"loop name '{name}' is ambiguous ({len(found)} loops have it"
                            + (f", at lines {lines})" if lines else ")"), "rename one of the loop variables")
    return found[0]


def replace_loop(body, target: ir.For, new: list[ir.Stmt]) -> tuple[ir.Stmt, ...]:
    """`body` with the loop `target` (found by identity) replaced by `new`."""
    out: list[ir.Stmt] = []
    for s in body:
        if s is target:
            out.extend(new)
            continue
        match s:
            case ir.For(body=inner):
                s = replace(s, body=replace_loop(inner, target, new))
            case ir.If(then=then, orelse=orelse):
                s = replace(s, then=replace_loop(then, target, new), orelse=replace_loop(orelse, target, new))
        out.append(s)
    return tuple(out)


def substitute(body, mapping: dict[ir.Sym, ir.Expr]) -> tuple[ir.Stmt, ...]:
    """Replace uses of loop variables by expressions."""
    def fn(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in mapping:
            return mapping[e.sym]
        return fold(e)

    return map_stmts(body, fn)


def substitute_expr(e: ir.Expr, mapping: dict[ir.Sym, ir.Expr]) -> ir.Expr:
    return map_expr(e, lambda n: mapping[n.sym] if isinstance(n, ir.Var) and n.sym in mapping else n)


def copy_loops(body, suffix: str) -> tuple[ir.Stmt, ...]:
    """A copy of `body` whose loops have fresh variables and names ending in `suffix`."""
    mapping: dict[ir.Sym, ir.Sym] = {}
    for s in walk_stmts(body):
        if isinstance(s, ir.For):
            mapping[s.var] = ir.Sym(s.var.name, s.var.type, "loop")

    def stmt_fn(s: ir.Stmt):
        if isinstance(s, ir.For) and s.var in mapping:
            return replace(s, var=mapping[s.var], name=s.name + suffix)
        return None

    renamed = substitute(body, {old: ir.Var(new) for old, new in mapping.items()})
    return map_stmts(renamed, None, stmt_fn)


def fresh_locals(body) -> tuple[ir.Stmt, ...]:
    """A copy of `body` in which every loop variable and local it assigns is a
    new symbol: the copy shares no variable with the original, so code
    generation does not see one's values live in the other (a parallel
    loop's live-outs would otherwise include them)."""
    mapping: dict[ir.Sym, ir.Sym] = {}
    for s in walk_stmts(body):
        if isinstance(s, ir.For):
            mapping[s.var] = fresh(s.var)
        elif isinstance(s, ir.Assign) and s.sym.role == "local":
            mapping.setdefault(s.sym, fresh(s.sym))

    def stmt_fn(s: ir.Stmt):
        if isinstance(s, ir.For) and s.var in mapping:
            return replace(s, var=mapping[s.var])
        if isinstance(s, ir.Assign) and s.sym in mapping:
            return replace(s, sym=mapping[s.sym])
        return None

    renamed = substitute(body, {old: ir.Var(new) for old, new in mapping.items()})
    return map_stmts(renamed, None, stmt_fn)


def remark(remarks: list | None, span: Span | None, text: str) -> None:
    """Record what a pass did, or why not, for `dslc --remarks` (when asked)."""
    if remarks is not None:
        remarks.append(Diagnostic(span, text, severity="remark"))
