"""ggml itself, through ctypes: the reference for the quant tests and benchmarks.

The `libggml-python` wheel ships ggml's shared libraries; `libggml-base.so`
exports the reference quantizers (`quantize_row_<t>_ref`) and the
dequantizers (`dequantize_row_<t>`), each looping over all rows in C.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

try:
    import libggml
except ImportError:  # pragma: no cover - the test extra installs it
    libggml = None

# type name -> (values per block, bytes per block, ggml's symbol suffix)
FORMATS = {
    "q8_0": (32, 34, "q8_0"),
    "q4_k": (256, 144, "q4_K"),
    "q5_k": (256, 176, "q5_K"),
    "q6_k": (256, 210, "q6_K"),
    "q8_k": (256, 292, "q8_K"),
}


def lib_dir() -> Path:
    return Path(libggml.__file__).parent / "lib64"


def _base() -> ctypes.CDLL:
    lib = ctypes.CDLL(str(lib_dir() / "libggml-base.so"))
    for fmt in FORMATS.values():
        for name in (f"quantize_row_{fmt[2]}_ref", f"dequantize_row_{fmt[2]}"):
            fn = getattr(lib, name)
            fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
            fn.restype = None
    return lib


_lib: ctypes.CDLL | None = None


def base() -> ctypes.CDLL:
    global _lib
    if _lib is None:
        _lib = _base()
    return _lib


def quantize(x: np.ndarray, qtype: str) -> np.ndarray:
    """ggml's reference quantizer on every row of float32 `x` (no imatrix)."""
    block, nbytes, sym = FORMATS[qtype]
    x = np.ascontiguousarray(x, dtype=np.float32)
    out = np.zeros(x.size // block * nbytes, np.uint8)  # q8_K leaves bsums of zero blocks unwritten
    getattr(base(), f"quantize_row_{sym}_ref")(x.ctypes.data, out.ctypes.data, x.size)
    return out.reshape(*x.shape[:-1], x.shape[-1] // block * nbytes)


def dequantize(blocks: np.ndarray, qtype: str, shape: tuple[int, ...]) -> np.ndarray:
    """ggml's dequantize_row_<t> over all of `blocks`."""
    sym = FORMATS[qtype][2]
    blocks = np.ascontiguousarray(blocks, dtype=np.uint8)
    out = np.empty(shape, np.float32)
    getattr(base(), f"dequantize_row_{sym}")(blocks.ctypes.data, out.ctypes.data, out.size)
    return out
