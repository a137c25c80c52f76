"""pack(T, L): an input's region copied into scratch in the order L reads it."""

import numpy as np
import pytest
from tk_library import compile_to, load_library

from dsl.grammar.diagnostics import CompileError
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel

MMT = """
@schedule(split(j, 16, tail=mask), reorder(j.outer, i, k, j.inner), pack(B, i){extra})
def mmt(A: f32[M, K], B: f32[N, K], C: f32[M, N]):
    for i in range(M):
        for k in range(K):
            for j in range(N):
                C[i, j] += A[i, k] * B[j, k]
"""


def test_transposed_operand_packs_into_rows():
    text = format_kernel(compile_to(MMT.format(extra=""), "schedule").program.kernels[0])
    assert "alloc B.packed: f32[16 * K]" in text
    # The innermost loop (j.inner) walks the buffer's last axis: unit stride.
    assert "B.packed[j.outer * 16 + j.inner - B.lo0 + (k - B.lo1) * 16]" in text


@pytest.mark.parametrize("extra", ["", ", parallel(j.outer)"])
@pytest.mark.parametrize("m, k, n", [(0, 3, 5), (1, 1, 1), (3, 7, 16), (5, 9, 33), (17, 4, 50)])
def test_results(extra, m, k, n):
    text = MMT.format(extra=extra)
    lib = load_library(text)
    rng = np.random.default_rng(m * 100 + n)
    a = rng.integers(-4, 4, (m, k)).astype(np.float32)
    b = rng.integers(-4, 4, (n, k)).astype(np.float32)
    c = np.ones((m, n), np.float32)
    lib.mmt(a, b, c)
    np.testing.assert_array_equal(c, 1 + a @ b.T)  # small integers: exact
    ref = np.ones((m, n), np.float32)
    run_kernel(compile_to(text, "guard").program.kernels[0], {"A": a, "B": b, "C": ref})
    np.testing.assert_array_equal(ref, c)


def test_parallel_loop_gets_one_buffer_per_thread():
    text = format_kernel(compile_to(MMT.format(extra=", parallel(j.outer)"), "schedule").program.kernels[0])
    lines = [line.strip() for line in text.splitlines()]
    assert lines.index("alloc B.packed: f32[16 * K] else #5") == lines.index(
        next(x for x in lines if x.startswith("for j.outer"))) + 1


@pytest.mark.parametrize("schedule, message", [
    ("pack(C, i)", "'C' is written by the kernel; only inputs are packed"),
    ("pack(X, i)", "no tensor named 'X'"),
    ("pack(B, nope)", "no loop named 'nope'"),
])
def test_refusals(schedule, message):
    text = MMT.format(extra="").replace("pack(B, i)", schedule)
    with pytest.raises(CompileError) as info:
        compile_to(text, "schedule")
    assert message in info.value.render()


PREFIX = """
@schedule({schedule})
def prefix_sums(x: f32[N], out: f32[N]):
    for i in range(N):
        acc = 0.0
        for j in range(i + 1):
            acc += x[j]
        out[i] = acc
"""


def test_region_of_a_triangular_nest_is_the_whole_range():
    text = PREFIX.format(schedule="pack(x, i)")
    printed = format_kernel(compile_to(text, "schedule").program.kernels[0])
    assert printed.index("alloc x.packed: f32[N]") < printed.index("for x.p0")
    x = np.arange(1, 12, dtype=np.float32)
    out = np.empty_like(x)
    load_library(text).prefix_sums(x, out)
    np.testing.assert_array_equal(out, np.cumsum(x))


def test_region_that_grows_with_an_outer_loop_is_refused():
    text = PREFIX.format(schedule="pack(x, j)")
    with pytest.raises(CompileError) as info:
        compile_to(text, "schedule")
    assert "cannot pack 'x' at 'j': the size of the region of axis 0" in info.value.render()
