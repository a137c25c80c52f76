"""`split(i, f)`: one loop becomes two, `i.outer` over blocks of `f` and `i.inner`
within a block; with `tail=peel` (the default) the last partial block runs in a
separate loop `i.tail`; with `tail=mask` the last block's inner loop stops early
(`range(0, min(f, n - i.outer * f))`), so the nest stays one piece. The loops
copied into `i.tail` are named `i.tail.j` for a loop `j` in the body (never
`j.tail`, the name split and vectorize give `j`'s own remainder).

    for i in range(a, b):          for i.outer in range(0, max(b - a, 0) // f):
        body(i)            -->         for i.inner in range(0, f):
                                           body(a + i.outer * f + i.inner)
                                   for i.tail in range(a + max(b - a, 0) // f * f, b):
                                       body(i.tail)    # its loops: i.tail.j, ...

Always legal: the iterations run in the same order.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import assigned_syms, walk_expr
from ..types import I64
from .nest import ScheduleError, add, copy_loops, find_loop, floordiv, i64, maximum, mul, replace_loop, sub, substitute

name = "split"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    new = split_loop(loop, d.ints[0], d.option("tail", "peel"), d.span)
    return replace(kernel, body=replace_loop(kernel.body, loop, new))


def split_loop(loop: ir.For, factor: int, tail: str, span) -> list[ir.Stmt]:
    _check_splittable(loop, span)
    outer = ir.Sym(f"{loop.name}.outer", loop.var.type, "loop")
    inner = ir.Sym(f"{loop.name}.inner", loop.var.type, "loop")
    trips = maximum(sub(loop.stop, loop.start), i64(0))
    index = add(loop.start, add(mul(ir.Var(outer), i64(factor)), ir.Var(inner)))
    body = substitute(loop.body, {loop.var: index})
    inner_stop: ir.Expr = i64(factor)
    if tail == "mask":
        # The last block is partial: its inner loop stops early (no second copy).
        blocks = floordiv(add(trips, i64(factor - 1)), i64(factor))
        inner_stop = ir.Binary("min", i64(factor), sub(trips, mul(ir.Var(outer), i64(factor))), I64)
    else:
        blocks = floordiv(trips, i64(factor))
    inner_loop = ir.For(inner, i64(0), inner_stop, 1, body, f"{loop.name}.inner", loop.kind, loop.span)
    main = ir.For(outer, i64(0), blocks, 1, (inner_loop,), f"{loop.name}.outer", loop.kind, loop.span)
    if tail == "mask":
        return [main]
    rest = ir.Sym(f"{loop.name}.tail", loop.var.type, "loop")
    tail_body = copy_loops(substitute(loop.body, {loop.var: ir.Var(rest)}), prefix=f"{loop.name}.tail.")
    start = add(loop.start, mul(blocks, i64(factor)))
    return [main, ir.For(rest, start, loop.stop, 1, tail_body, f"{loop.name}.tail", loop.kind, loop.span)]


def _check_splittable(loop: ir.For, span) -> None:
    if loop.step != 1:
        raise ScheduleError(span, f"split needs a loop with step 1; '{loop.name}' has step {loop.step}")
    changed = assigned_syms(loop.body)
    for bound in (loop.start, loop.stop):
        for node in walk_expr(bound):
            if isinstance(node, ir.Load) or (isinstance(node, ir.Var) and node.sym in changed):
                raise ScheduleError(span, f"cannot split '{loop.name}': its bounds read values the loop changes")
