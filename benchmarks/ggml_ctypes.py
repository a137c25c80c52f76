"""ggml itself through ctypes, for the quant benchmark: the reference
quantizers and dequantizers of libggml-base.so, and ggml-cpu's optimized
`vec_dot` / `from_float` (ggml_get_type_traits_cpu), with the rows of a
matrix-vector product looped in C (a small helper built with gcc at startup,
OpenMP threads over rows) so that no Python runs per row."""

from __future__ import annotations

import ctypes
import subprocess
import tempfile
from pathlib import Path

import numpy as np

import libggml

LIB = Path(libggml.__file__).parent / "lib64"
GGML_TYPE = {"q8_0": 8, "q4_k": 12, "q5_k": 13, "q6_k": 14, "q8_k": 15}
SYMBOL = {"q8_0": "q8_0", "q4_k": "q4_K", "q5_k": "q5_K", "q6_k": "q6_K", "q8_k": "q8_K"}
ACT_BYTES = {"q8_0": 34 / 32, "q8_k": 292 / 256}  # bytes per value of the activation format

_LOOP_C = r"""
#include <stdint.h>
#include <stddef.h>
typedef void (*vec_dot_t)(int, float *, size_t, const void *, size_t, const void *, size_t, int);
typedef void (*from_float_t)(const float *, void *, int64_t);
void matvec(vec_dot_t dot, from_float_t from_float, const char *w, size_t row_bytes, int64_t rows,
            int k, const float *x, void *xq, float *y, int threads) {
    from_float(x, xq, k);
    #pragma omp parallel for num_threads(threads) schedule(static)
    for (int64_t r = 0; r < rows; r++)
        dot(k, &y[r], 0, w + r * row_bytes, 0, xq, 0, 1);
}
"""


class TypeTraitsCpu(ctypes.Structure):
    _fields_ = [("from_float", ctypes.c_void_p), ("vec_dot", ctypes.c_void_p),
                ("vec_dot_type", ctypes.c_int), ("nrows", ctypes.c_int64)]


class Ggml:
    def __init__(self):
        mode = ctypes.RTLD_GLOBAL
        self.base = ctypes.CDLL(str(LIB / "libggml-base.so"), mode=mode)
        self.cpu = ctypes.CDLL(str(LIB / "libggml-cpu.so"), mode=mode)
        self.cpu.ggml_cpu_init()
        self.cpu.ggml_get_type_traits_cpu.restype = ctypes.POINTER(TypeTraitsCpu)
        build = Path(tempfile.mkdtemp(prefix="ggml-loop-"))
        (build / "loop.c").write_text(_LOOP_C)
        subprocess.run(["gcc", "-O2", "-fopenmp", "-shared", "-fPIC", "-o", str(build / "loop.so"),
                        str(build / "loop.c")], check=True)
        self.loop = ctypes.CDLL(str(build / "loop.so"))
        self.loop.matvec.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_size_t, ctypes.c_int64, ctypes.c_int] + \
            [ctypes.c_void_p] * 3 + [ctypes.c_int]

    def quantize(self, x: np.ndarray, qtype: str, out: np.ndarray) -> None:
        fn = getattr(self.base, f"quantize_row_{SYMBOL[qtype]}_ref")
        fn(ctypes.c_void_p(x.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(x.size))

    def dequantize(self, blocks: np.ndarray, qtype: str, out: np.ndarray) -> None:
        fn = getattr(self.base, f"dequantize_row_{SYMBOL[qtype]}")
        fn(ctypes.c_void_p(blocks.ctypes.data), ctypes.c_void_p(out.ctypes.data), ctypes.c_int64(out.size))

    def matvec(self, qtype: str, n_rows: int, k: int, threads: int):
        """A callable (w, x, y) -> None: y = W x by ggml's vec_dot, rows looped in C."""
        traits = self.cpu.ggml_get_type_traits_cpu(GGML_TYPE[qtype]).contents
        act = self.cpu.ggml_get_type_traits_cpu(traits.vec_dot_type).contents
        act_name = {8: "q8_0", 15: "q8_k"}[traits.vec_dot_type]
        xq = np.zeros(int(k * ACT_BYTES[act_name]), np.uint8)
        row_bytes = None

        def run(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
            nonlocal row_bytes
            row_bytes = w.shape[1]
            self.loop.matvec(traits.vec_dot, act.from_float, w.ctypes.data, row_bytes, n_rows, k,
                             x.ctypes.data, xq.ctypes.data, y.ctypes.data, threads)
        return run
