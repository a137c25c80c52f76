"""GGML's block-quantized formats (q8_0, q4_k, q5_k, q6_k, q8_k): the Python face.

    blocks = dsl.ops.quantize(x, "q4_k")              # uint8, bytes as ggml writes them
    y = dsl.ops.dequantize(blocks, "q4_k", x.shape)   # float32, bit-exact with ggml

The kernels are in `stdlib/quant_*.tk`; they read the block bytes through
several numpy views of one buffer (u8 / i8 for quants and packed scales, f16
or f32 for the block scales), so nothing is copied on the way in.
"""

from __future__ import annotations

import numpy as np

from .library import stdlib_library
from .quant_formats import FORMATS, block_rows, check_shape, quant_format

__all__ = ["dequantize", "QUANT_TYPES"]

QUANT_TYPES = tuple(FORMATS)


def _views(rows: np.ndarray, qtype: str) -> tuple[np.ndarray, ...]:
    """The typed views of block rows that `dequantize_<qtype>` takes before its output."""
    match qtype:
        case "q8_0":
            return rows.view(np.int8), rows.view(np.float16)
        case "q8_k":
            return rows.view(np.int8), rows.view(np.float32)
        case "q6_k":
            return rows, rows.view(np.int8), rows.view(np.float16)
        case _:
            return rows, rows.view(np.float16)


def dequantize(blocks: np.ndarray, qtype: str, shape) -> np.ndarray:
    """The float32 values of quantized `blocks` of type `qtype`, as an array of `shape`.

    Bit-exact with ggml's `dequantize_row_<qtype>`. `shape`'s last axis must be a
    whole number of blocks (32 values for q8_0, 256 for the k-quants).

        >>> x = np.random.randn(2, 256).astype(np.float32)
        >>> y = dsl.ops.dequantize(dsl.ops.quantize(x, "q6_k"), "q6_k", x.shape)
    """
    fmt = quant_format("dequantize", qtype)
    dims = check_shape("dequantize", fmt, shape)
    rows = block_rows("dequantize", fmt, blocks, dims)
    out = np.empty((rows.shape[0], fmt.block), np.float32)
    if rows.shape[0]:
        kernel = getattr(stdlib_library("quant_dequant"), f"dequantize_{fmt.name}")
        kernel(*_views(rows, fmt.name), out)
    return out.reshape(dims)
