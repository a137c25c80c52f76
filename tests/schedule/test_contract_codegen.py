"""What the contraction's micro-kernel compiles to, for AVX2+FMA (assembly only:
it runs on any host). Patterns, not whole files."""

import re
from pathlib import Path

import pytest
from asm_loops import single_block_loops

from dsl.grammar.diagnostics import Source
from dsl.lowering import ir
from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

GEMM = (Path(__file__).resolve().parents[2] / "benchmarks" / "gemm.tk").read_text()
BMM = """
def bmm(a: f32[B, M, K], b: f32[B, K, N], c: f32[B, M, N]):
    c[i, m, n] = sum(a[i, m, k] * b[i, k, n])
"""
HASWELL = dict(triple="x86_64-unknown-linux-gnu", cpu="haswell")


@pytest.fixture(scope="module")
def job():
    return compile_source(Source("gemm.tk", GEMM), CompileOptions(**HASWELL), stop_after="asm")


@pytest.fixture(scope="module")
def bmm_job():
    return compile_source(Source("bmm.tk", BMM), CompileOptions(**HASWELL), stop_after="asm")


def _blocks(asm: str, function_prefix: str) -> list[str]:
    """The basic blocks of the functions whose names start with `function_prefix`
    (each cut after its first jump: the block that falls through it has no label)."""
    functions = re.split(r"\n(?=[A-Za-z_][\w.]*:\n)", asm)
    chosen = [f for f in functions if f.lstrip().startswith(function_prefix)]
    blocks = [b for f in chosen for b in re.split(r"\n\.?L?BB\d+_\d+:", f)]
    return [b[:jump.end()] if (jump := re.search(r"\n\tj[a-z]+\t[^\n]*", b)) else b for b in blocks]


def test_fma_on_vectors(job):
    ir = str(job.llvm)
    assert "llvm.fma.v8f32" in ir
    # the ragged edges (AVX2 loads by lane signs: backends/llvm/vector_memory.py)
    assert "llvm.x86.avx.maskload.ps.256" in ir and "llvm.masked.store.v8f32" in ir
    assert "prefetcht0" in job.asm  # the next tile of C


@pytest.mark.parametrize("name", ["gemm", "bmm"])
def test_micro_kernel_keeps_its_tile_in_registers(job, bmm_job, name):
    """The hot loops of the contiguous version (the packed micro-kernel and the
    unpacked one on whole tiles): 12 accumulators x k steps, every FMA
    register to register, operands by broadcast and vector load, no vector
    spill. (Edge tiles need two lane masks too, one more register than there
    is. The unpacked 14 x 8 tile computes 14 row addresses: one reload of an
    integer, the loop's bound, from the stack per k step is allowed: a movq,
    or a cmpq that reads it.)"""
    asm = (job if name == "gemm" else bmm_job).asm  # bmm: inside the batch's parallel body too
    loops = [b for b in _blocks(asm, f"{name}__unit") if b.count("vfmadd231ps") >= 12 and "vmaskmov" not in b]
    assert len(loops) >= 2, "no blocks with a 6x16 tile of FMAs"
    for block in loops:
        stack = [line for line in block.splitlines() if "(%rsp)" in line]
        assert not any("%ymm" in line for line in stack), f"vector spill in the micro-kernel:\n{block}"
        assert len(stack) <= 1 and all(line.split()[0] in ("movq", "cmpq") for line in stack), \
            f"stack traffic in the micro-kernel:\n{block}"
        assert "vbroadcastss" in block
        fmas = re.findall(r"vfmadd231ps\t(\S+), (\S+), (\S+)", block)
        assert all(x.startswith("%ymm") and y.startswith("%ymm") for x, y, _ in fmas)


NT = """
def mm_nt(a: f32[M, K], w: f32[N, K], c: f32[M, N]):
    c[m, n] = sum(a[m, k] * w[n, k])
"""


def test_b_stored_by_rows_of_k_is_packed_by_transposes():
    """x @ W.T reads W by rows of K: the automatic schedule packs each strip's
    block of 8 k x 8 n as 8 row loads and an 8 x 8 transpose in registers,
    not element by element (vinsertps) or by gathers: two rounds inside the
    128-bit lanes (vunpck*ps, vunpck*pd) and one across them (vperm2f128,
    vinsertf128), 24 shuffles each, where interleaving whole registers took
    48 (each a vunpck and a vperm2f128)."""
    asm = compile_source(Source("nt.tk", NT), CompileOptions(**HASWELL), stop_after="asm").asm
    unit = "\n".join(b for b in _blocks(asm, "mm_nt__unit"))
    counts = {w: unit.count(w) for w in ("vunpcklps", "vunpckhps", "vunpcklpd", "vunpckhpd", "vperm2f128",
                                         "vinsertf128")}
    assert len(set(counts.values())) == 1 and counts["vunpcklps"] >= 8, counts
    assert "vgather" not in unit


def _loads_outside(body, tensor: str, loop_prefix: str, inside: bool = False) -> list:
    """Loads of `tensor` in `body` that no loop named `loop_prefix...` encloses."""
    found = []
    for s in body:
        within = inside or (isinstance(s, ir.For) and s.name.startswith(loop_prefix))
        if not within:
            found += [e for x in stmt_exprs(s) for e in walk_expr(x)
                      if isinstance(e, ir.Load) and e.tensor.name == tensor]
        for child in _children(s):
            found += _loads_outside(child, tensor, loop_prefix, within)
    return found


def _children(s) -> list:
    if isinstance(s, ir.For):
        return [s.body]
    if isinstance(s, ir.If):
        return [s.then, s.orelse]
    return []


def test_small_products_pack_b_stored_by_rows_of_k():
    """Small products read B in place, unpacked, where its rows run along n.
    Stored by rows of K, each vector of B would be put together lane by lane
    (64^3 x @ W.T on Zen 4: 18.6 us, against 6.6 for x @ W): such a B is
    always packed, by transposes, and read only by the pack."""
    kernel = compile_source(Source("nt.tk", NT), CompileOptions(**HASWELL), stop_after="schedule").program.kernels[0]
    assert not _loads_outside(kernel.body, "w", "pack.B")
    gemm = compile_source(Source("gemm.tk", GEMM), CompileOptions(**HASWELL), stop_after="schedule").program.kernels[0]
    assert _loads_outside(gemm.body, "B", "pack.B"), "the unpacked path of a plain matmul reads B in place"


def test_a_b_stored_by_rows_of_k_packs_without_gathers():
    """x @ W.T on AVX-512's 6 x 64 tile: each whole 16 x 16 block of the
    strip's four vectors is read row by row and transposed in registers; a
    loop over all four left two of them as gathers (transpose_loads takes
    two blocks a loop)."""
    job = compile_source(Source("nt.tk", NT), CompileOptions(triple="x86_64-unknown-linux-gnu", cpu="znver4"),
                         stop_after="guard")
    kernel = job.program.kernels[0]
    blocked = [s for s in walk_stmts(kernel.body) if isinstance(s, ir.For) and s.name == "pack.B.k" and s.step == 16]
    assert blocked
    loads = [n for loop in blocked for s in walk_stmts(loop.body) for e in stmt_exprs(s) for n in walk_expr(e)
             if isinstance(n, ir.Load) and n.tensor.name == "w"]
    assert len(loads) == 4 * 16  # 64 rows of 16 k, read as rows
    assert not [x for x in loads if any(isinstance(y, ir.Ramp) for i in x.indices[:-1] for y in walk_expr(i))]


@pytest.mark.parametrize("cpu, fmas, rows", [("haswell", 12, 6), ("rocketlake", 16, 8)])
def test_unpacked_rows_keep_their_own_addresses(cpu, fmas, rows):
    """The unpacked whole tile's k loop (AVX2's 6 x 16, AVX-512's 8 x 32)
    reads each row of A from its own address register
    (`microkernel.OWN_ADDRESSES_ROWS`): the loop's integer work is its
    counter and B's address. Left to LLVM, row r + 1's address was made
    from row r's in the loop, one add per row per k step."""
    asm = compile_source(Source("gemm.tk", GEMM), CompileOptions(triple="x86_64-unknown-linux-gnu", cpu=cpu),
                         stop_after="asm").asm
    loops = [b for b in single_block_loops(asm, "gemm__unit") if b.count("vfmadd231ps") == fmas
             and b.count("vbroadcastss") == rows and "{%k" not in b and "vmaskmov" not in b
             and "(%rsp)" not in b]
    own = [b for b in loops if len(set(re.findall(r"vbroadcastss\t\((%\w+)", b))) == rows]
    assert own, "no whole-tile loop of the unpacked path"
    for block in own:
        integer = re.findall(r"\n\t(?:add|lea|inc|sub|dec)q\t", block)
        assert len(integer) <= 2, f"row addresses built in the loop:\n{block}"
