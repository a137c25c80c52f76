"""The contraction pass keeps each C element's sum in the plain loop's order.

Without `@options(reassociate=True)`, the packed and unpacked micro-kernels
must add the products of each element over k from 0 in order, across every
K panel, the M blocks and C's column parts alike. Under
`@options(contract=False)` every multiply and add rounds on its own, so the
result is defined bit for bit: numpy's float32 loop over k below. (A change
that summed each K panel apart and then added it to C passed every test that
compares within a tolerance.) On this machine's tiles and on znver3's, which
go row by row where AVX-512's f32 tiles go column by column.
"""

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from host_cpu import runs_avx2
from tk_library import call_on_threads, load_library

KERNELS = """
@options(contract=False)
def mm_exact(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

@options(contract=False)
@schedule(contract(m, mc=12, kc=5, nc=32))
def mm_exact_blocks(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

@options(contract=False)
def bmm_exact(A: f32[Bt, M, K], B: f32[Bt, K, N], C: f32[Bt, M, N]):
    C[b, m, n] = sum(A[b, m, k] * B[b, k, n])

@options(contract=False)
def bmm_shared_a_exact(A: f32[M, K], B: f32[Bt, K, N], C: f32[Bt, M, N]):
    C[b, m, n] = sum(A[m, k] * B[b, k, n])
"""

# (M, K, N) under the automatic schedule: K of three panels (kc = 512) on the
# packed path in M blocks, short (column parts) and wide; a small product read
# in place; a K of one panel and one element.
SIZES = [(300, 1100, 80), (40, 1100, 300), (200, 600, 1100), (7, 13, 9), (33, 512, 70), (5, 1, 700),
         (64, 64, 64), (17, 9, 48),  # a last strip of rows over whole columns (AVX2: B unmasked)
         (61, 61, 61), (30, 20, 77)]  # last columns past the narrower tile's: only the last vector masked


@pytest.fixture(scope="module", params=["host", "znver3"])
def lib(request):
    """The kernels for this machine, and for znver3, whose AVX2 tiles go row
    by row (`contract.rows_first`; AVX-512's f32 tiles go column by column)."""
    if request.param == "host":
        return load_library(KERNELS)
    if not runs_avx2():
        pytest.skip("this machine does not run code built for znver3")
    return load_library(KERNELS, cpu="znver3")


def in_order(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """sum over k of a[..., k] * b[..., k, :], in order from k = 0, each
    product and sum rounded to float32."""
    acc = np.zeros((*a.shape[:-1], b.shape[-1]), np.float32)
    for k in range(a.shape[-1]):
        acc = acc + a[..., k, None] * b[..., k, None, :]
    return acc


def operands(shape_a, shape_b, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(shape_a).astype(np.float32), rng.standard_normal(shape_b).astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", SIZES)
def test_automatic_schedule_sums_in_order(lib, size, threads):
    m, k, n = size
    a, b = operands((m, k), (k, n), m + k + n)
    c = np.full((m, n), np.nan, np.float32)
    call_on_threads(lib, threads, "mm_exact", a, b, c)
    np.testing.assert_array_equal(c, in_order(a, b))


def test_batch_sums_in_order(lib):
    a, b = operands((3, 20, 700), (3, 700, 90), 1)
    c = np.full((3, 20, 90), np.nan, np.float32)
    lib.bmm_exact(a, b, c)
    np.testing.assert_array_equal(c, in_order(a, b))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [1, 5])
def test_batch_with_a_shared_operand_sums_in_order(lib, batch, threads):
    """A packed once per thread's run of products (`contract_batch`)."""
    a, b = operands((70, 600), (batch, 600, 90), batch)
    c = np.full((batch, 70, 90), np.nan, np.float32)
    call_on_threads(lib, threads, "bmm_shared_a_exact", a, b, c)
    np.testing.assert_array_equal(c, in_order(a, b))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(0, 30), st.integers(0, 23), st.integers(0, 70))
def test_small_blocks_sum_in_order(lib, m, k, n):
    """kc = 5: an element's sum crosses up to five K panels."""
    a, b = operands((m, k), (k, n), m * 1000 + k * 100 + n)
    c = np.full((m, n), np.nan, np.float32)
    lib.mm_exact_blocks(a, b, c)
    np.testing.assert_array_equal(c, in_order(a, b))
