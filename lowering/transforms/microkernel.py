"""The register-blocked micro-kernel: one `mr x nr` tile of C from packed panels.

    acc[r][c] = C[m0 + r, n0 + c*L : +L]     (or 0 on the first panel of K)
    for p in range(kc):
        b[c] = Bp[b0 + p*nr + c*L : +L]                      (`vectors` loads)
        acc[r][c] = fma(broadcast(Ap[a0 + p*mr + r]), b[c], acc[r][c])
    C[m0 + r, n0 + c*L : +L] = acc[r][c]     (or f(acc) on the last panel)

The accumulators are vector locals, which LLVM keeps in registers: the tile
shape comes from `machine.micro_tile`, sized so they and the operands fit.
Starting from C (not from 0) on later K panels keeps the sum's order that of
the plain loop. A tile that overhangs C's edge reads and writes only the rows
that exist, under a lane mask for the columns.

A sum that accumulates (`C[m, n] += sum(..)`) starts from C on every panel.
An epilogue `C[m, n] = f(sum)` runs on the tile's last visit only (the last
panel of K and of every batch-reduce loop), on the accumulator vectors: the
partial sums stored before that are plain sums. Unpacked products run the
batch-reduce loops inside the tile (a BRGEMM: the tile stays in registers
over all of them).
"""

from __future__ import annotations

from .. import ir
from ..arith import add, compare, i64, mul, sub
from ..machine import MicroTile
from ..types import BOOL, I64
from .contract_ahead import Ahead, k_loop_asking
from .contract_match import Contraction
from ..ir import fresh
from ..rewrite import map_expr, walk_expr
from .nest import substitute_expr


# Intrinsics that become a library call per lane (too large to unroll per accumulator).
LIBRARY_CALLS = frozenset({"exp", "log", "tanh", "erf"})


class Packed:
    """Operands read from the packed panels Ap (at a0) and Bp (at b0), whose
    strips are `packed.mr` rows and `packed.nr` columns wide (by default the
    tile's own; an edge tile smaller than the packing reads part of a strip)."""

    def __init__(self, c: Contraction, t: MicroTile, at: dict, packed: MicroTile | None = None):
        self.c, self.t, self.at = c, t, at
        self.packed = packed or t

    def setup(self) -> list[ir.Stmt]:
        """Statements before the k loop: none (a packed panel's rows are
        constant offsets from one address)."""
        return []

    def a(self, p: ir.Expr, r: int) -> ir.Expr:
        stride = self.at.get("a_row_stride")  # A packed row by row (`pack.a_row_stride`)
        if stride:
            index = add(add(self.at["a0"], i64(r * stride)), p)
        else:
            index = add(add(self.at["a0"], mul(p, i64(self.packed.mr))), i64(r))
        return ir.Load(self.at["Ap"], (index,), self.c.dtype, safe=True)

    def b(self, p: ir.Expr, v: int) -> ir.Expr:
        first = add(add(self.at["b0"], mul(p, i64(self.packed.nr))), i64(v * self.t.lanes))
        return ir.Load(self.at["Bp"], (ir.Ramp(first, 1, self.t.lanes),), self.c.dtype, safe=True)


# The unpacked whole tile addresses each row of A from its own register when
# they fit. Left to itself, LLVM's loop strength reduction sees that row r + 1
# lies one stride past row r and makes each row's address from the last one's
# inside the k loop: an add per row per k step beside the row's FMAs (an
# 8 x 32 tile: 9 integer instructions a step, against 2). The rows' indices
# are made before the loop as `opaque` values, which the optimizer cannot
# relate. Intel Xeon (AVX-512), GFLOP/s 1 / 2 threads, chained -> own: the
# seeds' BRGEMM 156 -> 162 / 292 -> 295, 128 x 256 x 256 146 -> 148 / 264 ->
# 268, 77^3 140 -> 145 / 176 -> 179; 14 x 32 tiles (three addresses spill to
# the stack, a load each that two FMAs a row absorb) 112^3 149 -> 149 / 237
# -> 244. AMD EPYC (znver4, whose LLVM model unrolls these loops twice, so
# the chain's adds come once per two k steps): level, the seeds' BRGEMM and
# 64^3 .. 1024 x 256 x 1024 within 3% either way, in the same process.
# One-vector tiles keep the chain past 8 rows: AVX2's 14 x 8 would add three
# loads to 15 FMAs a step, and a 30 x 16 tile lost 2%. Bounding
# the rows with min(m0 + r, M - 1) instead of `opaque` did as well on Intel
# models but LLVM folded it for znver3, where the chain came back.
OWN_ADDRESSES_ROWS = 8  # rows whose addresses fit in x86-64's 16 general registers, with the loop's own
OWN_ADDRESSES_ROWS_WIDE = 14  # ... in tiles of two or more vectors a row


class Direct:
    """Operands read where they are (small products, where packing does not
    pay). On a tile over C's edge, A's rows past M repeat row M - 1 (their
    results are never stored) and B's columns past N are masked off, but for
    the first `whole_vectors` vectors of them, which the caller knows lie
    within N (all of them where the tile's width divides N)."""

    def __init__(self, c: Contraction, t: MicroTile, at: dict, edge: bool, whole_vectors: int = 0):
        self.c, self.t, self.at, self.edge = c, t, at, edge
        self.whole_vectors = t.vectors if not edge else whole_vectors
        self.rows = None  # the tile's rows of A, as locals (see OWN_ADDRESSES_ROWS)
        if self.whole_vectors == t.vectors and t.mr <= (OWN_ADDRESSES_ROWS_WIDE if t.vectors >= 2
                                                         else OWN_ADDRESSES_ROWS):
            self.rows = [ir.Sym(f"row{r}", I64, "local") for r in range(t.mr)]

    def setup(self) -> list[ir.Stmt]:
        """Statements before the k loop: the rows' indices, each opaque."""
        if self.rows is None:
            return []
        return [ir.Assign(s, ir.Unary("opaque", self._row(r), I64)) for r, s in enumerate(self.rows)]

    def _row(self, r: int) -> ir.Expr:
        m = add(self.at["m0"], i64(r))
        return ir.Binary("min", m, sub(self.at["M"], i64(1)), I64) if self.edge else m

    def a(self, p: ir.Expr, r: int) -> ir.Expr:
        m = ir.Var(self.rows[r]) if self.rows is not None else self._row(r)
        where = {**self.at.get("br", {}), self.c.m.var: m, self.c.k.var: p}
        return ir.Load(self.c.a.tensor, tuple(substitute_expr(x, where) for x in self.c.a.indices),
                       self.c.dtype, self.c.a.span, safe=True)

    def b(self, p: ir.Expr, v: int) -> ir.Expr:
        column = ir.Ramp(add(self.at["n0"], i64(v * self.t.lanes)), 1, self.t.lanes)
        where = {**self.at.get("br", {}), self.c.k.var: p, self.c.n.var: column}
        mask = ir.Binary("<", column, self.at["N"], BOOL) if v >= self.whole_vectors else None
        return ir.Load(self.c.b.tensor, tuple(substitute_expr(x, where) for x in self.c.b.indices),
                       self.c.dtype, self.c.b.span, safe=True, mask=mask)


def tile_body(c: Contraction, t: MicroTile, at: dict, kc: ir.Expr, first_panel: ir.Expr,
              operands=None, last_panel: ir.Expr | None = None) -> list[ir.Stmt]:
    """Statements computing the tile at C[at['m0'].., at['n0']..].

    `at` holds i64 expressions: m0, n0 (the tile's corner in C), rows and cols
    (how much of the tile lies inside C), M and N (C's extents), and what the
    operands need (`Packed`, the default: a0, b0 and the buffers Ap, Bp);
    `at['br']` maps the batch-reduce loops' variables to their values, or,
    when `at['br_loops']` is true, the batch-reduce loops run here, around k;
    `at['one_copy']` asks LLVM not to unroll the k loop.
    `last_panel` (default: always) says when the epilogue applies.
    """
    operands = operands or Packed(c, t, at)
    dtype = c.dtype
    acc = [[ir.Sym(f"acc{r}_{v}", dtype, "local", lanes=t.lanes) for v in range(t.vectors)]
           for r in range(t.mr)]
    full = ir.Binary("and", compare("==", at["rows"], i64(t.mr)), compare("==", at["cols"], i64(t.nr)), BOOL)

    def column(v: int) -> ir.Expr:
        return ir.Ramp(add(at["n0"], i64(v * t.lanes)), 1, t.lanes)

    def at_element(r: int, v: int) -> dict:
        return {c.m.var: add(at["m0"], i64(r)), c.n.var: column(v)}

    def c_access(r: int, v: int):
        """C's indices for row r, vector v of the tile, and the mask of its columns in C."""
        indices = tuple(substitute_expr(x, at_element(r, v)) for x in c.store.indices)
        return indices, ir.Binary("<", column(v), at["N"], BOOL)

    def each(make) -> list[ir.Stmt]:
        """`make(r, v, masked)` for every accumulator: unmasked when the tile is whole."""
        whole = [s for r in range(t.mr) for v in range(t.vectors) for s in make(r, v, False)]
        edge = [ir.If(compare("<", i64(r), at["rows"]),
                      tuple(s for v in range(t.vectors) for s in make(r, v, True)),
                      tuple(ir.Assign(acc[r][v], ir.Const(0.0, dtype)) for v in range(t.vectors))
                      if make is load_c else ())
                for r in range(t.mr)]
        return [ir.If(full, tuple(whole), tuple(edge))]

    def load_c(r: int, v: int, masked: bool) -> list[ir.Stmt]:
        indices, mask = c_access(r, v)
        load = ir.Load(c.store.tensor, indices, dtype, safe=True, mask=mask if masked else None)
        return [ir.Assign(acc[r][v], load)]

    def store_c(r: int, v: int, masked: bool) -> list[ir.Stmt]:
        indices, mask = c_access(r, v)
        return [ir.Store(c.store.tensor, indices, ir.Var(acc[r][v]), c.store.span, safe=True,
                         mask=mask if masked else None)]

    def store_epilogue(r: int, v: int, masked: bool) -> list[ir.Stmt]:
        indices, mask = c_access(r, v)
        value = _epilogue(c, {**at_element(r, v), c.acc: ir.Var(acc[r][v])}, mask if masked else None)
        return [ir.Store(c.store.tensor, indices, value, c.store.span, safe=True, mask=mask if masked else None)]

    zero = [ir.Assign(a, ir.Const(0.0, dtype)) for row in acc for a in row]
    init = ir.If(first_panel, tuple(zero), tuple(each(load_c))) if not c.accumulate else each(load_c)[0]
    store = each(store_c)
    if c.epilogue is not None and _calls_library(c.epilogue):
        # exp, erf, ... are calls per lane: once per row of the tile, from C
        # (still in L1), not unrolled over every accumulator.
        finish = [_epilogue_rows(c, t, at, column)]
        store = store + (finish if last_panel is None else [ir.If(last_panel, tuple(finish))])
    elif c.epilogue is not None:
        finished = each(store_epilogue)
        store = finished if last_panel is None else [ir.If(last_panel, tuple(finished), tuple(store))]
    if at.get("one_copy"):
        unroll = 1
    else:
        unroll = K_UNROLL if isinstance(operands, Packed) and _room_to_unroll(t, dtype) else 0
    k_loop = [_k_loop(c, t, operands, kc, acc, at.get("ahead"), unroll)]
    if at.get("br_loops"):
        k_loop = _around(k_loop, c.br, at["br"])
    return [init, *_prefetch_next(c, t, at), *operands.setup(), *k_loop, *store]


def _calls_library(e: ir.Expr) -> bool:
    return any(isinstance(x, ir.Unary) and x.op in LIBRARY_CALLS for x in walk_expr(e))


def _epilogue_rows(c: Contraction, t: MicroTile, at: dict, column) -> ir.For:
    """for r in range(rows): C[m0 + r, tile's columns] = f(C[..]), masked to C."""
    r = ir.Sym("r", I64, "loop")
    body = []
    for v in range(t.vectors):
        where = {c.m.var: add(at["m0"], ir.Var(r)), c.n.var: column(v)}
        indices = tuple(substitute_expr(x, where) for x in c.store.indices)
        mask = ir.Binary("<", column(v), at["N"], BOOL)
        now = ir.Load(c.store.tensor, indices, c.dtype, safe=True, mask=mask)
        value = _epilogue(c, {**where, c.acc: now}, mask)
        body.append(ir.Store(c.store.tensor, indices, value, c.store.span, safe=True, mask=mask))
    return ir.For(r, i64(0), at["rows"], 1, tuple(body), "epilogue", span=c.store.span)


def _epilogue(c: Contraction, where: dict, mask: ir.Expr | None) -> ir.Expr:
    """The epilogue on one accumulator vector; loads along the vector are masked
    like the tile's columns."""
    value = substitute_expr(c.epilogue, where)

    def masked(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Load) and mask is not None and any(
                isinstance(x, ir.Ramp) for i in e.indices for x in walk_expr(i)):
            return ir.Load(e.tensor, e.indices, e.type, e.span, safe=True, mask=mask)
        return e

    return map_expr(value, masked)


def batch_reduce_vars(c: Contraction) -> dict:
    """Fresh variables for the batch-reduce loops (each copy of the loops gets
    its own: see `fresh_locals`)."""
    return {r.var: ir.Var(fresh(r.var)) for r in c.br}


def _around(body: list[ir.Stmt], loops: tuple[ir.For, ...], fresh_vars: dict) -> list[ir.Stmt]:
    """`body` inside copies of the batch-reduce `loops` (outermost first), on
    the variables `fresh_vars` gives them."""
    for loop in reversed(loops):
        var = fresh_vars[loop.var].sym
        body = [ir.For(var, i64(0), loop.stop, 1, tuple(body), loop.name, span=loop.span)]
    return body


def _prefetch_next(c: Contraction, t: MicroTile, at: dict) -> list[ir.Stmt]:
    """Ask for the next tile's rows of C while this one computes: they are
    read or written right after, and C is large, so they would otherwise
    miss. The next tile is the next m strip, or where the tiles go row by row
    (`contract.rows_first`) the next columns of these rows. Measured gain on
    Zen 3 (the next m strip): about 1% at 1000^3 and up."""
    out: list[ir.Stmt] = []
    rows, columns = (0, t.nr) if at.get("rows_first") else (t.mr, 0)
    for r in range(t.mr):
        for col in (at["n0"], add(at["n0"], i64(t.nr - 1))):  # first and last line of the row
            where = {c.m.var: add(at["m0"], i64(rows + r)), c.n.var: add(col, i64(columns))}
            out.append(ir.Prefetch(c.store.tensor, tuple(substitute_expr(x, where) for x in c.store.indices),
                                   span=c.store.span))
    return out


def _k_loop(c: Contraction, t: MicroTile, operands, kc: ir.Expr, acc, ahead: Ahead | None = None,
            unroll: int = 0) -> ir.Stmt:
    dtype = c.dtype
    p = ir.Sym("p", I64, "loop")
    b = [ir.Sym(f"b{v}", dtype, "local", lanes=t.lanes) for v in range(t.vectors)]
    body: list[ir.Stmt] = [ir.Assign(b[v], operands.b(ir.Var(p), v)) for v in range(t.vectors)]
    for r in range(t.mr):
        a = ir.Broadcast(operands.a(ir.Var(p), r), t.lanes)
        for v in range(t.vectors):
            body.append(ir.Assign(acc[r][v], _multiply_add(t, a, ir.Var(b[v]), ir.Var(acc[r][v]), dtype)))
    loop = ir.For(p, i64(0), kc, 1, tuple(body), f"{c.k.name}.micro", span=c.k.span, unroll=unroll)
    return loop if ahead is None else k_loop_asking(c, t, loop, ahead)


# The packed path's k loop in two copies a trip: half the loop's own
# instructions, which with 512-bit vectors compete with the FMAs for the
# core's issue slots. An Intel Xeon (AVX-512), 6 x 64 tiles, GFLOP/s, one
# copy -> two: 1 thread 1024^3 161 -> 171, 512 x 3584 x 3584 145 -> 154, 320^3
# 159 -> 167; 2 threads 1024^3 291 -> 306, 2048^3 307 -> 324.
K_UNROLL = 2
# ... where registers are left over: with 28 accumulators (14 x 32) LLVM
# loads the second copy's operands early and spills them (77^3: 127 -> 63).
# One-vector tiles wait on their loads either way (the unpacked path's 14 x 16
# edge of 77^3: 133 -> 128 in two copies).
UNROLL_MAX_ACCUMULATORS = 24
# The unpacked path reads B in place, where rows that start inside a line
# make each load of B read two; then two copies lose (B 16 bytes past a line,
# 1 thread: 128 x 256 x 256 134 -> 132, 240^3 136 -> 132; on lines 149 -> 152,
# 151 -> 154; the seeds' BRGEMM, whose B is realigned, within 2%), and a test
# of B's alignment per tile cost 77^3 and 100^3 4%: that path keeps one copy.


def _room_to_unroll(t: MicroTile, dtype) -> bool:
    """Whether the packed k loop of tile `t` runs two copies a trip: f32 in
    512-bit vectors (AVX-512's 32 registers; AVX2, NEON and f64 not
    measured or level), two or more of them a row, at most
    UNROLL_MAX_ACCUMULATORS holding the tile."""
    return (dtype.bits == 32 and t.lanes == 16 and t.vectors >= 2
            and t.mr * t.vectors <= UNROLL_MAX_ACCUMULATORS)


def _multiply_add(t: MicroTile, a: ir.Expr, b: ir.Expr, acc: ir.Expr, dtype) -> ir.Expr:
    """fma(a, b, acc) on an FMA machine; a * b + acc otherwise (the same sum as
    the plain loop, which only FMA contraction may fuse)."""
    if t.fused:
        return ir.Fma(a, b, acc, dtype)
    return ir.Binary("+", ir.Binary("*", a, b, dtype), acc, dtype)
