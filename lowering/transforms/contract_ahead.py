"""A batch of small products asks for the next product's lines while it computes.

Each product of a batch (`for b: C[b] = A[b] @ B[b]`) reads its operands from
memory, where the one before left nothing behind; the hardware's prefetchers
start on them only when the packing or the first strip asks, and that waits.
So each tile of a product asks for part of the next one, every AHEAD_EVERY
steps of its k loop (into L2): its own place in C (for writing); when B
changes with the batch, a share of B's panel (the M strips share its rows,
the tiles of a strip its columns); when A changes, a share of its strip's
rows (the strip's tiles, one per n strip, share them). Together the tiles of
a product ask for all of the next one once.

Measured on 1 thread of Zen 4 (GFLOP/s, interleaved with numpy): (1,128,256)
@ (64,256,128) 89 -> 93 with B's lines, 96 with C's, 99-100 with A's too
(numpy 85-86; with B and C the same for every product, 106). (64,128,256) @
(1,256,128) 91 -> 99; (16,256,256) @ (16,256,256) 92 -> 98.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..ir import fresh
from ..arith import add, both, compare, floordiv, i64, maximum, minimum, mul, sub
from ..machine import MicroTile
from ..types import I64
from .contract_match import Contraction, uses
from .nest import substitute, substitute_expr
from .pack import k_innermost, line_elements

AHEAD_EVERY = 4  # steps of k between two asks
# Products at most this large (A, B and C of one) ask: a larger one's lines
# would leave L2 before their turn (1 MiB of L2: (3, 3136, 576) @ (3, 576,
# 64) ran 2-8% slower asking, (4, 512, 512) 1.5-4%; (16, 256, 256), 768 KiB,
# 6% faster).
AHEAD_BYTES = 1 << 20


class Ahead:
    """What the tiles of the packed path ask for of the next product. `at`:
    the packed nest's expressions (`contract._blocked`); `loop`: the batch
    loop; `t`: the packed tile; `strips`, `strip`: M's strip count and this
    tile's strip (its first row in the block)."""

    def __init__(self, c: Contraction, t: MicroTile, at: dict, loop: ir.For, strips: ir.Expr, strip: ir.Expr):
        self.c, self.at, self.mr = c, at, t.mr
        self.line = line_elements(c)
        nxt = add(ir.Var(loop.var), i64(loop.step))
        self.next = {loop.var: nxt, **at["br"]}
        M, N, K = at["M"], at["N"], at["K"]
        elements = add(add(mul(M, K), mul(K, N)), mul(M, N))
        small = both(compare("<=", maximum(maximum(M, N), K), i64(AHEAD_BYTES)),
                     compare("<=", mul(elements, i64(c.dtype.bits // 8)), i64(AHEAD_BYTES)))
        # a next product (a batch of one has none), small enough
        self.more = both(compare("<" if loop.step > 0 else ">", nxt, loop.stop), small)
        self.b_rows = None
        if loop.var in uses(c.b.indices) and not k_innermost(c):
            share = floordiv(add(at["kc"], sub(strips, i64(1))), strips)
            s = floordiv(add(at["ic"], strip), i64(t.mr))
            self.b_rows = (add(at["pc"], mul(s, share)), minimum(share, sub(at["kc"], mul(s, share))))
        self.a_lines = None
        last = c.a.indices[-1] if c.a.indices else None
        if loop.var in uses(c.a.indices) and isinstance(last, ir.Var) and last.sym is c.k.var:
            k_lines = floordiv(add(at["kc"], i64(self.line - 1)), i64(self.line))
            total = mul(i64(t.mr), k_lines)
            n_strips = floordiv(add(at["nc"], i64(t.nr - 1)), i64(t.nr))
            share = floordiv(add(total, sub(n_strips, i64(1))), n_strips)
            first = mul(floordiv(at["js"], i64(t.nr)), share)
            self.a_lines = (first, minimum(share, sub(total, first)))

    def asks(self, t: MicroTile, slot: ir.Expr) -> list[ir.Stmt]:
        """The prefetches of ask number `slot` of a tile `t` (a variant's own
        size: an edge tile asks for its own part of C)."""
        c, at = self.c, self.at
        lines = max(1, t.nr // self.line)  # of each row of the tile
        row = floordiv(slot, i64(lines))
        column = add(at["n0"], mul(ir.Binary("%", slot, i64(lines), I64), i64(self.line)))
        out = [self._ask(c.store, {c.m.var: add(at["m0"], row), c.n.var: column},
                         compare("<", slot, i64(t.mr * lines)), write=True)]
        if self.b_rows is not None:
            first, rows = self.b_rows
            out.append(self._ask(c.b, {c.k.var: add(first, row), c.n.var: column},
                                 compare("<", slot, mul(rows, i64(lines)))))
        if self.a_lines is not None:
            first, count = self.a_lines
            index = add(first, slot)  # row index % mr of line index // mr: no division by a variable
            where = {c.m.var: add(at["m0"], ir.Binary("%", index, i64(self.mr), I64)),
                     c.k.var: add(at["pc"], mul(floordiv(index, i64(self.mr)), i64(self.line)))}
            out.append(self._ask(c.a, where, compare("<", slot, count)))
        return out

    def _ask(self, access, where: dict, cond: ir.Expr, write: bool = False) -> ir.Stmt:
        where = {**self.next, **where}
        indices = tuple(substitute_expr(x, where) for x in access.indices)
        fetch = ir.Prefetch(access.tensor, indices, write=write, level=2, span=self.c.k.span)
        return ir.If(cond, (fetch,), (), self.c.k.span)


def k_loop_asking(c: Contraction, t: MicroTile, loop: ir.For, ahead: Ahead) -> ir.Stmt:
    """The k `loop` (`for p in range(kc)`) in chunks of AHEAD_EVERY steps,
    each after an ask of `ahead`, when there is a next product; else (a
    batch's last product, a batch of one: x @ W.T) `loop` itself, whose
    chunks would cost the micro-kernel a loop exit every few steps (1 thread
    of an Intel Xeon, 512 x 3584 x 3584 with W.T: 132 -> 139 GFLOP/s)."""
    span = c.k.span
    q, p = ir.Sym("pq", I64, "loop"), fresh(loop.var)
    asks = ahead.asks(t, floordiv(ir.Var(q), i64(AHEAD_EVERY)))
    inner = replace(loop, var=p, start=ir.Var(q), stop=ir.Binary("min", add(ir.Var(q), i64(AHEAD_EVERY)), loop.stop, I64),
                    body=substitute(loop.body, {loop.var: ir.Var(p)}))
    chunked = ir.For(q, i64(0), loop.stop, AHEAD_EVERY, (*asks, inner), f"{c.k.name}.ahead", span=span)
    return ir.If(ahead.more, (chunked,), (loop,), span)
