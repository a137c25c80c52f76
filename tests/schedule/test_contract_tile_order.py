"""The order of the packed path's tiles: row by row where B's strips stay in
L1 (AVX2, NEON, f64), column by column where they stream from L2 (AVX-512's
6 x 64 f32 tile); see `contract.rows_first`.

The order is checked in the loop IR; the row-by-row tiles run built for
znver3 (AVX2 code, which this x86-64 machine runs when it has AVX2):
test_contract_order.py checks their sums bit for bit, here f64, a fused
epilogue and a sum added to C against numpy. Also the unpacked edge tiles,
which mask only the vector of B's columns that may pass N.
"""

import numpy as np
import pytest

from host_cpu import runs_avx2
from tk_library import call_on_threads, compile_to, load_library

from dsl.lowering import ir
from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts

KERNELS = """
def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

@schedule(contract(m, mc=12, kc=3, nc=24))
def mm_f64(A: f64[M, K], B: f64[K, N], C: f64[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

@schedule(contract(m, mc=12, kc=7, nc=32))
def mm_relu(A: f32[M, K], B: f32[K, N], bias: f32[N], C: f32[M, N]):
    C[m, n] = max(sum(A[m, k] * B[k, n]) + bias[n], 0.0)

@options(reassociate=True)
@schedule(contract(m, mc=12, kc=7, nc=32))
def brgemm_acc(A: f32[R, M, K], B: f32[R, K, N], C: f32[M, N]):
    C[m, n] += sum(A[r, m, k] * B[r, k, n])
"""

# (M, K, N): a tile's edges in M and N, K across panels, several strips of
# tiles each way and M blocks for two threads.
SIZES = [(1, 1, 1), (7, 13, 9), (6, 16, 16), (13, 29, 47), (61, 40, 131), (150, 70, 100)]

on_avx2 = pytest.mark.skipif(not runs_avx2(), reason="runs code built for znver3 (AVX2)")


def _strip_loops(cpu: str, kernel: str) -> list[str]:
    """The strip loops of `kernel`'s packed path (in its M blocks), outer first."""
    program = compile_to(KERNELS, "schedule", cpu=cpu, kernels=frozenset({kernel})).program
    body = next(k for k in program.kernels if k.name == kernel).body
    block = next(s for s in walk_stmts(body) if isinstance(s, ir.For) and s.name == "m.block")
    return [s.name for s in walk_stmts(block.body) if isinstance(s, ir.For) and s.name in ("m.strip", "n.strip")]


@pytest.mark.parametrize("cpu, kernel, order", [
    ("znver3", "mm", ["m.strip", "n.strip"]),                 # AVX2: 6 x 16 f32, 64-byte strips
    ("znver3", "mm_f64", ["m.strip", "n.strip"]),
    ("skylake-avx512", "mm_f64", ["m.strip", "n.strip"]),     # two vectors of 8 f64: 128 bytes
    ("skylake-avx512", "mm", ["n.strip", "m.strip"]),         # 6 x 64 f32: B's strips stream
])
def test_tiles_go_by_rows_where_b_strips_stay_in_l1(cpu, kernel, order):
    assert _strip_loops(cpu, kernel) == order


@pytest.fixture(scope="module")
def avx2():
    return load_library(KERNELS, cpu="znver3")


def operands(shape_a, shape_b, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_a).astype(dtype), rng.standard_normal(shape_b).astype(dtype)


@on_avx2
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", SIZES)
def test_rows_first_f64(avx2, size, threads):
    m, k, n = size
    a, b = operands((m, k), (k, n), 5 * m + k + n, np.float64)
    c = np.full((m, n), np.nan)
    call_on_threads(avx2, threads, "mm_f64", a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-12, atol=1e-12 * max(1, k))


@on_avx2
@pytest.mark.parametrize("size", SIZES)
def test_rows_first_epilogue_and_accumulation(avx2, size):
    m, k, n = size
    rng = np.random.default_rng(m + k + n)
    a, b = operands((m, k), (k, n), m * k + n)
    bias = rng.standard_normal(n).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    call_on_threads(avx2, 2, "mm_relu", a, b, bias, c)
    want = np.maximum(a.astype(np.float64) @ b + bias, 0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * max(1, k) ** 0.5)
    ar, br = operands((3, m, k), (3, k, n), m + k)
    start = rng.standard_normal((m, n)).astype(np.float32)
    c = start.copy()
    call_on_threads(avx2, 2, "brgemm_acc", ar, br, c)
    want = start + np.einsum("rmk,rkn->mn", ar.astype(np.float64), br)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * max(1, 3 * k) ** 0.5)



def _b_loads(stmts) -> list[ir.Load]:
    return [e for s in walk_stmts(stmts) for x in stmt_exprs(s) for e in walk_expr(x)
            if isinstance(e, ir.Load) and e.tensor.name == "B"]


@pytest.mark.parametrize("cpu, lanes", [("znver3", 8), ("skylake-avx512", 16)])
def test_edge_tiles_mask_only_the_vector_that_may_pass_n(cpu, lanes):
    """Past the test that sends a last strip of at most one vector of columns
    to the narrower variant (`N - js <= lanes`), the unpacked tiles of two
    vectors mask only their last one of B's columns (contract_direct._direct_strips)."""
    program = compile_to(KERNELS, "schedule", cpu=cpu, kernels=frozenset({"mm"})).program
    body = next(k for k in program.kernels if k.name == "mm").body
    tests = [s for s in walk_stmts(body) if isinstance(s, ir.If) and isinstance(s.cond, ir.Binary)
             and s.cond.op == "<=" and s.cond.rhs == ir.Const(lanes, s.cond.rhs.type)
             and isinstance(s.cond.lhs, ir.Binary) and s.cond.lhs.op == "-"
             and getattr(s.cond.lhs.lhs, "sym", None) is not None and s.cond.lhs.lhs.sym.name == "N"]
    assert tests
    for s in tests:
        loads = _b_loads(s.orelse)
        masked = [x for x in loads if x.mask is not None]
        assert masked and all(not isinstance(x.mask.lhs.base, ir.Var) for x in masked)  # js + lanes, not js
        assert any(x.mask is None and isinstance(x.indices[-1].base, ir.Var) for x in loads)
