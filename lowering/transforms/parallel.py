"""`parallel(i)`: the iterations of loop `i` run on several threads.

Legal when locals carry nothing between iterations and every tensor written in
the loop has an axis indexed by `i` alone (the same expression in every access),
so different iterations touch different elements — a reduction over `i` would
need a rule this pass does not have yet. Scratch buffers used only inside the
loop are first made private to each thread (their `Alloc` moves into the body).

`parallel(i, min_work=n)` starts a team only when the call brings at least n
element accesses (the automatic schedule's estimate, auto_parallel.py); less
work runs on the calling thread, which saves a team's wake-up (2-50 us here).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import map_stmts, stmt_exprs, walk_expr, walk_stmts
from .auto_parallel import enough_work
from .dependence import require_private_locals, separated_by
from .nest import find_loop, replace_loop

name = "parallel"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    what = f"parallelize '{loop.name}'"
    kernel, loop = privatize_scratch(kernel, loop)
    require_private_locals(loop.body, what, d.span)
    separated_by(loop.body, loop.var, what, d.span)
    min_work = d.option("min_work")
    when = None if min_work is None else enough_work(loop, min_work)
    return replace(kernel, body=replace_loop(kernel.body, loop, [replace(loop, kind="parallel", when=when)]))


def privatize_scratch(kernel: ir.Kernel, loop: ir.For) -> tuple[ir.Kernel, ir.For]:
    """Scratch buffers used only inside `loop` (e.g. by `pack`) are allocated
    at the start of its body instead: one per thread, never shared."""
    inside = {id(s) for s in walk_stmts([loop])}
    used_inside = {n.tensor for s in walk_stmts(loop.body) for e in stmt_exprs(s) for n in walk_expr(e)
                   if isinstance(n, ir.Load) and n.tensor.scratch}
    used_inside |= {s.tensor for s in walk_stmts(loop.body) if isinstance(s, ir.Store) and s.tensor.scratch}
    outside = [s for s in walk_stmts(kernel.body) if id(s) not in inside]
    used_outside = {n.tensor for s in outside for e in stmt_exprs(s) for n in walk_expr(e) if isinstance(n, ir.Load)}
    used_outside |= {s.tensor for s in outside if isinstance(s, ir.Store)}
    moved = [s for s in outside if isinstance(s, ir.Alloc) and s.buffer in used_inside - used_outside]
    if not moved:
        return kernel, loop
    new_loop = replace(loop, body=(*moved, *loop.body))
    buffers = {m.buffer for m in moved}
    body = map_stmts(kernel.body, stmt_fn=lambda s: [] if isinstance(s, ir.Alloc) and s.buffer in buffers else None)
    return replace(kernel, body=replace_loop(body, _same_loop(body, loop), [new_loop])), new_loop


def _same_loop(body, loop: ir.For) -> ir.For:
    """`loop` as it is in `body` after a rebuild (found by its variable)."""
    return next(s for s in walk_stmts(body) if isinstance(s, ir.For) and s.var is loop.var)
