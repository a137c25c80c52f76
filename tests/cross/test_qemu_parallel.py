"""Parallel loops on AArch64 under qemu: libgomp (the cross toolchain ships
libgomp1-arm64-cross as a dependency of its gcc) and the serial fallback of a
library linked without it; a matmul on transposed views through the packed
micro-kernel."""

from __future__ import annotations

import os
import subprocess

import numpy as np
from build import AARCH64, ROOT, assert_close, dslc_build
from harness import parse_header, run_case
import toolchain

from dsl.backends.header import header_text
from dsl.pipeline import compile_file
from dsl.options import CompileOptions

aarch64 = toolchain.aarch64  # the fixture the tests below take

BMM = ROOT / "tests" / "cross" / "kernels" / "bmm_pgrid.tk"
MATMUL = ROOT / "examples" / "matmul_index.tk"
WARNING = "libgomp not found"


def _needed(so) -> str:
    done = subprocess.run(["aarch64-linux-gnu-readelf", "-d", str(so)], capture_output=True, text=True,
                          check=True)
    return done.stdout


def _env(threads: int) -> dict:
    return {**os.environ, "DSL_NUM_THREADS": str(threads)}


def _bmm_args(rng):
    a = rng.standard_normal((5, 19, 23)).astype(np.float32)
    b = rng.standard_normal((5, 23, 17)).astype(np.float32)
    return [a, b, np.zeros((5, 19, 17), np.float32)]


def test_pgrid_kernel_runs_on_libgomp_threads(aarch64, tmp_path):
    kernels, message = dslc_build(BMM, tmp_path, "bmm", *AARCH64)
    assert kernels is not None, message
    assert "libgomp.so.1" in _needed(tmp_path / "bmm.so")
    rng = np.random.default_rng(4)
    for threads in (1, 3):
        args = _bmm_args(rng)
        status, (out,), stderr = run_case(aarch64, tmp_path, "bmm", kernels["bmm"], args, env=_env(threads))
        assert status == 0 and WARNING not in stderr
        assert_close(out, np.matmul(args[0].astype(np.float64), args[1]), f"bmm on {threads} threads")


def test_without_libgomp_parallel_loops_run_serially_and_say_so(aarch64, tmp_path):
    job = compile_file(BMM, CompileOptions(triple="aarch64-linux-gnu"))
    (tmp_path / "bmm.o").write_bytes(job.obj)
    (tmp_path / "bmm.h").write_text(header_text(list(job.program.kernels), "BMM_H"))
    kernels = parse_header((tmp_path / "bmm.h").read_text())
    # Relink the library by hand without -lgomp: the weak GOMP symbols stay null.
    subprocess.run([*aarch64.cc, "-shared", "-o", str(tmp_path / "bmm.so"), str(tmp_path / "bmm.o"), "-lm"],
                   check=True)
    assert "libgomp" not in _needed(tmp_path / "bmm.so")
    args = _bmm_args(np.random.default_rng(5))
    status, (out,), stderr = run_case(aarch64, tmp_path, "bmm", kernels["bmm"], args, env=_env(2))
    assert status == 0 and WARNING in stderr
    assert_close(out, np.matmul(args[0].astype(np.float64), args[1]), "bmm, serial fallback")


def test_matmul_transposed_views_under_qemu(aarch64, tmp_path):
    """Index-notation matmul on a transposed A and a strided B, big enough for
    the packed micro-kernel and the parallel M blocks."""
    kernels, message = dslc_build(MATMUL, tmp_path, "mm", *AARCH64)
    assert kernels is not None, message
    assert "libgomp.so.1" in _needed(tmp_path / "mm.so")
    rng = np.random.default_rng(6)
    for m, k, n in ((1, 1, 1), (13, 7, 9), (161, 130, 75)):
        a = rng.standard_normal((k, m)).astype(np.float32).T
        b = rng.standard_normal((k, 2 * n)).astype(np.float32)[:, ::2]
        c = np.zeros((m, n), np.float32)
        status, (out,), stderr = run_case(aarch64, tmp_path, "mm", kernels["matmul_index"], [a, b, c],
                                          env=_env(2))
        assert status == 0 and WARNING not in stderr
        assert_close(out, a.astype(np.float64) @ b, f"matmul {m}x{k}x{n}")


STREAMING = """
@schedule(split(i, 1024, tail=peel), parallel(i.outer), vectorize(i.inner, 16, nontemporal=out))
def axpy(x: f32[N], y: f32[N], out: f32[N]):
    out[i] = 2.0 * x[i] + y[i]
"""


def test_streaming_stores_under_qemu(aarch64, tmp_path):
    """vectorize's nontemporal= on AArch64 (STNP), streaming forced on, on 2 threads."""
    (tmp_path / "stream.tk").write_text(STREAMING)
    asm = compile_file(tmp_path / "stream.tk", CompileOptions(triple="aarch64-linux-gnu"), stop_after="asm").asm
    assert "stnp" in asm
    kernels, message = dslc_build(tmp_path / "stream.tk", tmp_path, "stream", *AARCH64)
    assert kernels is not None, message
    rng = np.random.default_rng(6)
    for n in (5, 3000):
        args = [rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32),
                np.zeros(n, np.float32)]
        env = {**_env(2), "DSL_STREAM_BYTES": "0"}
        status, (out,), _ = run_case(aarch64, tmp_path, "stream", kernels["axpy"], args, env=env)
        assert status == 0
        np.testing.assert_array_equal(out, np.float32(2) * args[0] + args[1])
