"""Exact-size specialization: dims become constants, checked at entry."""

import subprocess
import sys

import numpy as np
import pytest

import dsl
from dsl import f32, M, N, K  # noqa: F401  (annotations)
from dsl.grammar.diagnostics import Source
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

MATMUL = """
def matmul(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])
"""


def test_dims_become_constants_and_entry_checks():
    opts = CompileOptions(specialize=(("K", 64), ("M", 8), ("N", 64)))
    kernel = compile_source(Source("t.tk", MATMUL), opts, stop_after="loops").program.kernels[0]
    text = format_kernel(kernel)
    assert "check shape(A, 0) == 8" in text and "check shape(A, 1) == 64" in text
    assert "shape(A, 0)\n" not in text  # no dim is bound from a shape any more
    assert any("specialized for M = 8" in c.message for c in kernel.checks)


@dsl.kernel(specialize=True)
def mm_exact(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])  # noqa: F821  (free indices)


@pytest.mark.parametrize("m, k, n", [(64, 64, 64), (7, 13, 5), (64, 64, 64)])
def test_jit_builds_per_exact_sizes(m, k, n):
    rng = np.random.default_rng(m + k + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.empty((m, n), np.float32)
    mm_exact(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5)
    assert ((("K", k), ("M", m), ("N", n)), None) in mm_exact._shaped._callers


def test_bad_call_still_reports_like_a_plain_kernel():
    a = np.ones((4, 3), np.float32)
    with pytest.raises(ValueError, match="'B' axis 0 must equal K"):
        mm_exact(a, np.ones((5, 2), np.float32), np.empty((4, 2), np.float32))


def test_dslc_specialized_library_refuses_other_sizes(tmp_path):
    src = tmp_path / "mm.tk"
    src.write_text(MATMUL)
    so = tmp_path / "mm.so"
    subprocess.run([sys.executable, "-m", "dsl.cli", str(src), "--specialize", "M=4,N=4,K=4", "-o", str(so)],
                   check=True)
    lib = dsl.load(so)
    a = np.eye(4, dtype=np.float32)
    c = np.empty((4, 4), np.float32)
    lib.matmul(a, a, c)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(ValueError, match="specialized for M = 4"):
        lib.matmul(np.ones((5, 4), np.float32), a, np.empty((5, 4), np.float32))


def test_dslc_bad_specialize_is_a_usage_error(tmp_path):
    src = tmp_path / "mm.tk"
    src.write_text(MATMUL)
    run = subprocess.run([sys.executable, "-m", "dsl.cli", str(src), "--specialize", "M=x", "-o",
                          str(tmp_path / "x.so")], capture_output=True, text=True)
    assert run.returncode == 2 and "--specialize" in run.stderr and "Traceback" not in run.stderr
