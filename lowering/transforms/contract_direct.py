"""The unpacked path of `contract`: the micro-kernel straight on A and B.

Small products (B at most 128 x 128, at most 128^3 multiply-adds) skip
packing: strips of C's rows run in parallel while B stays in L1/L2. So do
short ones (M <= 64, B within 256 KiB), long ones outside a batch (B within
256 KiB), a few rows outside a batch (M <= 8, B within 1 MiB), and
batch-reduce products of any length. Also the predicates on
sizes that the packed path shares.
"""

from __future__ import annotations

from .. import ir
from ..arith import add, both, compare, floordiv, i64, maximum, minimum, mul, roundup, sub
from ..machine import MicroTile
from ..types import BOOL, I64
from .contract_match import Contraction
from .microkernel import Direct, batch_reduce_vars, tile_body
from .nest import fresh_locals

SMALL_WORK = 48 ** 3  # multiply-adds below which the M blocks are not split for threads
# Products read in place, without packing: B at most this many elements (it
# stays in L1/L2 while every strip of A passes over it), and at most this work.
DIRECT_B_ELEMENTS = 128 * 128
DIRECT_WORK = 128 ** 3
# Short products (few rows of A, as each output row of a convolution is)
# reuse a packed B too little to pay for packing it: they read B in place
# while it fits in half of Zen 3's 512 KiB L2. A ResNet layer's rows (56 x 64,
# K = 576): 132 GFLOP/s in place against 90 packed. So do products of any
# length outside a batch: B stays in L2 while A's strips pass over it, and A's
# rows, read in place, are no copy to wait for (1 thread of Zen 4, GFLOP/s
# packed -> in place: 8192 x 256 x 128 86 -> 90, 4096 x 2048 x 32 57 -> 83,
# 1000 x 1000 x 64 101 -> 115, 300 x 500 x 100 95 -> 106; numpy 86, 62, 97,
# 97). In a batch, each product's B comes from memory, where the packed
# path asks for the next one's (64 products of 128 x 256 x 128: 101 packed,
# 90 in place). So do batch-reduce
# products of any length: packed, each C tile is stored once per batch-reduce
# step, whose K is short (a convolution tap's: C_in); in place, the tile stays
# in registers over all of them. A ResNet layer's image as one product (3022
# x 64, 9 taps of K = 64, Zen 4): 110 GFLOP/s in place against 95 packed.
DIRECT_ROWS = 64
DIRECT_B_BYTES = 256 * 1024
# A product of a few rows alone reads each element of B only that often:
# packing B costs more than the product. In place while B is within Zen 4's
# 1 MiB L2 (1 thread of Zen 4, packed -> in place: 2 x 512 x 512 42.6 -> 30.5
# us, 4 x 512 x 512 56 -> 33, 3 x 300 x 700 43 -> 22; numpy 17-23, 75, 27);
# from memory, rows of a column strip are far apart and B is better packed
# (2 x 4096 x 4096: 6.9 ms packed, 19.5 in place). dsl.ops gives products of
# 2 rows, and of 3-4 with B beyond L2, to stdlib/dense.tk's matmul_rows_*,
# which streams B's rows whole (2 x 512 x 512: 19-21 us; 2 x 4096 x 4096:
# 4.4 ms).
FEW_ROWS = 8
FEW_ROWS_B_BYTES = 1024 * 1024


def at_most(M: ir.Expr, N: ir.Expr, K: ir.Expr, work: int, more: bool = False) -> ir.Expr:
    """M x N x max(K, 1) <= work (or, with `more`, > work), without forming
    the product (it could overflow)."""
    return compare(">" if more else "<=", mul(M, N), floordiv(i64(work), maximum(K, i64(1))))


def all_of(conds: list[ir.Expr]) -> ir.Expr:
    out = conds[0]
    for x in conds[1:]:
        out = ir.Binary("and", out, x, BOOL)
    return out


def any_of(conds: list[ir.Expr]) -> ir.Expr:
    out = conds[0]
    for x in conds[1:]:
        out = ir.Binary("or", out, x, BOOL)
    return out


def small_product(c: Contraction, m: ir.Expr, n: ir.Expr, k_total: ir.Expr, batch: ir.For | None) -> ir.Expr:
    """Whether the product is small enough to skip packing (B's rows are read
    where they are): little of B and little work, or B in cache and, inside
    a `batch` loop of more than one product, few rows."""
    b_elements = mul(k_total, n)
    short = [compare("<=", b_elements, i64(DIRECT_B_BYTES // (c.dtype.bits // 8)))]
    if batch is not None and not c.br:
        few_rows = compare("<=", m, i64(DIRECT_ROWS))
        if batch.step == 1:
            few_rows = any_of([few_rows, compare("<=", sub(batch.stop, batch.start), i64(1))])
        short.append(few_rows)
    ways = [all_of([compare("<=", b_elements, i64(DIRECT_B_ELEMENTS)), at_most(m, n, k_total, DIRECT_WORK)]),
            all_of(short)]
    if batch is None:
        ways.append(all_of([compare("<=", m, i64(FEW_ROWS)),
                            compare("<=", b_elements, i64(FEW_ROWS_B_BYTES // (c.dtype.bits // 8)))]))
    return any_of(ways)


def reads_in_place(c: Contraction, m: ir.Expr, n: ir.Expr, k_total: ir.Expr, batch: ir.For | None) -> ir.Expr:
    """Whether the product takes the unpacked path: a `small_product`, in
    the copy of the body for unit innermost strides (`ir.UnitStrides`). The
    copy for any strides packs every product: read in place, its vectors
    would be put together lane by lane (a matmul with A[:, ::2] or C[:, ::2],
    1 thread of Zen 4, GFLOP/s: 64^3 16 in place, 43 packed; 200^3 17, 63),
    and that copy, with those tiles, was two thirds of a contraction's
    compile time (AVX-512, `ij,jk->ik`: 9.0 s, 3.1 without the copy)."""
    return in_unit_copy(c, small_product(c, m, n, k_total, batch))


def in_unit_copy(c: Contraction, cond: ir.Expr) -> ir.Expr:
    """`cond`, and false in the copy of the body for any strides: a path
    taken only in the unit-stride copy, whose general copy has none of it."""
    return both(ir.UnitStrides(c.nest.span), cond)


def half_tile(t: MicroTile) -> MicroTile | None:
    """The tile half as tall, for a last strip of few rows (32 rows with a
    14-row tile were 14 + 14 + 14, of which 10 computed for nothing); None
    when the tile is too short to halve."""
    return MicroTile(t.mr // 2, t.vectors, t.lanes, t.fused) if t.mr >= 4 else None


def short_tiles(t: MicroTile) -> list[MicroTile]:
    """The unpacked path's variants for a last strip of few rows, shortest
    first: a quarter as tall (rounded up), when that is two rows or more
    below the half tile, then the half tile. 32 rows in 14-row tiles are 14 +
    14 + 4, where the half tile computed 7 (the seeds' configuration, 1
    thread of Zen 4: 95 -> 99 GFLOP/s; 28 rows, whole tiles: 101)."""
    half = half_tile(t)
    if half is None:
        return []
    quarter = MicroTile((t.mr + 3) // 4, t.vectors, t.lanes, t.fused)
    return [quarter, half] if quarter.mr < half.mr - 1 else [half]


def even_tile(t: MicroTile) -> MicroTile | None:
    """The unpacked path's tile for rows that 8-row tiles split evenly and
    `t`'s do not: AVX-512's 14 x 32 f32 tile leaves a last strip of 8 rows
    of 64 (the half tile's 7 and a row), where 8 x 32 tiles run whole, their
    16 sums loaded and stored at each tile's ends against 28 (an Intel Xeon,
    1 thread, GFLOP/s: 64^3 113 -> 142, 96^3 135 -> 156, 128^3 118 -> 129,
    48 x 1024 x 64 160 -> 169; 2 threads 64^3 139 -> 160; 112^3, whole
    14-row tiles, 151 against 8 x 32's 135-138; AMD EPYC, Zen 4, 1 / 2
    threads: 64^3 90 -> 97 / 111 -> 135, 96^3 104 -> 106 / 161 -> 185, 48
    x 1024 x 64 86 -> 112 / 142 -> 213, 160 x 64 x 160 level). Each
    contraction compiles one more set of strips (`ij,jk->ik`: 3.9 -> 4.5 s
    on AVX-512). None for other tiles
    (AVX2's 6 rows; NEON and f64: not measured)."""
    if t.mr <= 8 or t.lanes != 16 or t.vectors != 2:
        return None
    return MicroTile(8, t.vectors, t.lanes, t.fused)


def narrower_tiles(t: MicroTile, bits: int | None = None) -> list[MicroTile]:
    """The variants of tile `t` for a last strip of fewer columns, widest
    first: fewer vectors, then, given the element's `bits` and with 512-bit
    vectors, one vector of half the lanes. Zen 4 runs a 512-bit FMA as two
    256-bit halves, so a 256-bit one costs half (100^3, 1 thread: its last 4
    columns took a 16-lane vector; 91 -> 95 GFLOP/s with it); on AVX2 a
    4-lane FMA costs what an 8-lane one does. Only the unpacked path asks for
    the half lanes: in the packed one, 2048^3 (no edge at all) ran 1-2%
    slower with that variant compiled in."""
    out = [MicroTile(t.mr, n, t.lanes, t.fused) for n in reversed(range(1, t.vectors))]
    if bits is not None and t.lanes * bits >= 512:
        out.append(MicroTile(t.mr, 1, t.lanes // 2, t.fused))
    return out


def _rows_computed(M: ir.Expr, t: MicroTile) -> ir.Expr:
    """Rows of A the strips of tile `t` compute for M rows: whole tiles, then
    the shortest of `short_tiles` that holds the rest, else a whole one."""
    whole = mul(floordiv(M, i64(t.mr)), i64(t.mr))
    rest = sub(M, whole)
    last: ir.Expr = i64(t.mr)
    for v in reversed(short_tiles(t)):
        last = ir.Select(compare("<=", rest, i64(v.mr)), i64(v.mr), last, I64)
    return add(whole, ir.Select(compare("==", rest, i64(0)), i64(0), last, I64))


def _busiest_rows(M: ir.Expr, t: MicroTile, shared: ir.Expr) -> ir.Expr:
    """Rows of A that the busiest thread computes in strips of tile `t`, when
    the strips are `shared` among the threads (each takes a run of them):
    64^3 on two threads, 30 x 16 tiles (30 + 30 + 4 rows) ran at 87 GFLOP/s
    and 14 x 32 (five strips, three on one thread) at 113."""
    rows = _rows_computed(M, t)
    strips = floordiv(add(M, i64(t.mr - 1)), i64(t.mr))
    threads = ir.Threads(None)
    per_thread = mul(floordiv(add(strips, sub(threads, i64(1))), threads), i64(t.mr))
    return ir.Select(shared, minimum(rows, per_thread), rows, I64)


def unpacked(c: Contraction, t: MicroTile, narrow: MicroTile | None, M: ir.Expr, N: ir.Expr, K: ir.Expr,
             k_total: ir.Expr, wide: MicroTile | None = None) -> list[ir.Stmt]:
    """The micro-kernel straight on A and B, strips of C's rows in parallel.
    With a `narrow` tile (one vector wide, more rows), products take the one
    of the two whose tiles, edges included, compute fewer elements of C (ties
    to the narrow): a convolution's 16 output channels fill half of AVX-512's
    14 x 32 tile and all of a 30 x 16 one (the seed's shape: 103 GFLOP/s
    against 50); 77^3 computes 77 x 80 with 14 x 32 tiles and 90 x 80 with
    30 x 16 (Zen 4: 98 GFLOP/s against 87). Rows that 8-row tiles split
    evenly and the tile's do not take the `even_tile`. With a
    `wide` tile (the packed path's), a batch-reduce over several steps whose
    columns it divides takes that one: a 3x3 convolution of 64 -> 64 channels
    keeps its 6 x 64 tile in registers over all nine taps."""
    if narrow is None:
        plain = _direct_strips(c, t, M, N, K, k_total)
    else:
        shared = at_most(M, N, k_total, SMALL_WORK - 1, more=True)  # the strips' own test (below)
        narrow_computes_less = compare("<=", mul(_busiest_rows(M, narrow, shared), roundup(N, narrow.nr)),
                                       mul(_busiest_rows(M, t, shared), roundup(N, t.lanes)))
        # AVX2's tall one-vector tile (14 x 8 f32) runs each element at ~0.85-0.9
        # of what the 6 x 16 tile does: it takes only products of one vector of
        # columns, where the 6 x 16 tile's one-vector variant (6 x 8) keeps too
        # few sums to hide the FMA's latency (benchmarks/gemm.tk for znver3 on a
        # Zen 4 core, 1 thread, GFLOP/s; 14 x 8 as before -> not at all: 256^3
        # 67 -> 110, 256 x 256 x 24 65 -> 91; one vector of columns, 14 x 8
        # against 6 x 8: 1000 x 64 x 8 82 / 69, 77 x 77 x 8 61 / 54, 3000 x 64
        # x 4 25 / 27, 500^2 x 8 level).
        # Its k loop runs one copy a trip: its 14 sums, B's vector and A's
        # broadcast fill the 16 registers, and LLVM's znver3 model, unrolling
        # the loop twice, spilled sums and row addresses in it (as above, two
        # copies -> one: 1000 x 64 x 8 60 -> 82, 77 x 77 x 8 48 -> 61).
        on_ymm = narrow.lanes * c.dtype.bits < 512
        if on_ymm:
            narrow_computes_less = both(compare("<=", N, i64(narrow.nr)), narrow_computes_less)
        narrow_strips = _direct_strips(c, narrow, M, N, K, k_total, one_copy=on_ymm)
        plain = [ir.If(narrow_computes_less, tuple(narrow_strips),
                       tuple(fresh_locals(tuple(_direct_strips(c, t, M, N, K, k_total)))), c.nest.span)]
    even = even_tile(t)
    if even is not None:
        divides = both(compare("==", roundup(M, even.mr), M), compare("!=", roundup(M, t.mr), M))
        even_strips = fresh_locals(tuple(_direct_strips(c, even, M, N, K, k_total)))
        plain = [ir.If(divides, tuple(even_strips), tuple(plain), c.nest.span)]
    if wide is None:
        return plain
    several_steps = both(compare("==", roundup(N, wide.nr), N), compare(">", k_total, K))
    wide_strips = _direct_strips(c, wide, M, N, K, k_total, columns_divide=True)
    return [ir.If(several_steps, tuple(fresh_locals(tuple(wide_strips))),
                  tuple(plain), c.nest.span)]


def _direct_strips(c: Contraction, t: MicroTile, M: ir.Expr, N: ir.Expr, K: ir.Expr,
                   k_total: ir.Expr, columns_divide: bool = False, one_copy: bool = False) -> list[ir.Stmt]:
    """Strips of C's rows in parallel, tiles of `t` along each; with
    `columns_divide` (the tile's width divides N), no narrower variants for
    the last columns; with `one_copy`, k loops that LLVM does not unroll."""
    span = c.nest.span
    js, strip = ir.Sym("js", I64, "loop"), ir.Sym("is", I64, "loop")
    at = {"m0": ir.Var(strip), "n0": ir.Var(js), "M": M, "N": N,
          "rows": minimum(i64(t.mr), sub(M, ir.Var(strip))), "cols": minimum(i64(t.nr), sub(N, ir.Var(js))),
          "one_copy": one_copy}

    def variant(v: MicroTile, edge: bool = True, whole_vectors: int = 0, **limits) -> list[ir.Stmt]:
        v_at = {**at, **limits, "br": batch_reduce_vars(c), "br_loops": True}
        return tile_body(c, v, v_at, K, ir.Const(True, BOOL), Direct(c, v, v_at, edge, whole_vectors))

    narrower = [] if columns_divide else narrower_tiles(t, c.dtype.bits)
    # Past the narrower variants' tests (below), a tile of t's width has more
    # columns than the widest of them: only its last vector may reach past N,
    # and only it is masked. znver3 code on a Zen 4 core against OpenBLAS's
    # AVX2 kernels, 1 thread, every vector masked -> the last (before masked
    # loads went by lane signs there, which made each mask cheaper): 77^3
    # 1.06 -> 1.13, 61^3 1.10 -> 1.15, 93^3 1.04 -> 1.09; AVX-512 level.
    within = t.vectors if columns_divide else (narrower[0].nr // t.lanes if narrower else 0)
    whole, edge = variant(t, edge=False), variant(t, whole_vectors=within)
    full = ir.Binary("and", compare("==", at["rows"], i64(t.mr)), compare("==", at["cols"], i64(t.nr)), BOOL)
    # The edge tiles take a smaller variant when it covers what is left, as
    # the packed path's do (contract._packed_tiles): fewer rows
    # (`short_tiles`), or fewer vectors of columns (77 columns in 14 x 32
    # tiles: 32 + 32 + 16).
    for v in reversed(short_tiles(t)):
        short = variant(v, whole_vectors=within, rows=minimum(i64(v.mr), sub(M, ir.Var(strip))))
        edge = [ir.If(compare("<=", sub(M, ir.Var(strip)), i64(v.mr)), tuple(short), tuple(edge), span)]
    for v in narrower:
        slim = variant(v, cols=minimum(i64(v.nr), sub(N, ir.Var(js))))
        edge = [ir.If(compare("<=", sub(N, ir.Var(js)), i64(v.nr)), tuple(slim), tuple(edge), span)]
    n_strips = ir.For(js, i64(0), N, t.nr, (ir.If(full, tuple(whole), tuple(edge), span),), f"{c.n.name}.strip",
                      span=span)
    enough = at_most(M, N, k_total, SMALL_WORK - 1, more=True)
    return [ir.For(strip, i64(0), M, t.mr, (n_strips,), f"{c.m.name}.strip", "parallel", span, when=enough)]
