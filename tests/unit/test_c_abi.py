"""The C interface of a `dslc` library: a C program includes the generated
header, calls the kernels with pointers, sizes and element strides in the
documented order, and reads the status each one returns."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from dsl.cli import main

ROOT = Path(__file__).resolve().parents[2]
CC = shutil.which("cc")
pytestmark = pytest.mark.skipif(CC is None, reason="needs a C compiler (cc)")
CFLAGS = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic"]

SAXPY_MAIN = r"""
#include <stdio.h>
#include "saxpy.h"

int main(void) {
    float x[10], y[5], out[5];
    for (int i = 0; i < 10; i++) x[i] = (float)i;       /* x is read with stride 2 */
    for (int i = 0; i < 5; i++) { y[i] = 10.0f * i; out[i] = -1.0f; }
    int32_t status = saxpy(2.0f, x, 5, 2, y, 5, 1, out, 5, 1);
    printf("status %d\n", (int)status);
    for (int i = 0; i < 5; i++) printf("%.9g\n", out[i]);
    printf("short-y %d\n", (int)saxpy(2.0f, x, 5, 2, y, 4, 1, out, 5, 1));
    printf("short-out %d\n", (int)saxpy(2.0f, x, 5, 2, y, 5, 1, out, 3, 1));
    printf("alias %d\n", (int)saxpy(2.0f, out, 5, 1, y, 5, 1, out, 5, 1));
    return 0;
}
"""

MATMUL_MAIN = r"""
#include <stdio.h>
#include "matmul.h"

enum { M = 3, K = 4, N = 2 };

int main(void) {
    float A[M * K], Bt[N * K], C[M * N];
    for (int i = 0; i < M * K; i++) A[i] = (float)(i % 7) - 2.0f;
    for (int i = 0; i < N * K; i++) Bt[i] = 0.5f * (float)i - 1.0f;
    /* B[k, n] lives at Bt[n * K + k]: strides (1, K) describe the transpose. */
    int32_t status = matmul_index(A, M, K, K, 1, Bt, K, N, 1, K, C, M, N, N, 1);
    printf("status %d\n", (int)status);
    for (int i = 0; i < M * N; i++) printf("%.9g\n", C[i]);
    printf("bad-k %d\n", (int)matmul_index(A, M, K, K, 1, Bt, K - 1, N, 1, K, C, M, N, N, 1));
    return 0;
}
"""


def build(tmp_path: Path, example: str, lib: str, program: str) -> tuple[str, str]:
    """Compile `example` to lib.so + lib.h with dslc, then `program` against it;
    return (the program's output, the header text)."""
    so, header = tmp_path / f"{lib}.so", tmp_path / f"{lib}.h"
    result = CliRunner().invoke(main, [str(ROOT / "examples" / example), "-o", str(so), "-H", str(header)])
    assert result.exit_code == 0, result.stderr
    (tmp_path / "main.c").write_text(program)
    cc = subprocess.run([CC, *CFLAGS, "main.c", f"./{lib}.so", "-o", "main", f"-Wl,-rpath,{tmp_path}"],
                        cwd=tmp_path, capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr
    run = subprocess.run(["./main"], cwd=tmp_path, capture_output=True, text=True, check=True)
    return run.stdout, header.read_text()


def values(lines: list[str]) -> np.ndarray:
    return np.array([float(v) for v in lines], dtype=np.float32)


def prototype(header: str, kernel: str) -> list[str]:
    """The parameter lines of `kernel`'s prototype."""
    body = header.split(f"int32_t {kernel}(\n", 1)[1].split(");", 1)[0]
    return [line.strip() for line in body.splitlines() if line.strip()]


def test_saxpy_from_c(tmp_path):
    out, _ = build(tmp_path, "saxpy.tk", "saxpy", SAXPY_MAIN)
    lines = out.splitlines()
    assert lines[0] == "status 0"
    x = np.arange(10, dtype=np.float32)[::2]
    y = 10 * np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(values(lines[1:6]), np.float32(2) * x + y)
    assert lines[6] == "short-y 1"  # check 1: 'y' axis 0 must equal N
    assert lines[7] == "short-out 2"  # check 2: 'out' axis 0 must equal N
    assert lines[8] == "alias 3"  # check 3: output 'out' shares memory with 'x'


def test_saxpy_header_documents_each_parameter(tmp_path):
    _, header = build(tmp_path, "saxpy.tk", "saxpy", SAXPY_MAIN)
    params = prototype(header, "saxpy")
    assert [re.split(r"[,\s]+/\*", p)[0] for p in params] == [
        "float alpha", "const float* x", "int64_t x_size0", "int64_t x_stride0",
        "const float* y", "int64_t y_size0", "int64_t y_stride0",
        "float* out", "int64_t out_size0", "int64_t out_stride0"]
    assert all(p.endswith("*/") and "/*" in p for p in params)
    assert "x: f32[N], input" in header and "out: f32[N], output" in header
    assert "1: shape: 'y' axis 0 must equal N ('x' axis 0)" in header


def test_matmul_with_transposed_b_from_c(tmp_path):
    out, header = build(tmp_path, "matmul_index.tk", "matmul", MATMUL_MAIN)
    lines = out.splitlines()
    assert lines[0] == "status 0"
    m, k, n = 3, 4, 2
    a = (np.arange(m * k) % 7).astype(np.float32).reshape(m, k) - 2
    bt = (np.float32(0.5) * np.arange(n * k, dtype=np.float32) - 1).reshape(n, k)
    np.testing.assert_allclose(values(lines[1:7]).reshape(m, n), a @ bt.T, rtol=1e-6)
    assert lines[7] == "bad-k 1"  # check 1: 'B' axis 0 must equal K
    params = prototype(header, "matmul_index")
    assert params[0].startswith("const float* A,") and params[5].startswith("const float* B,")
    assert params[10].startswith("float* C,")
    assert len(params) == 15 and all("/*" in p for p in params)


def test_header_compiles_whatever_the_parameter_names(tmp_path):
    source = tmp_path / "names.tk"
    source.write_text("def names(double: f32[N], x: f32[N], x_size0: i64, y: f32[N]):\n"
                      "    for i in range(N):\n        y[i] = double[i] + x[i] + f32(x_size0)\n")
    header = tmp_path / "names.h"
    result = CliRunner().invoke(main, [str(source), "-o", str(tmp_path / "names.so"), "-H", str(header)])
    assert result.exit_code == 0, result.stderr
    (tmp_path / "main.c").write_text('#include "names.h"\nint main(void) { return 0; }\n')
    cc = subprocess.run([CC, *CFLAGS, "-c", "main.c", "-o", "main.o"], cwd=tmp_path, capture_output=True, text=True)
    assert cc.returncode == 0, cc.stderr


Q4K_MAIN = r"""
#include <stdio.h>
#include "q4k.h"

enum { N = 3, K = 512, BYTES = N * K / 256 * 144 };

int main(void) {
    static uint8_t w[BYTES];   /* block_q4_K rows, written by dsl.ops.quantize */
    float x[K], y[N];
    FILE* f = fopen("w.bin", "rb");
    if (!f || fread(w, 1, BYTES, f) != BYTES) return 2;
    fclose(f);
    for (int k = 0; k < K; k++) x[k] = (float)(k % 5) - 2.0f;
    /* sizes in values, the row stride in blocks (K / 256), then 1 (not read) */
    int32_t status = q4k_matvec_silu(w, N, K, K / 256, 1, x, K, 1, y, N, 1);
    printf("status %d\n", (int)status);
    for (int n = 0; n < N; n++) printf("%.9g\n", y[n]);
    printf("k300 %d\n", (int)q4k_matvec_silu(w, N, 300, 2, 1, x, 300, 1, y, N, 1));
    return 0;
}
"""


def test_quantized_tensor_from_c(tmp_path):
    """A q4_k parameter: a uint8 pointer, sizes in values, strides in blocks."""
    import dsl

    n, k = 3, 512
    weights = np.random.default_rng(3).standard_normal((n, k)).astype(np.float32)
    blocks = dsl.ops.quantize(weights, "q4_k")
    (tmp_path / "w.bin").write_bytes(blocks.tobytes())
    out, header = build(tmp_path, "q4k_matvec_silu.tk", "q4k", Q4K_MAIN)
    lines = out.splitlines()
    assert lines[0] == "status 0"
    x = (np.arange(k) % 5).astype(np.float64) - 2
    z = dsl.ops.dequantize(blocks, "q4_k", (n, k)).astype(np.float64) @ x
    np.testing.assert_allclose(values(lines[1:4]), z / (1 + np.exp(-z)), rtol=1e-4, atol=1e-4)
    assert lines[4] == "k300 3"  # check 3: 'w': K (axis 1) is not a multiple of 256 (q4_k block)
    assert "3: shape: 'w': K (axis 1) is not a multiple of 256 (q4_k block)" in header
    assert "const uint8_t* w," in header and "in 144-byte blocks" in header
