"""`for` statements: `range(...)` loops and `grid(...)`/`pgrid(...)` nests."""

from __future__ import annotations

from dsl.grammar import ast

from .. import ir
from ..types import I64
from .coerce import TExpr
from .exprs import strip_qualifier

ITERABLES = ("range", "grid", "pgrid")


def check_for(ck, node: ast.For) -> list[ir.Stmt]:
    call = node.iter
    kind = strip_qualifier(call.func) if isinstance(call, ast.Call) else None
    if kind not in ITERABLES:
        ck.bag.error(call.span, "a 'for' loop must iterate over range(...), grid(...) or pgrid(...)")
        return []
    if call.keywords:
        ck.bag.error(call.keywords[0].span, f"{kind}() takes no keyword arguments")
        return []
    if kind == "range":
        header = _range_header(ck, node, call)
    else:
        header = _grid_header(ck, node, call, parallel=kind == "pgrid")
    pre = ck.ctx.take_prelude()
    if header is None:
        return pre
    loops = []
    frame = ck.frame.child()
    for target, (start, stop, step, loop_kind) in zip(node.targets, header):
        if not _check_target(ck, target):
            return pre
        sym = ir.Sym(target.id, I64, "loop")
        frame.values[target.id] = ir.Var(sym)
        frame.loop_vars.add(target.id)
        loops.append((sym, start, stop, step, loop_kind))
    outer, ck.frame = ck.frame, frame
    before = set(ck.assigned)
    try:
        body = tuple(ck.block(node.body))
    finally:
        ck.frame, ck.assigned = outer, before
    for sym, start, stop, step, loop_kind in reversed(loops):
        body = (ir.For(sym, start, stop, step, body, sym.name, loop_kind, node.span),)
    return pre + list(body)


def _check_target(ck, target: ast.Name) -> bool:
    ident = target.id
    if ck.locals.is_local(ident):
        ck.bag.error(target.span, f"loop variable '{ident}' has the name of a local variable")
        return False
    if ck.frame.lookup_value(ident) is not None and not ck._is_loop_var(ident):
        ck.bag.error(target.span, f"loop variable '{ident}' hides a parameter or dim of the same name")
        return False
    if ck.frame.lookup_tensor(ident) is not None:
        ck.bag.error(target.span, f"loop variable '{ident}' has the name of a tensor")
        return False
    return True


def _range_header(ck, node: ast.For, call: ast.Call):
    if len(node.targets) != 1:
        ck.bag.error(node.span, "range() gives one index; use grid(...) for several")
        return None
    args = call.args
    if not 1 <= len(args) <= 3:
        ck.bag.error(call.span, f"range() takes 1 to 3 arguments ({len(args)} given)")
        return None
    bounds = [_bound(ck, a, "a range bound") for a in args[:2]]
    step = 1
    if len(args) == 3:
        step = _constant_step(ck, args[2])
    if any(b is None for b in bounds) or step is None:
        return None
    if len(args) == 1:
        start, stop = ir.Const(0, I64, call.span), bounds[0]
    else:
        start, stop = bounds
    return [(start, stop, step, "serial")]


def _bound(ck, node: ast.Expr, what: str):
    """A loop bound; it may hold a reduction, e.g. range(sum(counts[k]))."""
    return ck.with_free_indices(node, lambda: ck.index(node, what))


def _constant_step(ck, node: ast.Expr) -> int | None:
    te: TExpr | None = ck.expr(node)
    if te is None:
        return None
    if te.weak != "int" or not isinstance(te.expr, ir.Const) or te.expr.value == 0:
        ck.bag.error(node.span, "the step of range() must be a nonzero integer constant")
        return None
    if abs(te.expr.value) >= 1 << 62:
        ck.bag.error(node.span, "range() step is too large")
        return None
    return int(te.expr.value)


def _grid_header(ck, node: ast.For, call: ast.Call, parallel: bool):
    name = "pgrid" if parallel else "grid"
    if len(call.args) != len(node.targets):
        given, wanted = len(call.args), len(node.targets)
        ck.bag.error(call.span, f"{name}() has {given} extent{'s' * (given != 1)} for {wanted} "
                     f"loop variable{'s' * (wanted != 1)}", "give one extent per loop variable")
        return None
    extents = [_bound(ck, a, f"an extent of {name}()") for a in call.args]
    if any(e is None for e in extents):
        return None
    zero = ir.Const(0, I64, call.span)
    kinds = ["parallel" if parallel and k == 0 else "serial" for k in range(len(extents))]
    return [(zero, e, 1, k) for e, k in zip(extents, kinds)]
