"""Finding, replacing and renaming loops in loop IR, for the schedule transforms."""

from __future__ import annotations

import re
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
    """The one loop `name` names; several copies of it made by unroll are an
    error here that lists them (a directive on one loop runs on each copy
    instead: apply.py)."""
    found = find_loops(body, name, span)
    if len(found) > 1:
        names = ", ".join(s.name for s in found)
        raise ScheduleError(span, f"'{name}' names {len(found)} copies made by unroll: {names}",
                            f"here a name stands for one loop: name one copy, e.g. '{found[0].name}'")
    return found[0]


def find_loops(body, name: str, span: Span | None) -> list[ir.For]:
    """The loop named `name`, or, when there is none, every copy unroll made
    of it: a name without copy numbers (`j`, `j.tail`) names the copies whose
    names are it with copy numbers put in (`j.u0`, `j.u1`; `j.u0.tail`)."""
    loops = [s for s in walk_stmts(body) if isinstance(s, ir.For)]
    exact = [s for s in loops if s.name == name]
    copies = [s for s in loops if s.name != name and without_copy_numbers(s.name) == name]
    if len(exact) == 1 and not copies:
        return exact
    if not exact and copies and len({s.span for s in copies}) == 1:  # all from one source loop
        return copies
    if not exact and not copies:
        names = loop_names(body)
        known = f"loops here: {', '.join(dict.fromkeys(names))}" if names else "this kernel has no loops"
        raise ScheduleError(span, f"no loop named '{name}'", *did_you_mean(name, names), known)
    found = exact + copies
    lines = ", ".join(str(s.span.line) for s in found if s.span is not None)
    raise ScheduleError(span, f"loop name '{name}' is ambiguous ({len(found)} loops have it"
                        + (f", at lines {lines})" if lines else ")"), "rename one of the loop variables")


def without_copy_numbers(name: str) -> str:
    """`j.u1.tail` -> `j.tail`: a loop's name without the parts unroll added
    (the first part is the source's variable, whatever it is called)."""
    first, *rest = name.split(".")
    return ".".join([first, *(p for p in rest if not _COPY_NUMBER.fullmatch(p))])


_COPY_NUMBER = re.compile(r"u\d+")


def replace_loop(body, target: ir.For, new: list[ir.Stmt]) -> tuple[ir.Stmt, ...]:
    """`body` with the loop `target` (found by identity) replaced by `new`.
    Statements that do not contain it are kept as they are, the same objects,
    so that a caller may look for another loop of `body` in the result (fuse
    removes one loop, then replaces the other)."""
    out: list[ir.Stmt] = []
    for s in body:
        if s is target:
            out.extend(new)
            continue
        match s:
            case ir.For(body=inner):
                changed = replace_loop(inner, target, new)
                if not _same(changed, inner):
                    s = replace(s, body=changed)
            case ir.If(then=then, orelse=orelse):
                then2, orelse2 = replace_loop(then, target, new), replace_loop(orelse, target, new)
                if not (_same(then2, then) and _same(orelse2, orelse)):
                    s = replace(s, then=then2, orelse=orelse2)
        out.append(s)
    return tuple(out)


def _same(a, b) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def substitute(body, mapping: dict[ir.Sym, ir.Expr]) -> tuple[ir.Stmt, ...]:
    """Replace uses of loop variables by expressions."""
    def fn(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in mapping:
            return mapping[e.sym]
        return fold(e)

    return map_stmts(body, fn)


def substitute_expr(e: ir.Expr, mapping: dict[ir.Sym, ir.Expr]) -> ir.Expr:
    return map_expr(e, lambda n: mapping[n.sym] if isinstance(n, ir.Var) and n.sym in mapping else n)


def copy_loops(body, prefix: str = "", suffix: str = "") -> tuple[ir.Stmt, ...]:
    """A copy of `body` whose loops have fresh variables and names between
    `prefix` and `suffix`. A copy inside a new loop `X` (a split's tail) takes
    the prefix `X.` (`i.tail.j`); unroll's copies take the suffix `.u<k>`. The
    names the compiler makes then never meet: split and vectorize add `.outer`,
    `.inner`, `.tail` at the end, and `X` is a new name."""
    mapping: dict[ir.Sym, ir.Sym] = {}
    for s in walk_stmts(body):
        if isinstance(s, ir.For):
            mapping[s.var] = ir.Sym(s.var.name, s.var.type, "loop")

    def stmt_fn(s: ir.Stmt):
        if isinstance(s, ir.For) and s.var in mapping:
            return replace(s, var=mapping[s.var], name=prefix + s.name + suffix)
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
