"""The packed micro-kernel's k loop carries the hint `unroll=2` for f32 on
AVX-512 (`microkernel.K_UNROLL`), which the backend passes to LLVM as
`llvm.loop.unroll.count`; other tiles, types and machines keep LLVM's own
choice, and every K (odd ones leave a remainder) gives numpy's product."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tk_library import compile_to, load_library

import dsl
from dsl.lowering.printer import format_kernel

MATMUL = """
@options(reassociate=True)
def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])
"""
MATMUL64 = """
@options(reassociate=True)
def mm64(A: f64[M, K], B: f64[K, N], C: f64[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])
"""


def micro_loops(cpu: str) -> dict[str, list[str]]:
    """Each kernel's `for` headers of its micro-kernel loops, after scheduling for `cpu`."""
    out = {}
    for text in (MATMUL, MATMUL64):
        job = compile_to(text, "schedule", triple="x86_64-unknown-linux-gnu", cpu=cpu)
        out.update({k.name: re.findall(r"for .* name=k\.micro.*", format_kernel(k)) for k in job.program.kernels})
    return out


def test_the_packed_f32_tile_unrolls_by_two_on_avx512():
    loops = micro_loops("skylake-avx512")["mm"]
    hinted = [x for x in loops if "unroll=2" in x]
    # The packed path's 6 x 64 and its edges of 2 and 3 vectors are hinted;
    # its one-vector edge and the unpacked path's loops are not.
    assert hinted and len(hinted) < len(loops)


@pytest.mark.parametrize("cpu, kernel", [("haswell", "mm"), ("skylake-avx512", "mm64")])
def test_no_hint_where_it_was_not_measured_or_registers_are_short(cpu, kernel):
    assert not any("unroll=2" in x for x in micro_loops(cpu)[kernel])


def test_only_the_tall_avx2_tile_keeps_one_copy():
    """AVX2's 14 x 8 tile (products of at most 8 columns) asks LLVM not to
    unroll its k loop; no loop of AVX-512's tiles does."""
    loops = micro_loops("haswell")["mm"]
    one_copy = [x for x in loops if "unroll=1" in x]
    assert one_copy and len(one_copy) < len(loops)  # the 14 x 8 strips' tiles; not the 6 x 16's
    assert not any("unroll=1" in x for cpu in ("skylake-avx512", "znver4") for x in micro_loops(cpu)["mm"])


def test_the_backend_passes_the_hint_to_llvm():
    job = compile_to(MATMUL, "llvm", triple="x86_64-unknown-linux-gnu", cpu="skylake-avx512", opt_level=0)
    assert re.search(r'!\{!"llvm\.loop\.unroll\.count", i32 2\}', str(job.llvm))


@pytest.fixture(scope="module")
def lib():
    return load_library(MATMUL)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("k", [65, 129, 300, 513, 1025])
def test_packed_products_with_odd_k_match_numpy(lib, k, threads):
    """B of 256 KiB and more is packed; K = 513 and 1025 leave a panel of
    one row past kc = 512 (one trip of the unrolled loop, its remainder)."""
    rng = np.random.default_rng(k)
    a = rng.standard_normal((203, k), np.float32)
    b = rng.standard_normal((k, 1030), np.float32)
    c = np.full((203, 1030), np.nan, np.float32)
    dsl.set_num_threads(threads)
    try:
        lib.mm(a, b, c)
    finally:
        dsl.set_num_threads(0)
    want = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(c, want, rtol=1e-4, atol=1e-4 * np.sqrt(k))
