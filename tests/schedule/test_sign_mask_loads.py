"""Masked loads on x86 AVX without AVX-512 go by lane signs.

Where vectors have no mask registers (AVX2), a contiguous masked load whose
mask is `a < b` becomes AVX's own masked load, its mask the sign of the
saturated a - b (backends/llvm/vector_memory.py); AVX-512, SSE-only x86 and
other masks keep LLVM's generic masked load. The loads must read the same
lanes: built for znver3 (AVX2 code, which this x86-64 machine runs when it
has AVX2), every length around the vector width against numpy, with the
masked-off lanes reading as zero.
"""

import numpy as np
import pytest

from host_cpu import runs_avx2
from tk_library import compile_to, load_library

KERNELS = """
@schedule(vectorize(i, 8, tail=mask))
def affine_f32(x: f32[N], y: f32[N]):
    y[i] = x[i] * 2.0 + 1.0

@schedule(vectorize(i, 4, tail=mask))
def affine_f64(x: f64[N], y: f64[N]):
    y[i] = x[i] * 2.0 + 1.0

@schedule(vectorize(j, 8, tail=mask))
def halves(x: f32[M, N], y: f32[M, N]):
    y[i, j] = x[i, j] * 0.5

@schedule(vectorize(i, 4, tail=mask))
def narrow_f32(x: f32[N], y: f32[N]):
    y[i] = x[i] - 3.0
"""

on_avx2 = pytest.mark.skipif(not runs_avx2(), reason="runs code built for znver3 (AVX2)")


@pytest.mark.parametrize("cpu, sign_loads", [("znver3", True), ("haswell", True), ("sandybridge", True),
                                             ("skylake-avx512", False), ("x86-64", False)])
def test_which_targets_load_by_lane_signs(cpu, sign_loads):
    ir = str(compile_to(KERNELS, "llvm", triple="x86_64-unknown-linux-gnu", cpu=cpu).llvm)
    assert ("llvm.x86.avx.maskload" in ir) == sign_loads
    if sign_loads:
        for name in ("ps.256", "pd.256", "ps("):  # 8 f32, 4 f64, 4 f32 lanes
            assert f"llvm.x86.avx.maskload.{name}" in ir
        assert "llvm.masked.load.v8f32" not in ir


def test_aarch64_keeps_the_generic_masked_load():
    ir = str(compile_to(KERNELS, "llvm", triple="aarch64-unknown-linux-gnu").llvm)
    assert "llvm.x86" not in ir and "llvm.masked.load" in ir


@pytest.fixture(scope="module")
def avx2():
    return load_library(KERNELS, cpu="znver3")


@on_avx2
@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 33])
def test_tails_read_what_they_should(avx2, n):
    rng = np.random.default_rng(n)
    for name, dtype in (("affine_f32", np.float32), ("affine_f64", np.float64)):
        x = rng.standard_normal(n).astype(dtype)
        y = np.full(n + 1, np.nan, dtype)
        getattr(avx2, name)(x, y[:n])
        np.testing.assert_array_equal(y[:n], x * dtype(2) + dtype(1))
        assert np.isnan(y[n])  # nothing written past the end
    x = rng.standard_normal(n).astype(np.float32)
    y = np.empty(n, np.float32)
    avx2.narrow_f32(x, y)
    np.testing.assert_array_equal(y, x - np.float32(3))


@on_avx2
@pytest.mark.parametrize("shape", [(3, 5), (4, 8), (2, 13), (1, 1), (5, 0)])
def test_rows_with_tails(avx2, shape):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(np.float32)
    y = np.empty(shape, np.float32)
    avx2.halves(x, y)
    np.testing.assert_array_equal(y, x * np.float32(0.5))
