"""The batch loop around a contraction (`for p: C[p] = A[p] @ B[p]`): which
loop it is, when its products run one per thread, and when one operand is
the same for every product, packing that operand once per thread.

A batch whose A (or B) does not move with it (`C[p] = A @ B[p]`, a weight
shared by a batch of inputs) would pack the same block again for every
product. Instead the batch is shared out as one run of products per thread:

    for q in range(0, parts) parallel:        parts: threads, or 1
        lo, hi = q's share of the batch
        allocate Ap, Bp
        for p in range(lo, hi):
            the packed nest; the unchanged operand packed when p == lo only

Reuse needs the packed block to be the whole operand: one K panel (and for
B, one N panel); otherwise every product packs as before. 1 thread of Zen 4,
(1,128,256) @ (64,256,128): A's 128 x 256 block packed 64 times cost 4% of
the time (101-102 -> 105-106 GFLOP/s packing it once).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import ir
from ..arith import add, both, compare, floordiv, i64, minimum, mul, share_start, sub
from ..rewrite import walk_stmts
from ..types import I64
from .contract_direct import any_of
from .contract_match import Contraction, uses


def batch_loop(body, c: Contraction) -> ir.For | None:
    """The outermost of the plain loops around `c.nest` (each with only the next
    as its body: a batch of matmuls) that indexes C, so that its iterations
    write different elements of C; None when there is none."""
    chain: list[ir.For] = []
    inner: ir.Stmt = c.nest
    while True:
        parent = next((s for s in walk_stmts(body) if isinstance(s, ir.For) and len(s.body) == 1
                       and s.body[0] is inner and s.kind == "serial"), None)
        if parent is None:
            break
        chain.append(parent)
        inner = parent
    writes = uses(c.store.indices)
    return next((loop for loop in reversed(chain) if loop.var in writes), None)


def enough_products(batch: ir.For, trips: ir.Expr, m: ir.Expr, mr: int) -> ir.Expr:
    """Whether the batch runs whole matmuls per thread (measured: a batch of 8
    64^3 products on two threads, 119 GFLOP/s against 84 with the M blocks
    of each product split), else the M blocks of each in parallel. A batch
    that the threads do not divide, shorter than four per thread, splits
    products that have four strips per thread: three images of a ResNet
    layer on two threads, 214 GFLOP/s against 167 image by image."""
    threads = ir.Threads(batch.span)
    enough = compare(">=", trips, threads)
    if batch.var not in uses(m):
        even = compare("==", mul(floordiv(trips, threads), threads), trips)
        long = compare(">=", trips, mul(threads, i64(4)))
        short_products = compare("<", m, mul(threads, i64(4 * mr)))
        enough = both(enough, any_of([even, long, short_products]))
    return enough


def batch_parallel(batch: ir.For, blocked: list[ir.Stmt], m: ir.Expr, mr: int) -> ir.Stmt:
    """The batch loop around `blocked`, parallel when it has enough products.
    Otherwise the batch runs on the calling thread, and the parallel loops
    inside it take the team (a nested parallel loop forks only outside one).
    (The loop itself checks for more than one thread and iteration.)"""
    if batch.step != 1:
        return replace(batch, body=tuple(blocked))
    enough = enough_products(batch, sub(batch.stop, batch.start), m, mr)
    return replace(batch, body=tuple(blocked), kind="parallel", when=enough)


@dataclass(frozen=True)
class Reuse:
    """A batch that leaves A or B unchanged, shared out in runs of products.
    `loop`: the run's own batch loop, `for p in range(lo, hi)`; `a`, `b`:
    which operand stays; `lo`, `hi`, `part`: the run's bounds and its index."""

    loop: ir.For
    a: bool
    b: bool
    lo: ir.Sym
    hi: ir.Sym
    part: ir.Sym

    def first(self) -> ir.Expr:
        """True on the run's first product (the one that packs)."""
        return compare("==", ir.Var(self.loop.var), ir.Var(self.lo))


def reuse_for(batch: ir.For | None, c: Contraction) -> Reuse | None:
    """A Reuse when `batch` directly holds the nest, steps by 1, leaves A or B
    unchanged and the product's sizes fixed; None otherwise (also with
    batch-reduce loops, whose panels the packed blocks follow)."""
    if batch is None or batch.step != 1 or len(batch.body) != 1 or batch.body[0] is not c.nest or c.br:
        return None
    if batch.var in uses((c.m.start, c.m.stop, c.n.start, c.n.stop, c.k.start, c.k.stop)):
        return None
    a, b = batch.var not in uses(c.a.indices), batch.var not in uses(c.b.indices)
    if not (a or b):
        return None
    lo, hi, part = ir.Sym("lo", I64, "local"), ir.Sym("hi", I64, "local"), ir.Sym("part", I64, "loop")
    loop = replace(batch, start=ir.Var(lo), stop=ir.Var(hi), body=(c.nest,), kind="serial", when=None)
    return Reuse(loop, a, b, lo, hi, part)


def runs_of_products(batch: ir.For, reuse: Reuse, blocked: list[ir.Stmt], m: ir.Expr, mr: int) -> ir.Stmt:
    """The batch as one run of products per thread (`blocked` holds the run's
    own batch loop), or one run when the products are too few to share out
    (their M blocks then take the team)."""
    span = batch.span
    trips = sub(batch.stop, batch.start)
    enough = enough_products(batch, trips, m, mr)
    parts = ir.Sym("parts", I64, "local")

    def bound(q: ir.Expr) -> ir.Expr:  # the first product of run q: runs differ by at most one
        return add(batch.start, share_start(q, trips, ir.Var(parts)))

    share = [ir.Assign(reuse.lo, bound(ir.Var(reuse.part)), span),
             ir.Assign(reuse.hi, bound(add(ir.Var(reuse.part), i64(1))), span)]
    runs = ir.For(reuse.part, i64(0), ir.Var(parts), 1, (*share, *blocked), f"{batch.name}.runs", "parallel", span,
                  when=enough)
    count = ir.Select(enough, minimum(ir.Threads(span), trips), i64(1), I64, span)
    return ir.If(compare(">", trips, i64(0)), (ir.Assign(parts, count, span), runs), (), span)
