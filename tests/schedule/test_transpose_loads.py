"""transpose_loads: a vectorized loop's strided loads read as rows and
transposed in registers. The loop IR must show the shuffles and no gather
left; native code (whole-register and piecewise transposes) and the
reference interpreter must both give numpy's transpose; loops the pass must
not touch keep their gathers."""

import numpy as np
import pytest

from dsl.lowering import ir
from dsl.lowering.interpret import run_kernel
from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts
from dsl.lowering.vector import lanes_of

from tk_library import compile_to, load_library

TILES = """
@schedule(reorder(ib, jb, il, jl), vectorize(jl), parallel(ib))
def tiles(X: {t}[JB, 16, IB, 16], Y: {t}[IB, 16, JB, 16]):
    Y[ib, il, jb, jl] = X[jb, jl, ib, il]
"""

# Two transposed operands, the loop variable in the value, 32 iterations (two steps of 16).
TWO = """
@schedule(reorder(ib, jb, il, jl), vectorize(jl))
def two(X: i32[JB, 16, IB, 32], Z: i32[JB, 16, IB, 32], Y: i32[IB, 32, JB, 16]):
    Y[ib, il, jb, jl] = X[jb, jl, ib, il] - 3 * Z[jb, jl, ib, il] + i32(il)
"""

MASKED = """
@schedule(tile(i, j, 16, 16, tail=mask), vectorize(j.inner))
def masked(X: f32[B, A], Y: f32[A, B]):
    Y[i, j] = X[j, i]
"""

ODD = """
@schedule(reorder(ib, jb, il, jl), vectorize(jl))
def odd(X: f32[JB, 16, IB, 24], Y: f32[IB, 24, JB, 16]):
    Y[ib, il, jb, jl] = X[jb, jl, ib, il]
"""

IN_PLACE = """
@options(inplace=True)
@schedule(reorder(ib, jb, il, jl), vectorize(jl))
def in_place(X: f32[JB, 16, IB, 16], Y: f32[IB, 16, JB, 16]):
    Y[ib, il, jb, jl] = X[jb, jl, ib, il]
"""


def _loads(kernel: ir.Kernel) -> list[ir.Load]:
    return [n for s in walk_stmts(kernel.body) for e in stmt_exprs(s) for n in walk_expr(e)
            if isinstance(n, ir.Load)]


def _gathers(kernel: ir.Kernel) -> list[ir.Load]:
    """Vector loads whose lanes move along an axis other than the last."""
    return [n for n in _loads(kernel) if lanes_of(n) > 1 and any(lanes_of(i) > 1 for i in n.indices[:-1])]


def _shuffles(kernel: ir.Kernel) -> int:
    return sum(isinstance(n, ir.Shuffle) for s in walk_stmts(kernel.body) for e in stmt_exprs(s)
               for n in walk_expr(e))


@pytest.mark.parametrize("cpu, rounds", [("znver4", 4 * 16), ("znver3", 4 * (3 * 8 + 4))])
def test_gathers_become_row_loads_and_shuffles(cpu, rounds):
    kernel = compile_to(TILES.format(t="f32"), "schedule", cpu=cpu).program.kernels[0]
    assert not _gathers(kernel)
    # AVX-512: one 16 x 16 transpose, 4 rounds of 16 shuffles. AVX2: four 8 x 8
    # pieces (3 rounds of 8 each) and 16 columns joined from two halves.
    assert _shuffles(kernel) == rounds
    assert all(lanes_of(n) in (1, 16 if cpu == "znver4" else 8) for n in _loads(kernel))


@pytest.mark.parametrize("text", [MASKED, ODD, IN_PLACE])
def test_loops_it_does_not_apply_to_keep_their_gathers(text):
    kernel = compile_to(text, "schedule").program.kernels[0]
    assert _gathers(kernel) and not _shuffles(kernel)


@pytest.mark.parametrize("cpu", ["znver4", "znver3"])
@pytest.mark.parametrize("dtype, t", [(np.uint8, "u8"), (np.int16, "i16"), (np.float32, "f32"),
                                      (np.float64, "f64")])
def test_native_transposes_equal_numpy(dtype, t, cpu):
    lib = load_library(TILES.format(t=t), cpu=cpu)
    rng = np.random.default_rng(7)
    a, b = 48, 32
    x = (rng.standard_normal((b, a)) * 100).astype(dtype)  # X[j, i]; Y = X.T
    y = np.zeros((a, b), dtype)
    lib.tiles(x.reshape(b // 16, 16, a // 16, 16), y.reshape(a // 16, 16, b // 16, 16))
    np.testing.assert_array_equal(y, x.T)


def test_interpreter_runs_the_shuffles_as_native_code_does():
    rng = np.random.default_rng(3)
    x = rng.integers(-1000, 1000, size=(2, 16, 3, 32), dtype=np.int32)
    z = rng.integers(-1000, 1000, size=(2, 16, 3, 32), dtype=np.int32)
    want = (x - 3 * z + np.arange(32, dtype=np.int32)[None, None, None, :]).transpose(2, 3, 0, 1)
    kernel = compile_to(TWO, "schedule").program.kernels[0]
    assert not _gathers(kernel) and _shuffles(kernel)
    interpreted = np.zeros((3, 32, 2, 16), np.int32)
    run_kernel(kernel, {"X": x, "Z": z, "Y": interpreted})
    native = np.zeros_like(interpreted)
    load_library(TWO).two(x, z, native)
    np.testing.assert_array_equal(interpreted, want)
    np.testing.assert_array_equal(native, want)


# Each row of a tile of Y from where it reaches a line: the ramp shifted by (12 il) % 16.
SHIFTED = """
@schedule(vectorize(jl, {n}))
def shifted(X: {t}[J, I], Y: {t}[I, J]):
    for jb in range(J // {n} - 1):
        for ib in range(I // {n}):
            for il in range({n}):
                for jl in range({n}):
                    Y[{n} * ib + il, {n} * jb + ({m} * il) % {n} + jl] = X[{n} * jb + ({m} * il) % {n} + jl, {n} * ib + il]
"""


def _shifted_tile_reference(x: np.ndarray, m: int, n: int) -> np.ndarray:
    """What SHIFTED writes into zeros: row i from column (m i) % n, n columns per jb."""
    cols, rows = x.shape
    y = np.zeros((rows, cols), x.dtype)
    for i in range(rows - rows % n):
        d = (m * i) % n
        span = slice(d, d + n * (cols // n - 1))
        y[i, span] = x[span, i]
    return y


@pytest.mark.parametrize("t, n, m, cpu", [("u32", 16, 12, "znver4"), ("u32", 16, 1, "znver4"),
                                          ("u32", 16, 15, "znver4"), ("u32", 16, 8, "znver4"),
                                          ("u64", 8, 3, "znver4"), ("u64", 8, 6, "znver4"),
                                          ("u32", 16, 12, "znver3"), ("u32", 16, 7, "znver3")])
def test_shifted_rows_read_two_blocks_and_align_each_column(t, n, m, cpu):
    """A ramp shifted by a constant d(il) < W per iteration: W + max d rows
    read, transposed (in pieces of a register's lanes: 8 of the 16 on
    AVX2), and one two-source shuffle per register of a shifted column
    (lanes d ... d + W - 1 of the column's pieces end to end); no gather
    left. Native code and the interpreter write exactly the shifted rows."""
    text = SHIFTED.format(t=t, m=m, n=n)
    kernel = compile_to(text, "schedule", cpu=cpu).program.kernels[0]
    lanes = n if cpu == "znver4" else 8  # of a register
    shifts = [(m * il) % n for il in range(n)]
    assert not _gathers(kernel)
    loads = [e for e in _loads(kernel) if lanes_of(e) == lanes]
    assert len({repr(e.indices) for e in loads}) == (n + max(shifts)) * n // lanes
    aligns = [e for s in walk_stmts(kernel.body) for x in stmt_exprs(s) for e in walk_expr(x)
              if isinstance(e, ir.Shuffle) and e.mask == tuple(range(e.mask[0], e.mask[0] + lanes)) and e.mask[0] > 0]
    assert len(aligns) == sum(n // lanes for d in shifts if d % lanes)
    rng = np.random.default_rng(m)
    dtype = np.dtype(t.replace("u", "uint"))
    x = rng.integers(0, np.iinfo(dtype).max, size=(70, 40), dtype=dtype)  # J = 70, I = 40
    want = _shifted_tile_reference(x, m, n)
    native = np.zeros((40, 70), dtype)
    load_library(text, cpu=cpu).shifted(x, native)
    np.testing.assert_array_equal(native, want)
    interpreted = np.zeros_like(native)
    run_kernel(kernel, {"X": x, "Y": interpreted})
    np.testing.assert_array_equal(interpreted, want)


def test_a_shifted_ramp_is_proven_in_bounds_only_with_room_for_its_shift():
    """`16 jb + (12 il) % 16 + jl` reaches 16 jb + 30: proven below J for
    jb < J // 16 - 1 (vector code has no per-lane checks), not for jb < J // 16."""
    from dsl.grammar.diagnostics import CompileError

    compile_to(SHIFTED.format(t="u32", m=12, n=16), "guard", cpu="znver4")
    loose = SHIFTED.format(t="u32", m=12, n=16).replace("range(J // 16 - 1)", "range(J // 16)")
    with pytest.raises(CompileError, match="the access to 'X' .* is not proven in bounds"):
        compile_to(loose, "guard", cpu="znver4")
