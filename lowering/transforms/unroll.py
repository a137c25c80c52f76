"""`unroll(k)`: replace a loop with a constant trip count by copies of its body;
`unroll(k, f)`: split by `f` (peeled tail) and unroll the inner loop, leaving
`k.outer` with `f` copies of the body and the loop `k.tail`; a reduction in
the copies gets one accumulator per copy where that is exact or allowed
(`accumulators.py`). A loop `j` in the body becomes one loop per copy,
`j.u0`, `j.u1`, ...; a directive naming `j` afterwards runs on each of them
(`find_loops`, apply.py).

    for k in range(0, 3):          body(0)
        body(k)            -->     body(1)
                                   body(2)

Always legal: the iterations run in the same order.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from .accumulators import split_accumulators
from .nest import ScheduleError, copy_loops, find_loop, i64, replace_loop, substitute
from .split import split_loop

name = "unroll"
MAX_COPIES = 512


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    if d.ints:
        main, tail = split_loop(loop, d.ints[0], "peel", d.span)
        inner = main.body[0]
        main = replace(main, body=tuple(unroll_loop(inner, d.span)))
        new = [*split_accumulators(main, kernel.options.reassociate), tail]
    else:
        new = unroll_loop(loop, d.span)
    return replace(kernel, body=replace_loop(kernel.body, loop, new))


def unroll_loop(loop: ir.For, span) -> list[ir.Stmt]:
    if not (isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const)):
        raise ScheduleError(span, f"loop '{loop.name}' has no constant trip count; unroll it by a factor, "
                            f"e.g. unroll({loop.name}, 4)")
    values = list(range(loop.start.value, loop.stop.value, loop.step))
    if len(values) > MAX_COPIES:
        raise ScheduleError(span, f"unrolling '{loop.name}' would make {len(values)} copies (at most "
                            f"{MAX_COPIES}); unroll it by a factor")
    out: list[ir.Stmt] = []
    for k, value in enumerate(values):
        body = substitute(loop.body, {loop.var: i64(value)})
        # Every copy numbered, the first too: in a nest unrolled twice,
        # `j.u0.u1` and `j.u1.u0` stay apart.
        out.extend(copy_loops(body, suffix=f".u{k}"))
    return out
