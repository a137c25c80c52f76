"""Column parts: a short or wide product's packed nest shared out by C's columns.

The packed nest shares each K panel's M blocks among the threads, all of
them reading one packed panel of B. When A has few rows, each thread's share
of the panel's work is small next to the panel itself: every thread streams
the whole panel (half of it packed into the other core's cache), and the
team meets twice a panel. Short or wide products split C's columns instead:

    for part in range(0, parts) parallel:       parts: threads, or 1
        lo, hi = part's share of N (whole strips of nr columns)
        allocate Ap, Bp
        the packed nest over columns lo..hi, on this thread alone

Each thread packs all of A for its own columns: more packing of A, none of
B shared and no meeting. The M blocks stay for products with many rows and
few columns, where A's packing would double and B's panel serves many
blocks. An Intel Xeon (2 MiB of L2 a core), 2 threads, GFLOP/s, M blocks ->
column parts: 512 x 3584 x 3584 274-282 -> 290-298 (numpy 293-303), 128 x
4096 x 4096 200-208 -> 248-258, 64 x 1024 x 1024 165-170 -> 226-246, 32 x
4096 x 4096 95 -> 183, 1024 x 2048 x 8192 290 -> 312; with parts for every
shape, 1024^3 317 -> 312 and 4096 x 256 x 4096 333 -> 322.
"""

from __future__ import annotations

from .. import ir
from ..arith import add, compare, floordiv, i64, minimum, mul, share_start
from ..types import BOOL, I64
from .contract_direct import SMALL_WORK, all_of, any_of, at_most

# The columns are shared out when each part has at least PART_COLUMNS and A
# has at most SHORT_ROWS rows or C is WIDE_RATIO times wider than tall.
PART_COLUMNS = 512
SHORT_ROWS = 512
WIDE_RATIO = 2


def parts_of(M: ir.Expr, N: ir.Expr, K: ir.Expr, shared: ir.Expr | None, span) -> ir.Expr:
    """How many column parts: the thread count for a short or wide product
    of more than SMALL_WORK multiply-adds (the parts meet once a call, where
    the M blocks meet twice a panel), else 1; also 1 when
    `shared` holds (a batch's products run one per thread)."""
    threads = ir.Threads(span)
    conds = [compare(">", threads, i64(1)), at_most(M, N, K, SMALL_WORK - 1, more=True),
             compare(">=", N, mul(threads, i64(PART_COLUMNS))),
             any_of([compare("<=", M, i64(SHORT_ROWS)), compare(">=", N, mul(M, i64(WIDE_RATIO)))])]
    if shared is not None:
        conds.append(ir.Unary("not", shared, BOOL))
    return ir.Select(all_of(conds), threads, i64(1), I64, span)


def column_parts(parts: ir.Sym, N: ir.Expr, nr: int, bounds: tuple[ir.Sym, ir.Sym], body: list[ir.Stmt],
                 span) -> ir.Stmt:
    """The loop over `parts` column parts running `body` (the packed nest
    over columns lo..hi: `bounds`), in parallel when there is more than one.
    The parts share C's strips of nr columns evenly."""
    lo, hi = bounds
    part = ir.Sym("part", I64, "loop")
    strips = floordiv(add(N, i64(nr - 1)), i64(nr))

    def first_column(q: ir.Expr) -> ir.Expr:
        return minimum(N, mul(share_start(q, strips, ir.Var(parts)), i64(nr)))

    share = [ir.Assign(lo, first_column(ir.Var(part)), span),
             ir.Assign(hi, first_column(add(ir.Var(part), i64(1))), span)]
    return ir.For(part, i64(0), ir.Var(parts), 1, (*share, *body), "n.parts", "parallel", span,
                  when=compare(">", ir.Var(parts), i64(1)))
