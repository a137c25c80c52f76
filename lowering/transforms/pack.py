"""Packing: copy a block of an operand into scratch in the micro-kernel's order.

B's block (kc rows of K by nc columns of N) becomes strips of `nr` columns,
each stored row after row: the micro-kernel then reads `nr` consecutive
elements per k step. A's block (mc rows by kc) is copied row by row when A's
rows run along k (`a_row_stride`), else into strips of `mr` rows stored column
after column. Strips that overhang the operand's edge are padded with zeros,
so the micro-kernel always runs on whole strips. The operands'
own layout does not matter here: the copy reads them through their index
expressions and strides (a transposed view packs as well as a contiguous one).
"""

from __future__ import annotations

from .. import ir
from ..arith import add, compare, floordiv, i64, minimum, mul, roundup, sub
from ..machine import MicroTile
from ..types import I64
from .contract_match import Contraction, uses
from .nest import fresh_locals, substitute, substitute_expr


def pack_b(c: Contraction, t: MicroTile, at: dict) -> list[ir.Stmt]:
    """Bp[js*kc + p*nr + j] = B[k = pc + p, n = jc + js + j].

    When B's rows run along n, PACK_B_ROWS rows at a time: those rows of the
    block are read in one pass, into every strip, where strip by strip the
    reads stepped down the rows nr columns at a time, a page apart for a wide
    B (64 products of 128 x 256 x 128, a B each, 1 thread of Zen 4: 0.97 ->
    1.00x numpy, means of four alternating runs). Else
    (B's columns run along k) strip by strip, so that a strip's lines are
    read over and over while they are in L1."""
    span, dtype = c.nest.span, c.dtype
    js = ir.Sym("js", I64, "loop")
    width = ir.Sym("width", I64, "local")
    p, j = ir.Sym("p", I64, "loop"), ir.Sym("j", I64, "loop")
    row = add(mul(ir.Var(js), at["kc"]), mul(ir.Var(p), i64(t.nr)))
    k_at = add(at["pc"], ir.Var(p))

    def b_at(n: ir.Expr) -> ir.Load:
        n_at = add(add(at["jc"], ir.Var(js)), n)
        indices = tuple(substitute_expr(x, {**at.get("br", {}), c.k.var: k_at, c.n.var: n_at}) for x in c.b.indices)
        return ir.Load(c.b.tensor, indices, dtype, c.b.span, safe=True)

    whole = tuple(ir.Store(at["Bp"], (ir.Ramp(add(row, i64(v * t.lanes)), 1, t.lanes),),
                           b_at(ir.Ramp(i64(v * t.lanes), 1, t.lanes)), span, safe=True)
                  for v in range(t.vectors))
    copy = ir.Store(at["Bp"], (add(row, ir.Var(j)),), b_at(ir.Var(j)), span, safe=True)
    pad = ir.Store(at["Bp"], (add(row, ir.Var(j)),), ir.Const(0.0, dtype), span, safe=True)
    is_whole = compare("==", ir.Var(width), i64(t.nr))
    set_width = ir.Assign(width, minimum(i64(t.nr), sub(at["nc"], ir.Var(js))), span)
    last = uses(c.b.indices[-1]) if c.b.indices else set()
    if c.n.var in last and c.k.var not in last:
        edge = _copy_and_pad(j, ir.Var(width), t.nr, copy, pad, "pack.B", "n", span)
        ahead = tuple(_row_ahead(c, t, at, k_at, add(at["jc"], ir.Var(js))))

        def row_pass(count: int) -> ir.Stmt:
            """The strips' rows p .. p + count - 1: the whole strips' copies
            written out, the last strip's (the rare edge) a loop over the rows."""
            at_row = [{p: add(ir.Var(p), i64(r))} for r in range(count)]
            wholes = tuple(x for m in at_row for x in substitute(whole, m))
            aheads = tuple(x for m in at_row for x in substitute(ahead, m))
            edges = edge
            if count > 1:
                r = ir.Sym("r", I64, "loop")
                edges = (ir.For(r, i64(0), i64(count), 1, substitute(edge, {p: add(ir.Var(p), ir.Var(r))}),
                                "pack.B.rows", span=span),)
            return ir.For(js, i64(0), at["nc"], t.nr, (*aheads, set_width, ir.If(is_whole, wholes, edges, span)),
                          "pack.B.strip", span=span)

        most = mul(floordiv(at["kc"], i64(PACK_B_ROWS)), i64(PACK_B_ROWS))
        return [ir.For(p, i64(0), most, PACK_B_ROWS, (row_pass(PACK_B_ROWS),), "pack.B", span=span),
                *fresh_locals((ir.For(p, most, at["kc"], 1, (row_pass(1),), "pack.B", span=span),))]
    edge = _copy_then_pad(p, j, ir.Var(width), t.nr, copy, pad, at["kc"], "pack.B", "n", span)
    rows = _by_blocks_of_k(p, whole, at["kc"], t.lanes, span) if k_innermost(c) else \
        [ir.For(p, i64(0), at["kc"], 1, whole, "pack.B.k", span=span)]
    return [ir.For(js, i64(0), at["nc"], t.nr, (set_width, ir.If(is_whole, tuple(rows), (edge,), span)),
                   "pack.B", span=span)]


# Rows of a row-major B packed a pass: each strip then takes PACK_B_ROWS rows
# at once, contiguous in the strip, where one row a pass wrote a line into
# each strip, the strips a whole strip's bytes apart (32 KiB with AVX2's
# 6 x 16 tiles: the same L1 set, row after row). AVX2 code for znver3 on a
# Zen 4 core, 1 thread, best of 31 (median), GFLOP/s, 1 -> 4 rows: 256 x
# 3584 x 3584 89.4 (84.6) -> 94.2 (84.8), 512 x 3584 x 3584 101.4 (86.9) ->
# 102.2 (90.6), 2048^3 104.4 -> 105.3, 128 x 4096 x 4096 92.0 -> 94.8 (2
# rows: 92.7, 8: 92.9); AVX-512's 6 x 64 level to 2% better.
PACK_B_ROWS = 4
PACK_AHEAD_ROWS = 8  # rows of B asked for (into L2) before the pack reaches them


def line_elements(c: Contraction) -> int:
    """How many of the sum's elements fill a 64-byte cache line."""
    return max(1, 64 // (c.dtype.bits // 8))


def _row_ahead(c: Contraction, t: MicroTile, at: dict, k_at: ir.Expr, n_at: ir.Expr) -> list[ir.Stmt]:
    """Prefetches of the lines of the strip at column n_at, PACK_AHEAD_ROWS
    rows below the row being packed: each row of a wide B is a page or more
    away from the last, where the hardware's prefetcher starts over (1
    thread of Zen 4, 512 x 3584 x 3584: 100.4-101.0 -> 101.7-102.7 GFLOP/s,
    numpy 102.9-103.9). Past the panel's last row they ask for lines that
    the next panel packs, or for none (a prefetch never faults)."""
    out = []
    for first in range(0, t.nr, line_elements(c)):
        where = {**at.get("br", {}), c.k.var: add(k_at, i64(PACK_AHEAD_ROWS)), c.n.var: add(n_at, i64(first))}
        indices = tuple(substitute_expr(x, where) for x in c.b.indices)
        out.append(ir.Prefetch(c.b.tensor, indices, level=2, span=c.b.span))
    return out


def k_innermost(c: Contraction) -> bool:
    """Whether B's innermost index is k itself (B stored by rows of K, as x @ W.T reads W)."""
    last = c.b.indices[-1] if c.b.indices else None
    return isinstance(last, ir.Var) and last.sym is c.k.var


def _by_blocks_of_k(p: ir.Sym, whole: tuple[ir.Stmt, ...], kc: ir.Expr, lanes: int, span) -> list[ir.Stmt]:
    """The whole strip's rows `whole` (over p in range(kc)) in blocks of `lanes`
    values of k, each a loop of constant trip count around loads whose lanes
    step along n: transpose_loads reads such a block as rows of B and transposes
    it in registers, where each vector was a gather (512 x 3584 x 3584 a @ b.T,
    1 thread of Zen 4: 0.89-0.92 -> 0.97-0.99x numpy). The last kc % lanes rows
    are copied as before."""
    block = ir.Sym("pb", I64, "loop")
    blocks_end = mul(floordiv(kc, i64(lanes)), i64(lanes))
    # A loop per vector of the strip: transpose_loads takes at most two
    # blocks a loop, and left the other two of AVX-512's 6 x 64 tile as
    # gathers (1 thread of an Intel Xeon, x @ W.T: 6 x 4096 x 4096 12.8 ->
    # 8.4 ms, nearly all of it packing; 128 x 4096 x 4096 126 -> 141 GFLOP/s).
    loops = []
    for v, stmt in enumerate(whole):
        i = ir.Sym(f"pi{v}", I64, "loop")
        inner = substitute((stmt,), {p: add(ir.Var(block), ir.Var(i))})
        loops.append(ir.For(i, i64(0), i64(lanes), 1, inner, "pack.B.t", span=span))
    blocked = ir.For(block, i64(0), blocks_end, lanes, tuple(loops), "pack.B.k", span=span)
    rest = ir.For(p, blocks_end, kc, 1, whole, "pack.B.k", span=span)
    return [blocked, rest]


def pack_a(c: Contraction, t: MicroTile, at: dict) -> list[ir.Stmt]:
    """Ap[(ic + is)*kc + p*mr + i] = A[m = ic + is + i, k = pc + p], strip is by strip."""
    span, dtype = c.nest.span, c.dtype
    strip_var = ir.Sym("is", I64, "loop")
    height = ir.Sym("height", I64, "local")
    p, i = ir.Sym("p", I64, "loop"), ir.Sym("i", I64, "loop")
    m0 = add(at["ic"], ir.Var(strip_var))
    col = add(mul(m0, at["kc"]), mul(ir.Var(p), i64(t.mr)))
    a_indices = tuple(substitute_expr(x, {**at.get("br", {}), c.m.var: add(m0, ir.Var(i)),
                                         c.k.var: add(at["pc"], ir.Var(p))})
                      for x in c.a.indices)
    copy = ir.Store(at["Ap"], (add(col, ir.Var(i)),), ir.Load(c.a.tensor, a_indices, dtype, c.a.span, safe=True),
                    span, safe=True)
    pad = ir.Store(at["Ap"], (add(col, ir.Var(i)),), ir.Const(0.0, dtype), span, safe=True)
    whole = ir.For(p, i64(0), at["kc"], 1, (ir.For(i, i64(0), i64(t.mr), 1, (copy,), "pack.A.m", span=span),),
                   "pack.A.k", span=span)
    edge = _copy_then_pad(p, i, ir.Var(height), t.mr, copy, pad, at["kc"], "pack.A", "m", span)
    strip = [
        ir.Assign(height, minimum(i64(t.mr), sub(at["mcur"], ir.Var(strip_var))), span),
        ir.If(compare("==", ir.Var(height), i64(t.mr)), (whole,), (edge,), span),
    ]
    return [ir.For(strip_var, i64(0), at["mcur"], t.mr, tuple(strip), "pack.A", span=span)]


def a_row_stride(c: Contraction, kc_max: int) -> int | None:
    """The row stride of A's packed block when A's rows run along k (its last
    index moves with k alone), else None (the strips of `pack_a`). Copying such
    an A row by row is contiguous on both sides; strips of mr rows stored
    column after column made LLVM scatter the copy (AVX-512: 14% of a 128 x
    256 x 128 product's time). The stride is kc plus a cache line, so the mr
    rows the micro-kernel reads side by side fall in different L1 sets (read
    in place at a stride of 4 or 8 KiB, 2048^3 ran at 56 GFLOP/s, not 95)."""
    last = uses(c.a.indices[-1]) if c.a.indices else set()
    if c.k.var not in last or c.m.var in last:
        return None
    return kc_max + 512 // c.dtype.bits


def pack_a_rows(c: Contraction, t: MicroTile, at: dict, stride: int) -> list[ir.Stmt]:
    """Ap[(ic + i)*stride + p] = A[m = ic + i, k = pc + p] for the block's rows,
    then zero rows up to a whole strip."""
    span, dtype = c.nest.span, c.dtype
    i, p = ir.Sym("i", I64, "loop"), ir.Sym("p", I64, "loop")
    row = add(at["ic"], ir.Var(i))
    at_k = add(at["pc"], ir.Var(p))
    indices = tuple(substitute_expr(x, {**at.get("br", {}), c.m.var: row, c.k.var: at_k}) for x in c.a.indices)
    where = (add(mul(row, i64(stride)), ir.Var(p)),)
    copy = ir.Store(at["Ap"], where, ir.Load(c.a.tensor, indices, dtype, c.a.span, safe=True), span, safe=True)
    pad = ir.Store(at["Ap"], where, ir.Const(0.0, dtype), span, safe=True)
    whole = ir.For(i, i64(0), at["mcur"], 1, (ir.For(p, i64(0), at["kc"], 1, (copy,), "pack.A.k", span=span),),
                   "pack.A", span=span)
    zeros = ir.For(i, at["mcur"], roundup(at["mcur"], t.mr), 1,
                   (ir.For(p, i64(0), at["kc"], 1, (pad,), "pack.A.k", span=span),), "pack.A.pad", span=span)
    return [whole, *fresh_locals((zeros,))]


def _copy_then_pad(p: ir.Sym, x: ir.Sym, valid: ir.Expr, width: int, copy: ir.Stmt, pad: ir.Stmt,
                   kc: ir.Expr, name: str, axis: str, span) -> ir.For:
    """For a strip over the operand's edge: per k, copy the `valid` elements and
    zero the rest of the `width`. Its loops get variables of their own
    (`fresh_locals`): the same pieces also build the whole-strip copy."""
    inner = _copy_and_pad(x, valid, width, copy, pad, name, axis, span)
    (edge,) = fresh_locals((ir.For(p, i64(0), kc, 1, inner, f"{name}.k", span=span),))
    return edge


def _copy_and_pad(x: ir.Sym, valid: ir.Expr, width: int, copy: ir.Stmt, pad: ir.Stmt, name: str, axis: str,
                  span) -> tuple[ir.Stmt, ...]:
    """One row of an edge strip: copy the `valid` elements, zero the rest of the `width`."""
    pad_loop = ir.For(x, valid, i64(width), 1, (pad,), f"{name}.pad", span=span)
    return (ir.For(x, i64(0), valid, 1, (copy,), f"{name}.{axis}", span=span), *fresh_locals((pad_loop,)))
