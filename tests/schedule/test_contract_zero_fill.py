"""`C = 0` then a contraction adding into all of C: the fill is folded into
the sum (`contract_zero_fill`) only when that gives the same C; every other
kernel below keeps its fill and gets what its loops say."""

from __future__ import annotations

import numpy as np
import pytest
from tk_library import compile_to, load_library

from dsl.lowering.printer import format_kernel

KERNELS = """
@options(reassociate=True)
def k_loop(A: f32[M, C, K], B: f32[C, K, N], Out: f32[M, N]):
    Out[m, n] = 0.0
    for c in range(C):
        Out[m, n] += sum(A[m, c, k] * B[c, k, n])

@options(reassociate=True)
def plain(A: f32[M, K], B: f32[K, N], Out: f32[M, N]):
    Out[m, n] = 0.0
    Out[m, n] += sum(A[m, k] * B[k, n])

@options(reassociate=True)
def ones(A: f32[M, K], B: f32[K, N], Out: f32[M, N]):
    Out[m, n] = 1.0
    Out[m, n] += sum(A[m, k] * B[k, n])

@options(reassociate=True)
def part(A: f32[M, K], B: f32[K, N], Out: f32[M, N]):
    for i in range(M - 1):
        for j in range(N):
            Out[i, j] = 0.0
    Out[m, n] += sum(A[m, k] * B[k, n])

@options(reassociate=True)
def other(A: f32[M, K], B: f32[K, N], Out: f32[M, N], D: f32[M, N]):
    D[m, n] = 0.0
    Out[m, n] += sum(A[m, k] * B[k, n])

def in_order(A: f32[M, K], B: f32[K, N], Out: f32[M, N]):
    Out[m, n] = 0.0
    Out[m, n] += sum(A[m, k] * B[k, n])
"""


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def test_only_a_whole_zero_fill_before_an_added_sum_folds():
    """The fill is gone where it folds (the sum stored, not added); a fill of
    ones, of part of C, of another tensor, or without reassociate stays."""
    job = compile_to(KERNELS, "schedule")
    text = {k.name: format_kernel(k) for k in job.program.kernels}
    for name in ("k_loop", "plain"):
        assert "Out[m, n] = 0.0" not in text[name] and "Out[m, n] = Out[m, n] +" not in text[name], name
    assert "Out[i, j] = 0.0" in text["part"]
    assert "D[m, n] = 0.0" in text["other"]
    assert "Out[m, n] = 1.0" in text["ones"] and "Out[m, n] = 0.0" in text["in_order"]


def operands(m, k, n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)


@pytest.mark.parametrize("size", [(1, 1, 1), (7, 0, 5), (64, 48, 80), (300, 96, 48)])
def test_folded_sums_equal_numpys(lib, size):
    m, k, n = size
    a, b = operands(m, k, n)
    out = np.full((m, n), np.nan, np.float32)
    lib.plain(a, b, out)
    assert np.allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-4)
    blocks = 3
    a3 = np.repeat(a[:, None, :], blocks, axis=1).copy()
    b3 = np.repeat(b[None], blocks, axis=0).copy()
    out[...] = np.nan
    lib.k_loop(a3, b3, out)
    assert np.allclose(out, blocks * (a.astype(np.float64) @ b), rtol=1e-5, atol=1e-3)


def test_kernels_that_keep_their_fill(lib):
    a, b = operands(37, 20, 45, seed=1)
    want = a.astype(np.float64) @ b
    out = np.full((37, 45), np.nan, np.float32)
    lib.ones(a, b, out)
    assert np.allclose(out, 1 + want, rtol=1e-5, atol=1e-4)
    out[...] = 2.0
    lib.part(a, b, out)
    assert np.allclose(out[:-1], want[:-1], rtol=1e-5, atol=1e-4)
    assert np.allclose(out[-1], 2 + want[-1], rtol=1e-5, atol=1e-4)
    d = np.full((37, 45), np.nan, np.float32)
    out[...] = 3.0
    lib.other(a, b, out, d)
    assert np.all(d == 0) and np.allclose(out, 3 + want, rtol=1e-5, atol=1e-4)
