"""B read in place from an aligned copy, when B's rows start inside a cache line.

The unpacked path (`contract_direct`) loads B's rows as whole vectors where
they lie. numpy's arrays start 16 bytes past a line as often as not, and then
each of those loads reads two lines: the seeds' batch-reduce configuration
(B's rows of 32 f32, an Intel Xeon, 1 thread) ran at 154 GFLOP/s in place,
170 from rows on lines and 166 with this copy (2 threads: 300, 328, 328);
(1120, 256) @ (256, 32) at 178 against 191. A
`Realign` before the nest copies B once per call to a buffer that starts on
a line (backends/llvm/realign.py says when the copy is made at run time),
when the product takes the unpacked path and each element of B is read by
at least REALIGN_ROWS rows of A per thread, counting the loops around the
nest that do not move over B: the copy, one read and one write of each
element on the calling thread, then costs a few percent of what a
misaligned read costs. (128^3, read by 128 rows: copying 64 KiB took what
the aligned rows saved; 256^3 on 2 threads ran at 248 GFLOP/s with the copy
and 278 without, on 1 thread at 166 with it and 150 without.)
"""

from __future__ import annotations

from .. import ir
from ..arith import add, compare, floordiv, i64, mul, sub
from ..rewrite import walk_stmts
from .contract_batch import batch_loop
from .contract_direct import all_of, reads_in_place
from .contract_match import Contraction, uses

REALIGN_ROWS = 256


def with_realigns(kernel: ir.Kernel, found: list[Contraction], direct: list[bool]) -> tuple[ir.Stmt, ...]:
    """`kernel.body` with a `Realign` of B before the top-level statement
    holding each contraction that may take the unpacked path (`direct`) and
    whose B is an input. The nests themselves stay the same objects."""
    before: dict[int, list[ir.Stmt]] = {}
    for c, may_read_in_place in zip(found, direct, strict=True):
        if not may_read_in_place or not _plain_input(kernel, c.b.tensor):
            continue
        top = next((i for i, s in enumerate(kernel.body) if any(x is c.nest for x in walk_stmts((s,)))), None)
        when = _worth_it(kernel, c, batch_loop(kernel.body, c))
        if top is not None and when is not None:
            before.setdefault(top, []).append(ir.Realign(c.b.tensor, when, len(kernel.checks), c.b.span))
    return tuple(x for i, s in enumerate(kernel.body) for x in (*before.get(i, ()), s))


def _plain_input(kernel: ir.Kernel, tensor: ir.TensorParam) -> bool:
    return (tensor in kernel.tensors and not tensor.is_output and not tensor.scratch
            and tensor.quant is None and tensor.view is None)


def _worth_it(kernel: ir.Kernel, c: Contraction, batch: ir.For | None) -> ir.Expr | None:
    """The product takes the unpacked path, and each element of B is read by
    REALIGN_ROWS rows or more; None when that is not known at the kernel's
    entry (a size that a loop computes)."""
    rows = c.m.stop
    for loop in _loops_around(kernel.body, c.nest) or []:
        if loop.var not in uses(c.b.indices):
            step = abs(loop.step)
            reach = sub(loop.stop, loop.start) if loop.step > 0 else sub(loop.start, loop.stop)
            rows = mul(rows, floordiv(add(reach, i64(step - 1)), i64(step)))  # the loop's trip count
    k_total = c.k.stop
    for r in c.br:
        k_total = mul(k_total, r.stop)
    # The copy runs on the calling thread while the others wait: its share
    # of the time grows with the thread count.
    enough = compare(">=", rows, mul(i64(REALIGN_ROWS), ir.Threads(c.nest.span)))
    when = all_of([reads_in_place(c, c.m.stop, c.n.stop, k_total, batch), enough])
    known = set(kernel.dims) | {p.sym for p in kernel.params if isinstance(p, ir.ScalarParam)}
    return when if uses(when) <= known else None


def _loops_around(body, nest: ir.For) -> list[ir.For] | None:
    """The loops whose bodies hold `nest`, outermost first."""
    for s in body:
        if s is nest:
            return []
        match s:
            case ir.For(body=inner):
                found = _loops_around(inner, nest)
                if found is not None:
                    return [s, *found]
            case ir.If(then=then, orelse=orelse):
                found = _loops_around(then, nest)
                if found is None:
                    found = _loops_around(orelse, nest)
                if found is not None:
                    return found
    return None
