"""`hoist(i)`: compute loop-invariant values once, before loop `i`.

A sub-expression of the loop's body that depends neither on the loop's
variable nor on anything assigned in the loop, and reads only tensors the loop
does not store to, is computed into a new local before the loop: loads of
invariant elements and address arithmetic of outer loops.

    for i in range(0, N):                  if 0 < N:
        y[i] = x[i] * (a[j] + b[j])   -->      i.inv0 = a[j] + b[j]
                                               for i in range(0, N):
                                                   y[i] = x[i] * i.inv0

Contract: the loop's results are unchanged. Hoisted values are computed only
when the loop runs at least once (the `if`), so a load that is in bounds only
inside the loop is never read outside it. Code that may not run in an
iteration (inside an inner loop, an `if` branch, a select's arms) gives up
only load-free arithmetic, which cannot fault (integer division by zero is 0).
Identical invariant expressions share one local. Always legal.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import assigned_syms, map_children, walk_expr, walk_stmts
from ..types import BOOL
from ..vector import lanes_of
from .dependence import expr_key
from .nest import find_loop, replace_loop

name = "hoist"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    return replace(kernel, body=replace_loop(kernel.body, loop, hoist_loop(loop)))


def hoist_loop(loop: ir.For) -> list[ir.Stmt]:
    varying = assigned_syms(loop.body) | {loop.var}
    stored = {s.tensor for s in walk_stmts(loop.body) if isinstance(s, ir.Store)}
    hoisted: dict = {}  # expr key -> (local, expr)

    def invariant(e: ir.Expr, speculative: bool) -> bool:
        for node in walk_expr(e):
            match node:
                case ir.Var(sym) if sym in varying:
                    return False
                case ir.Load(tensor) if speculative or tensor in stored:
                    return False
                case ir.Threads():
                    return False
        return True

    def rewrite(e: ir.Expr, speculative: bool) -> ir.Expr:
        if _worth_hoisting(e) and invariant(e, speculative):
            key = expr_key(e)
            if key not in hoisted:
                sym = ir.Sym(f"{loop.name}.inv{len(hoisted)}", e.type, "local", lanes=lanes_of(e))
                hoisted[key] = (sym, e)
            return ir.Var(hoisted[key][0], getattr(e, "span", None))
        if isinstance(e, ir.Select):  # only the condition always runs
            return replace(e, cond=rewrite(e.cond, speculative), a=rewrite(e.a, True), b=rewrite(e.b, True))
        return map_children(e, lambda child: rewrite(child, speculative))

    body = tuple(_rewrite_stmt(s, rewrite, False) for s in loop.body)
    if not hoisted:
        return [loop]
    assigns = [ir.Assign(sym, e, loop.span) for sym, e in hoisted.values()]
    new_loop = replace(loop, body=body)
    if isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const):
        if (loop.start.value < loop.stop.value) == (loop.step > 0):
            return [*assigns, new_loop]  # a constant trip count of at least one
    op = "<" if loop.step > 0 else ">"
    runs = ir.Binary(op, loop.start, loop.stop, BOOL, loop.span)
    return [ir.If(runs, (*assigns, new_loop), (), loop.span)]


def _worth_hoisting(e: ir.Expr) -> bool:
    """Something to compute: a load, or arithmetic on a variable or a size."""
    match e:
        case ir.Const() | ir.Var() | ir.Shape() | ir.Ramp() | ir.Broadcast() | ir.Overlaps():
            return False
        case ir.Load():
            return True
    return any(isinstance(n, (ir.Var, ir.Shape, ir.Load)) for n in walk_expr(e))


def _rewrite_stmt(s: ir.Stmt, fn, speculative: bool) -> ir.Stmt:
    """Rewrite `s`; what may not run in every iteration is `speculative`."""
    inner = lambda body: tuple(_rewrite_stmt(b, fn, True) for b in body)  # noqa: E731
    match s:
        case ir.For(start=start, stop=stop, body=body, when=when):
            return replace(s, start=fn(start, speculative), stop=fn(stop, speculative), body=inner(body),
                           when=None if when is None else fn(when, speculative))
        case ir.If(cond=cond, then=then, orelse=orelse):
            return replace(s, cond=fn(cond, speculative), then=inner(then), orelse=inner(orelse))
        case ir.Assign(value=value):
            return replace(s, value=fn(value, speculative))
        case ir.Store(indices=indices, value=value, mask=mask):
            return replace(s, indices=tuple(fn(i, speculative) for i in indices), value=fn(value, speculative),
                           mask=None if mask is None else fn(mask, speculative))
    return s
