"""interleave_stores: stores whose lanes step by k elements and together fill
a window become one contiguous store of their values interleaved by
shuffles. The loop IR must show one store of consecutive lanes; native code
(x86 and its AVX2 level) and the reference interpreter must give numpy's
transpose; groups the pass must not touch keep their stores."""

import numpy as np
import pytest

from dsl.lowering import ir
from dsl.lowering.interpret import run_kernel
from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts
from dsl.lowering.vector import lanes_of

from tk_library import compile_to, load_library

PLANES_TO_PIXELS = """
@schedule(vectorize(l), unroll(c))
def to_pixels(x: {t}[{c}, M, 16], y: {t}[M, {w}]):
    for m in range(M):
        for c in range({c}):
            for l in range(16):
                y[m, {c} * l + c] = x[c, m, l] {op}
"""

# Two channels of f32 pixels into y, one store each, `y[m, {index}] = {value}`.
TWO_STORES = """
@schedule(vectorize(l), unroll(c))
def two_stores(x: f32[2, M, 16], y: f32[M, {width}]):
    for m in range(M):
        for c in range(2):
            for l in range(16):
                y[m, {index}] = {value}
"""
# Two of three channels: the lanes leave holes, a plain store would overwrite them.
HOLES = TWO_STORES.format(width=48, index="3 * l + c", value="x[c, m, l]")
# The values read the tensor stored to: the pass does not move such stores.
READS_BACK = TWO_STORES.format(width=32, index="2 * l + c", value="x[c, m, l] + y[m, 2 * l + c]")

MASKED = """
@schedule(vectorize(l, 16, tail=mask), unroll(c))
def masked(x: f32[2, M, L], y: f32[M, L, 2]):
    for m in range(M):
        for c in range(2):
            for l in range(L):
                y[m, l, c] = x[c, m, l]
"""


def _stores(kernel: ir.Kernel) -> list[ir.Store]:
    return [s for s in walk_stmts(kernel.body) if isinstance(s, ir.Store)]


def _shuffles(kernel: ir.Kernel) -> int:
    return sum(isinstance(n, ir.Shuffle) for s in walk_stmts(kernel.body) for e in stmt_exprs(s)
               for n in walk_expr(e))


@pytest.mark.parametrize("c", [2, 3, 4])
def test_strided_stores_become_one_contiguous_store(c):
    text = PLANES_TO_PIXELS.format(t="f32", c=c, w=16 * c, op="")
    kernel = compile_to(text, "schedule").program.kernels[0]
    stores = _stores(kernel)
    assert len(stores) == 1 and lanes_of(stores[0].value) == 16 * c and _shuffles(kernel)
    assert isinstance(stores[0].indices[-1], ir.Ramp) and stores[0].indices[-1].stride == 1


@pytest.mark.parametrize("text", [HOLES, READS_BACK, MASKED])
def test_groups_it_does_not_apply_to_keep_their_stores(text):
    kernel = compile_to(text, "schedule").program.kernels[0]
    assert len(_stores(kernel)) >= 2 and not _shuffles(kernel)


@pytest.mark.parametrize("cpu", ["znver4", "znver3"])
@pytest.mark.parametrize("dtype, t", [(np.uint8, "u8"), (np.int16, "i16"), (np.float32, "f32"),
                                      (np.float64, "f64")])
@pytest.mark.parametrize("c", [2, 3])
def test_native_interleaves_equal_numpy(dtype, t, c, cpu):
    text = PLANES_TO_PIXELS.format(t=t, c=c, w=16 * c, op="")
    lib = load_library(text, cpu=cpu)
    x = (np.random.default_rng(c).standard_normal((c, 5 * 16)) * 100).astype(dtype)
    y = np.zeros((5 * 16, c), dtype)
    lib.to_pixels(x.reshape(c, 5, 16), y.reshape(5, 16 * c))
    np.testing.assert_array_equal(y, x.T)


def test_interpreter_runs_the_merged_store_as_native_code_does():
    text = PLANES_TO_PIXELS.format(t="i32", c=3, w=48, op="* 3 - i32(l)")
    x = np.random.default_rng(5).integers(-1000, 1000, size=(3, 4, 16), dtype=np.int32)
    want = (x * 3 - np.arange(16, dtype=np.int32)).transpose(1, 2, 0).reshape(4, 48)
    kernel = compile_to(text, "schedule").program.kernels[0]
    assert len(_stores(kernel)) == 1
    interpreted = np.zeros((4, 48), np.int32)
    run_kernel(kernel, {"x": x, "y": interpreted})
    native = np.zeros_like(interpreted)
    load_library(text).to_pixels(x, native)
    np.testing.assert_array_equal(interpreted, want)
    np.testing.assert_array_equal(native, want)
