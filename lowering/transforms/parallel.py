"""`parallel(i)`: the iterations of loop `i` run on several threads.

Legal when locals carry nothing between iterations and every tensor written in
the loop has an axis indexed by `i` alone (the same expression in every access),
so different iterations touch different elements — a reduction over `i` would
need a rule this pass does not have yet.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from .dependence import require_private_locals, separated_by
from .nest import find_loop, replace_loop

name = "parallel"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    what = f"parallelize '{loop.name}'"
    require_private_locals(loop.body, what, d.span)
    separated_by(loop.body, loop.var, what, d.span)
    return replace(kernel, body=replace_loop(kernel.body, loop, [replace(loop, kind="parallel")]))
