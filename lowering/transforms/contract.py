"""`contract(m)`: a matmul-shaped nest becomes packed, blocked GEMM (BLIS order).

    for n.panel in range(0, N, nc):               panels of B that fit in L3
        for k.panel in range(0, max(K, 1), kc):   panels of K that fit in L2
            pack B's kc x nc block into Bp        (strips of nr columns)
            for m.block in range(0, blocks) parallel:
                pack A's mc x kc block into Ap    (rows, or strips of mr rows)
                for n.strip in range(0, nc, nr):      (or m.strip, then n.strip:
                    for m.strip in range(0, mc, mr):    see `rows_first`)
                        micro-kernel: C's mr x nr tile in registers

`m` names the nest's outer loop; `contract()` with no loop takes every
contraction in the kernel. The tile (mr x nr) comes from the machine's vector
width and register count. Small products (B at most 128 x 128, at most 128^3
multiply-adds) skip packing: the micro-kernel reads A and B in place, strips
of C's rows in parallel (64^3 on two threads: 86 GFLOP/s against 58 packed).
So do short ones (M <= 64, B within 256 KiB) and, outside a batch, long
ones (B within 256 KiB), and these take a tall tile one
vector wide when C's columns would leave the wide tile's last vector empty.
A B stored by rows of K is always packed (read in place, its vectors would
be built lane by lane).
mc, kc and nc default to 144, 512 and 2048 elements on AVX2
(kc halves for f64: the same bytes; wide tiles below) and may be set as options: `contract(m, kc=128)`
(options mean packing, whatever the size).
kc = 512 measured best on Zen 3 (2048^3: 93 GFLOP/s against 85 with 256):
fewer passes over C, while A's 144 x 512 block (288 KiB) still fits in L2.
A wide tile takes A blocks of 8 strips: AVX-512's 14 x 32 took 112 x 512
(on a Rocket Lake core 1000^3 ran at 137 GFLOP/s with 112-row blocks against
95-102 with 144); its packed path now runs 6 x 64 (`machine.packed_tile`), 48
x 512 blocks (Zen 4: 24 to 144 rows within 1%). Its kc is the machine's
(`Machine.streamed_strip_kc`): 256 on Intel's cores (Rocket Lake; a Xeon with
2 MiB of L2 a core, 1 thread, 1024^3: 147-161 GFLOP/s with 512 against
164-187 with 256), 512 on Zen 4 (1 thread, 2048^3: 108 GFLOP/s against 103;
1024^3: 108 against 104).
The M blocks are balanced (equal to within a strip, a multiple of the thread count
when M allows) and each has its own region of Ap, so they run in parallel
without sharing. A short or wide product shares out C's columns instead,
each thread running the whole nest on its part (`contract_columns`). Legal
when C does not overlap A or B (the entry checks prove it unless the kernel
is `inplace`): every C
element's sum still runs over k in order, from 0, so results match the plain
loop (up to FMA contraction, which the plain loop may also use; under
`@options(contract=False)` the tile multiplies and adds apart, and the
results are the plain loop's bit for bit).

Batch-reduce loops (more summed indices than k) run around the K panels
(packed) or around k inside the tile (unpacked: the tile stays in registers
over all of them, a BRGEMM); either way each element's sum keeps the plain
loop's order. An epilogue `C = f(sum)` applies on each tile's last visit. A
sum added to C (`+=`) starts from C, as BLAS's beta = 1 does: that reorders
the additions, so it needs `@options(reassociate=True)`.
Batch loops around the nest: the outermost that indexes C runs whole
matmuls per thread when it has enough iterations, and the packed tiles of
each small product ask for the next one's lines (`contract_ahead`). An
operand that the batch leaves unchanged is packed once per thread's run of
products (`contract_batch`). A B read in place whose rows start inside a
cache line is read from an aligned copy, made once per call, when enough
rows of A read it (`contract_realign`).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..arith import add, compare, floordiv, i64, maximum, minimum, mul, roundup, share_start, sub
from ..machine import Machine, MicroTile, micro_tile, packed_tile
from ..rewrite import walk_stmts
from ..types import I64
from .contract_ahead import Ahead
from .contract_columns import column_parts, parts_of
from .contract_batch import Reuse, batch_loop, batch_parallel, enough_products, reuse_for, runs_of_products
from .contract_match import Contraction, match_nest
from .contract_realign import with_realigns
from .contract_sink import SUNK_REMARK, sink, sink_reduction_loops
from .contract_direct import (all_of, any_of, at_most, half_tile, in_unit_copy, narrower_tiles, reads_in_place,
                              unpacked)
from .microkernel import Packed, batch_reduce_vars, tile_body
from .nest import ScheduleError, find_loop, remark, replace_loop
from .pack import a_row_stride, k_innermost, pack_a, pack_a_rows, pack_b

name = "contract"


def run(kernel: ir.Kernel, d, machine: Machine = Machine(), remarks: list | None = None) -> ir.Kernel:
    """Apply the `contract` directive `d`; a nest that does not match is an error."""
    if kernel.options.inplace:
        raise ScheduleError(d.span, "contract() needs outputs that do not overlap inputs",
                            "this kernel is @options(inplace=True)")
    if d.loops:
        loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
        found = match_nest(loop, kernel.options.reassociate)
        sunk = sink(loop) if isinstance(found, str) and kernel.options.reassociate else None
        if sunk is not None:  # `for c: C += sum(..)` named: the contraction(s) inside, c summed
            remark(remarks, loop.span, f"loop '{loop.name}': {SUNK_REMARK}")
            kernel = replace(kernel, body=replace_loop(kernel.body, loop, [sunk]))
            return _rewrite(kernel, contractions(kernel), machine, dict(d.options), d.span, remarks)
        if isinstance(found, str):
            raise ScheduleError(d.loops[0].span, f"loop '{loop.name}' is not a contraction: {found}")
        return _rewrite(kernel, [found], machine, dict(d.options), d.span, remarks)
    kernel = sink_reduction_loops(kernel, remarks)
    found = contractions(kernel)
    if not found:
        raise ScheduleError(d.span, "contract(): this kernel has no contraction",
                            "a contraction is index notation such as C[m, n] = sum(A[m, k] * B[k, n])")
    return _rewrite(kernel, found, machine, dict(d.options), d.span, remarks)


def auto(kernel: ir.Kernel, machine: Machine, remarks: list | None = None) -> ir.Kernel:
    """The automatic schedule's part: every contraction, with default blocking."""
    if kernel.options.inplace:
        remark(remarks, kernel.span, f"kernel '{kernel.name}': no contraction micro-kernel, "
                                      "since outputs may overlap inputs (inplace=True)")
        return kernel
    kernel = sink_reduction_loops(kernel, remarks)
    found = contractions(kernel)
    if remarks is not None:
        inside = {id(s) for c in found for s in walk_stmts((c.nest,))}
        for s in kernel.body:
            if isinstance(s, ir.For) and not inside & {id(x) for x in walk_stmts((s,))}:
                remark(remarks, s.span, f"loop '{s.name}' is not a contraction ({match_nest(s, kernel.options.reassociate)})")
    return _rewrite(kernel, found, machine, {}, None, remarks) if found else kernel



def contractions(kernel: ir.Kernel) -> list[Contraction]:
    """The contraction nests of `kernel`, outermost first (none inside another)."""
    out: list[Contraction] = []
    inside: set[int] = set()
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.For) and id(s) not in inside:
            found = match_nest(s, kernel.options.reassociate)
            if isinstance(found, Contraction):
                out.append(found)
                inside.update(id(x) for x in walk_stmts(s.body))
    return out


def _rewrite(kernel: ir.Kernel, found: list[Contraction], machine: Machine, options: dict, span,
             remarks: list | None) -> ir.Kernel:
    if not kernel.options.contract:  # @options(contract=False): a * b + acc, each op rounded
        machine = replace(machine, has_fma=False)
    code = len(kernel.checks)
    info = ir.CheckInfo("memory", "out of memory for the packed operands of a matmul", span or kernel.span)
    # B stored by rows of K (x @ W.T), read in place, has each vector put
    # together lane by lane: such a B is always packed, transposed in
    # registers (1 thread of Zen 4: 64^3 18.6 -> 8.2 us, 128^3 136 -> 44;
    # the plain layout: 6.6 and 40).
    directs = [not options and not k_innermost(c) for c in found]
    body = with_realigns(kernel, found, directs)
    realigned = {s.tensor for s in body if isinstance(s, ir.Realign)}
    for c, direct in zip(found, directs, strict=True):
        tile = _tile(machine, c, options, span)  # the unpacked path's
        packed = tile if "mr" in options or "nr" in options else packed_tile(machine, c.dtype)
        mc, kc, nc = blocking = _blocking(c, packed, options, machine)
        # (Not on NEON: its 28 x 4 by-element tile spills accumulators.)
        narrow = micro_tile(machine, c.dtype, max_vectors=1) if not options and not machine.fma_by_element else None
        narrow = narrow if narrow is not None and narrow.nr < tile.nr else None
        # NEON's by-element FMA takes A's column of a strip as whole vectors.
        a_stride = None if machine.fma_by_element else a_row_stride(c, blocking[1])
        batch = batch_loop(body, c)
        reuse = reuse_for(batch, c)
        blocked = _blocked(c, packed, blocking, code, a_stride, direct=tile if direct else None, narrow=narrow,
                           batch=batch, reuse=reuse)
        where = "run in parallel" + ("" if reuse else " (or, for a short or wide product, C's columns)")
        outer = next((s for s in walk_stmts(body) if isinstance(s, ir.For) and s.kind == "parallel"
                      and any(x is c.nest for x in walk_stmts(s.body))), None)
        if outer is not None:
            where = f"one after another (the enclosing loop '{outer.name}' is the parallel one)"
        if batch is not None:
            where += f", or the '{batch.name}' loop when it has at least as many iterations as threads"
            if reuse is not None:
                same = " and ".join(x for x, fixed in (("A", reuse.a), ("B", reuse.b)) if fixed)
                where += (f"; {same}, the same for every '{batch.name}', packed once per "
                          "thread's run of them when one panel holds it")
                body = replace_loop(body, batch, [runs_of_products(batch, reuse, blocked, c.m.stop, tile.mr)])
            else:
                inside = replace_loop(batch.body, c.nest, blocked)
                body = replace_loop(body, batch, [batch_parallel(batch, inside, c.m.stop, tile.mr)])
        else:
            body = replace_loop(body, c.nest, blocked)
        if c.br:
            where += f"; the sum runs over {', '.join(r.name for r in c.br)} too (batch-reduce)"
        if c.accumulate:
            where += "; the sum adds to C"
        if c.epilogue is not None:
            where += "; the expression of the sum applied on each tile's last visit"
        remark(remarks, c.nest.span,
                f"loop '{c.nest.name}': contraction of '{c.a.tensor.name}' (m={c.m.name}) and "
                f"'{c.b.tensor.name}' (n={c.n.name}) over k={c.k.name}: {packed.mr}x{packed.nr} {c.dtype} "
                f"micro-kernel in registers{_unpacked_remark(tile, packed, direct, c.b.tensor in realigned)}, B packed in {kc}x{nc} panels, "
                f"A in {mc}x{kc} blocks {where}")
    return replace(kernel, body=body, checks=(*kernel.checks, info))


def _unpacked_remark(tile: MicroTile, packed: MicroTile, direct: bool, realigned: bool) -> str:
    if not direct or tile == packed:
        return ""
    copy = "; B from a copy on cache lines when its rows start inside one" if realigned else ""
    return f" ({tile.mr}x{tile.nr} for small products, read in place{copy})"


def _tile(machine: Machine, c: Contraction, options: dict, span) -> MicroTile:
    tile = micro_tile(machine, c.dtype)
    mr, nr = options.get("mr", tile.mr), options.get("nr", tile.nr)
    if nr % tile.lanes:
        raise ScheduleError(span, f"contract(): nr={nr} is not a multiple of the vector width {tile.lanes}")
    return MicroTile(mr, nr // tile.lanes, tile.lanes, tile.fused)


def _blocking(c: Contraction, t: MicroTile, options: dict, machine: Machine) -> tuple[int, int, int]:
    """(mc, kc, nc): mc a multiple of mr, nc of nr."""
    # kc: 512 f32 or 256 f64 elements, the same bytes, but the machine's own
    # for a tile whose B strip streams from L2 (machine.streamed_strip_kc); wide
    # tiles (AVX-512's 6 x 64 and 14 x 32) take A blocks of fewer rows.
    kc = options.get("kc", machine.streamed_strip_kc if strip_streams(c, t) else 512 * 32 // c.dtype.bits)
    wide = t.nr * c.dtype.bits // 8 >= 128
    mc = max(t.mr, options.get("mc", 8 * t.mr if wide else 144) // t.mr * t.mr)
    nc = max(t.nr, options.get("nc", 2048 if rows_first(c, t) else 1024) // t.nr * t.nr)
    return mc, kc, nc


def strip_streams(c: Contraction, t: MicroTile) -> bool:
    """Whether B's packed strips are too wide to stay in L1 (AVX-512's 6 x 64
    f32 tile: 64 KiB and more), so that they stream from L2 through the
    micro-kernel; narrower ones (AVX2, NEON, f64) are read again from L1."""
    return t.nr * c.dtype.bits // 8 >= 256


# The order of the packed path's tiles in a block. With strips of B that stay
# in L1, the tiles go row by row (for each strip of A's rows, every strip of
# B's columns): A's strip stays in L1 while B's panel streams past it, and
# the next tile of C is the next line of the same rows. Column by column
# (each strip of B against every strip of A, BLIS's order) the next tile is
# mr rows down C, whose rows 2048 or 3584 floats long start at the same
# offsets within a page (our reading of why large N lost most). AVX2 code
# (cpu=znver3) on a Zen 4 core, samples paired with OpenBLAS's Haswell
# kernels, speed against them, columns -> rows, f32 1 thread: 2048^3
# 0.89-0.93 -> 0.97-1.03, 512 x 3584 x 3584 0.89-0.94 -> 0.94-0.98, 1000^3
# 0.97-1.01 -> 1.00-1.01, 200^3 .. 512^3 level; 2 threads: 2048^3 0.91-0.98
# -> 0.98-1.04, 512 x 3584 x 3584 0.89-0.93 -> 1.01-1.02; f64 1 thread:
# 2048^3 0.89 -> 1.00, 512 x 3584 x 3584 0.91 -> 0.99; batches, 1 thread:
# (64,128,256) @ (64,256,128) 1.25 -> 1.29, (4,512,1024) @ (4,1024,1024)
# 0.96 -> 1.00. AVX-512's streamed strips keep BLIS's order (Zen 4, 1
# thread, rows: 2048^3, 1000^3, 512 x 3584 x 3584 within 2%, 512^3 1.5%
# slower). Row by row, each strip of A's rows reads all of B's panel, and A's
# block is packed once per panel: panels of 2048 columns (4 MiB), not 1024,
# 1 / 2 threads: 2048^3 0.97 -> 0.99 / 1.02 -> 1.05, 1500^3 0.95 -> 0.98 /
# 0.97 -> 1.04, 512 x 3584 x 3584 0.95 -> 0.95 / 0.97 -> 0.99 (4096: level
# with 2048).
def rows_first(c: Contraction, t: MicroTile) -> bool:
    """Whether the packed path's tiles go row by row (see above)."""
    return not strip_streams(c, t)


def _blocked(c: Contraction, t: MicroTile, blocking: tuple[int, int, int], code: int, a_stride: int | None,
             direct: MicroTile | None, narrow: MicroTile | None = None, batch: ir.For | None = None,
             reuse: Reuse | None = None) -> list[ir.Stmt]:
    """The packed nest on tiles `t`; with a `direct` tile, small products
    take the unpacked path on it instead. `a_stride`: A's block is packed row
    by row at this stride (else in strips of mr rows). `batch`: the batch
    loop around the nest, whose tiles ask for the next product's lines while
    they compute (`contract_ahead`). `reuse`: the nest runs inside a run's
    own batch loop (`contract_batch`), its buffers allocated before it and
    the operand the batch leaves unchanged packed on the run's first product
    when one panel holds it."""
    mc_max, kc_max, nc_max = blocking
    span, dtype = c.nest.span, c.dtype

    def local(label: str) -> ir.Sym:
        return ir.Sym(label, I64, "local")

    M, N, K, strips, blocks = (local(x) for x in ("M", "N", "K", "strips", "blocks"))
    # C's columns lo..hi: a thread's part, or all of them (contract_columns);
    # a run of products (reuse) takes all of them.
    parts, lo, hi = local("parts"), local("lo"), local("hi")
    n_start, n_stop = (i64(0), ir.Var(N)) if reuse is not None else (ir.Var(lo), ir.Var(hi))
    nc, kc, ic, mcur, threads = local("nc"), local("kc"), local("ic"), local("mcur"), local("threads")
    a_buf = ir.TensorParam("Ap", dtype, (ir.Sym("Ap.size", I64, "dim"),), True, span, scratch=True)
    b_buf = ir.TensorParam("Bp", dtype, (ir.Sym("Bp.size", I64, "dim"),), True, span, scratch=True)
    # An empty batch-reduce loop empties the whole sum: K = 0, and the loops
    # around the panels still run once, so that C gets written.
    empty = [compare("<=", r.stop, i64(0)) for r in c.br]
    k_size = c.k.stop if not empty else ir.Select(any_of(empty), i64(0), c.k.stop, I64, span)
    sizes = [ir.Assign(M, c.m.stop, span), ir.Assign(N, c.n.stop, span), ir.Assign(K, k_size, span)]
    # The whole sum's length (K times the batch-reduce extents), for the
    # decisions that weigh the work.
    k_total = ir.Var(K)
    for r in c.br:
        k_total = mul(k_total, maximum(r.stop, i64(0)))
    setup = [
        ir.Alloc(b_buf, mul(i64(kc_max), minimum(i64(nc_max), roundup(ir.Var(N), t.nr))), code, span),
        ir.Alloc(a_buf, mul(roundup(ir.Var(M), t.mr), i64(a_stride or kc_max)), code, span),
        *_m_blocks(ir.Var(M), ir.Var(N), k_total, t, mc_max, (threads, blocks, strips), span,
                   alone=None if reuse is not None else compare(">", ir.Var(parts), i64(1))),
    ]
    jc_loop_var, pc_loop_var = ir.Sym("jc", I64, "loop"), ir.Sym("pc", I64, "loop")
    js, strip = ir.Sym("js", I64, "loop"), ir.Sym("is", I64, "loop")
    block = ir.Sym("block", I64, "loop")
    at = {"jc": ir.Var(jc_loop_var), "pc": ir.Var(pc_loop_var), "kc": ir.Var(kc), "nc": ir.Var(nc),
          "ic": ir.Var(ic), "mcur": ir.Var(mcur), "Ap": a_buf, "Bp": b_buf,
          "M": ir.Var(M), "N": ir.Var(N), "K": ir.Var(K), "js": ir.Var(js),
          "m0": add(ir.Var(ic), ir.Var(strip)), "n0": add(ir.Var(jc_loop_var), ir.Var(js)),
          "rows": minimum(i64(t.mr), sub(ir.Var(mcur), ir.Var(strip))),
          "cols": minimum(i64(t.nr), sub(ir.Var(nc), ir.Var(js))),
          "a0": mul(add(ir.Var(ic), ir.Var(strip)), i64(a_stride) if a_stride else ir.Var(kc)),
          "a_row_stride": a_stride, "b0": mul(ir.Var(js), ir.Var(kc)), "rows_first": rows_first(c, t),
          "br": batch_reduce_vars(c)}
    if batch is not None:  # within a run, the next product is the run's own
        at["ahead"] = Ahead(c, t, at, reuse.loop if reuse else batch, ir.Var(strips), ir.Var(strip))
    first = [compare("==", ir.Var(pc_loop_var), i64(0)), *(compare("==", at["br"][r.var], i64(0)) for r in c.br)]
    last = [compare(">=", add(ir.Var(pc_loop_var), ir.Var(kc)), ir.Var(K)),
            *(compare(">=", at["br"][r.var], sub(r.stop, i64(1))) for r in c.br)]
    tile = _packed_tiles(c, t, at, ir.Var(kc), all_of(first), all_of(last))
    m_strips = ir.For(strip, i64(0), ir.Var(mcur), t.mr, (), f"{c.m.name}.strip", span=span)
    n_strips = ir.For(js, i64(0), ir.Var(nc), t.nr, (), f"{c.n.name}.strip", span=span)
    outer, inner = (m_strips, n_strips) if rows_first(c, t) else (n_strips, m_strips)
    strips_nest = replace(outer, body=(replace(inner, body=tuple(tile)),))
    def first_row(b: ir.Expr) -> ir.Expr:  # of block b: the blocks share the strips out evenly
        return mul(share_start(b, ir.Var(strips), ir.Var(blocks)), i64(t.mr))

    pack = pack_a_rows(c, t, at, a_stride) if a_stride else pack_a(c, t, at)
    # With reuse, an unchanged operand is packed again only on a run's first
    # product or when its block changes from panel to panel.
    repack = [] if reuse is None else [reuse.first(), compare(">", ir.Var(K), i64(kc_max))]
    if reuse is not None and reuse.a:
        pack = [ir.If(any_of(repack), tuple(pack), (), span)]
    block_body = [ir.Assign(ic, first_row(ir.Var(block)), span),
                  ir.Assign(mcur, sub(minimum(first_row(add(ir.Var(block), i64(1))), ir.Var(M)), ir.Var(ic)), span),
                  *pack, strips_nest]
    m_blocks = ir.For(block, i64(0), ir.Var(blocks), 1, tuple(block_body), f"{c.m.name}.block", "parallel", span,
                      when=compare(">", ir.Var(threads), i64(1)))
    pack_b_when = any_of([*repack, compare(">", ir.Var(N), i64(nc_max))]) if reuse and reuse.b else None
    k_panels = _k_panels(c, t, at, (kc, K, threads, pc_loop_var), kc_max, m_blocks, pack_b_when)
    n_body = [ir.Assign(nc, minimum(i64(nc_max), sub(n_stop, ir.Var(jc_loop_var))), span), k_panels]
    n_panels = ir.For(jc_loop_var, n_start, n_stop, nc_max, tuple(n_body), f"{c.n.name}.panel", span=span)
    paths = _paths(c, t, (M, N, K), k_total, (setup, n_panels), (parts, lo, hi), direct, narrow, batch, reuse)
    return [*sizes, *paths]


def _paths(c: Contraction, t: MicroTile, sizes: tuple, k_total: ir.Expr, packed: tuple, columns: tuple,
           direct: MicroTile | None, narrow: MicroTile | None, batch: ir.For | None,
           reuse: Reuse | None) -> list[ir.Stmt]:
    """The packed nest (`packed`: its setup and its loop over N's panels) in
    column parts (`columns`: the parts and a part's bounds) or in a run of
    products, and with a `direct` tile the choice of the unpacked path for
    small products. sizes: the M, N and K symbols."""
    M, N, K = (ir.Var(x) for x in sizes)
    setup, n_panels = packed
    span = c.nest.span
    if reuse is None:
        # A batch that runs whole products per thread leaves each one thread.
        shared = None if batch is None else enough_products(batch, sub(batch.stop, batch.start), c.m.stop, t.mr)
        parts, lo, hi = columns
        setup, packed_path = [], [ir.Assign(parts, parts_of(M, N, k_total, shared, span), span),
                                  column_parts(parts, N, t.nr, (lo, hi), [*setup, n_panels], span)]
    else:
        packed_path = [replace(reuse.loop, body=(n_panels,))]
    if direct is None:
        return [*setup, *packed_path]
    wide = t if c.br and t != direct else None
    direct_path = unpacked(c, direct, narrow, M, N, K, k_total, wide)
    if reuse is not None:
        direct_path = [replace(reuse.loop, body=tuple(direct_path))]
    in_place = reads_in_place(c, M, N, k_total, batch)
    return [ir.If(in_place, tuple(direct_path), (*setup, *packed_path), span)]


def _k_panels(c: Contraction, t: MicroTile, at: dict, syms: tuple, kc_max: int, m_blocks: ir.Stmt,
              pack_b_when: ir.Expr | None) -> ir.Stmt:
    """The loops over K's panels (and the batch-reduce loops around them):
    each packs its panel of B (when `pack_b_when` holds, if given), then runs
    `m_blocks` on it. syms: (kc, K, threads, the panel loop's variable)."""
    kc, k, threads, pc = syms
    span = c.nest.span
    # B's panel is packed by the whole team when the product is large enough
    # (serially it cost ~3% of 512x3584x3584 on two threads).
    team = compare(">", ir.Var(threads), i64(1))
    pack = [replace(s, kind="parallel", when=team) for s in pack_b(c, t, at)]
    if pack_b_when is not None:
        pack = [ir.If(pack_b_when, tuple(pack), (), span)]
    k_body = [ir.Assign(kc, minimum(i64(kc_max), sub(ir.Var(k), ir.Var(pc))), span), *pack, m_blocks]
    # At least one K panel, so that an empty sum (K = 0) still writes zeros.
    panels = ir.For(pc, i64(0), maximum(ir.Var(k), i64(1)), kc_max, tuple(k_body), f"{c.k.name}.panel", span=span)
    for r in reversed(c.br):  # batch-reduce loops: each sums into C panel after panel
        panels = ir.For(at["br"][r.var].sym, i64(0), maximum(r.stop, i64(1)), 1, (panels,), r.name, span=span)
    return panels


def _packed_tiles(c: Contraction, t: MicroTile, at: dict, kc: ir.Expr, first: ir.Expr,
                  last: ir.Expr) -> list[ir.Stmt]:
    """The micro-kernel on one tile of C from the packed strips. A tile over
    C's edge takes a smaller variant when that covers what is left of it:
    fewer vectors of columns, or half as many rows (the packed strips keep
    their width; the variant reads part of each). 129^3 with AVX-512's 14 x 32
    tile computed 140 x 160 for 129 x 129 without them (60 GFLOP/s, 77 with).
    The one tile short in both takes the narrower variant: each variant is
    another copy of the unrolled loop to compile, and the copy of the body
    for any strides (`ir.UnitStrides`), rarely run, has none."""

    def variant(v: MicroTile) -> list[ir.Stmt]:
        return tile_body(c, v, at, kc, first, Packed(c, v, at, packed=t), last_panel=last)

    out = variant(t)
    half = half_tile(t)
    if half is not None:
        out = [ir.If(in_unit_copy(c, compare("<=", at["rows"], i64(half.mr))), tuple(variant(half)), tuple(out),
                     c.nest.span)]
    for v in narrower_tiles(t):
        out = [ir.If(in_unit_copy(c, compare("<=", at["cols"], i64(v.nr))), tuple(variant(v)), tuple(out), c.nest.span)]
    return out


# Multiply-adds up to which the packed path runs on one thread: x @ W.T (B
# stored by rows of K is always packed), 1 thread against 2 of an Intel
# Xeon, GFLOP/s: 64^3 132 against 65, 128^3 180 against 172; 192^3 183
# against 219.
PACKED_TEAM_WORK = 160 ** 3


def _m_blocks(M: ir.Expr, N: ir.Expr, K: ir.Expr, t: MicroTile, mc_max: int, syms, span,
              alone: ir.Expr | None = None) -> list[ir.Stmt]:
    """Set `threads`, `blocks` and `strips` (M's strips of mr rows): as few
    blocks as mc allows, but a multiple of the thread count (when there are
    enough strips; one thread when `alone` holds: a column part's). The
    blocks share the strips evenly (sizes differ by at most one strip), so
    each thread's static share is within a strip of the
    others': rounding the block size up to mr instead left 1024 rows as nine
    blocks of 112 and one of 16, 560 rows on one thread and 464 on the other."""
    threads, blocks, strips = syms
    few = at_most(M, N, K, PACKED_TEAM_WORK)
    if alone is not None:
        few = any_of([few, alone])
    return [
        ir.Assign(strips, floordiv(add(M, i64(t.mr - 1)), i64(t.mr)), span),
        ir.Assign(blocks, floordiv(add(M, i64(mc_max - 1)), i64(mc_max)), span),
        # A small product is not worth a thread team (~2 us to start, and
        # the packed path meets twice a panel).
        ir.Assign(threads, ir.Select(few, i64(1), ir.Threads(span), I64, span), span),
        ir.Assign(blocks, mul(floordiv(add(ir.Var(blocks), sub(ir.Var(threads), i64(1))), ir.Var(threads)),
                              ir.Var(threads)), span),
        ir.Assign(blocks, maximum(i64(1), minimum(ir.Var(blocks), ir.Var(strips))), span),
    ]
