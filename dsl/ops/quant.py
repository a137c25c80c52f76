"""GGML's block-quantized formats (q8_0, q4_k, q5_k, q6_k, q8_k): the Python face.

    blocks = dsl.ops.quantize(x, "q4_k")              # uint8, bytes as ggml writes them
    y = dsl.ops.dequantize(blocks, "q4_k", x.shape)   # float32, bit-exact with ggml

The kernels are in `stdlib/quant_*.tk`; they read the block bytes through
several numpy views of one buffer (u8 / i8 for quants and packed scales, f16
or f32 for the block scales), so nothing is copied on the way in.
"""

from __future__ import annotations

import numpy as np

from .arrays import as_view
from .quant_formats import FORMATS, aligned, block_rows, check_shape, quant_format, quant_library
from .quant_lanes import K_LANES, LANES, empty_lanes, from_lanes, to_lanes, whole_groups

from .quant_matmul import qmatmul, qmatvec
from .quant_q8 import quantize_blocks

__all__ = ["quantize", "dequantize", "qmatvec", "qmatmul", "QUANT_TYPES"]

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


def dequantize(blocks: np.ndarray, qtype: str, shape, out: np.ndarray | None = None) -> np.ndarray:
    """The float32 values of quantized `blocks` of type `qtype`, as an array of `shape`.

    Bit-exact with ggml's `dequantize_row_<qtype>`. `shape`'s last axis must be a
    whole number of blocks (32 values for q8_0, 256 for the k-quants). `out`, if
    given, is a C-contiguous float32 array of `shape` to write into.

        >>> x = np.random.randn(2, 256).astype(np.float32)
        >>> y = dsl.ops.dequantize(dsl.ops.quantize(x, "q6_k"), "q6_k", x.shape)
    """
    fmt = quant_format("dequantize", qtype)
    dims = check_shape("dequantize", fmt, shape)
    rows = block_rows("dequantize", fmt, blocks, dims)
    out = as_view("dequantize", "out", out)
    if out is None:
        out = np.empty(dims, np.float32)
    elif not (isinstance(out, np.ndarray) and out.dtype == np.float32 and out.shape == dims
              and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"dequantize: out must be a writable C-contiguous float32 array of shape {dims}")
    elif np.may_share_memory(out, rows):
        raise ValueError("dequantize: out must not overlap blocks")
    if rows.shape[0]:
        kernel = getattr(quant_library("quant_dequant"), f"dequantize_{fmt.name}")
        kernel(*_views(rows, fmt.name), out.reshape(rows.shape[0], fmt.block))
    return out


# The k-quants run in chunks of this many blocks: a chunk's blocks in lanes (1
# MiB of float32) are still in cache from the regrouping to the search and the
# packing (q6_K, 1 thread of Zen 4: chunks of 1024 blocks 62-64 ms, of 8192
# 65-66), and buffers of this size are reused by malloc from call to call,
# where one buffer for a whole large matrix comes fresh from mmap each time
# (page faults cost ~2 us a page here: 9 ms for 64 MiB).
_CHUNK_BLOCKS = 1024


def quantize(x: np.ndarray, qtype: str, out: np.ndarray | None = None) -> np.ndarray:
    """`x` (float32, rows a whole number of blocks) in GGML's `qtype` blocks, as uint8.

    The result has x's shape with the last axis in bytes (x.shape[-1] / block *
    bytes per block), byte for byte what ggml's `quantize_row_<qtype>_ref` writes
    (ggml_quantize_chunk without an importance matrix). `out`, if given, is a
    C-contiguous uint8 array of that shape to write into (it must not overlap x).

        >>> x = np.random.randn(4, 512).astype(np.float32)
        >>> dsl.ops.quantize(x, "q4_k").shape
        (4, 288)
    """
    fmt = quant_format("quantize", qtype)
    x = as_view("quantize", "x", x)
    if not isinstance(x, np.ndarray):
        raise TypeError(f"quantize: x must be a numpy float32 array, not {type(x).__name__}")
    if x.dtype != np.float32:
        raise TypeError(f"quantize: x must have dtype float32, not {x.dtype}")
    dims = check_shape("quantize", fmt, x.shape)
    shape = (*dims[:-1], dims[-1] // fmt.block * fmt.nbytes)
    out = _checked_out(as_view("quantize", "out", out), shape, x)
    out = np.empty(shape, np.uint8) if out is None else out
    rows = np.ascontiguousarray(x).reshape(-1, fmt.block)
    target = out.reshape(rows.shape[0], fmt.nbytes)
    if fmt.name in ("q8_0", "q8_k"):  # their kernels write the scales through typed views: an aligned target
        into = aligned(target)
        quantize_blocks(rows, fmt.name, "quantize", into)
        if into is not target:
            target[...] = into
    else:
        lanes = _LANES[fmt.name]
        whole_groups(rows, target, lambda blocks, into: _k_quants(fmt.name, blocks, into, lanes), lanes)
    return out


def _checked_out(out, shape: tuple[int, ...], x: np.ndarray) -> np.ndarray | None:
    if out is None:
        return None
    if not (isinstance(out, np.ndarray) and out.dtype == np.uint8 and out.shape == shape
            and out.flags.c_contiguous and out.flags.writeable):
        raise ValueError(f"quantize: out must be a writable C-contiguous uint8 array of shape {shape}")
    if np.may_share_memory(out, x):
        raise ValueError("quantize: out overlaps x")
    return out


def _k_quants(qtype: str, rows: np.ndarray, out: np.ndarray, lanes: int) -> None:
    """q4_K, q5_K or q6_K of whole groups of `lanes` blocks, `_CHUNK_BLOCKS` blocks at a time."""
    groups = out.reshape(-1, lanes, out.shape[1])
    for start in range(0, rows.shape[0], _CHUNK_BLOCKS):
        stop = min(start + _CHUNK_BLOCKS, rows.shape[0])
        _QUANTIZERS[qtype](to_lanes(rows[start:stop], lanes), groups[start // lanes:stop // lanes], out[start:stop])


def _quantize_k(xl: np.ndarray, blocks: np.ndarray, out: np.ndarray, nmax: int, rmin: float, nstep: int) -> None:
    """q4_K (nmax 15) or q5_K (nmax 31): the search, the block scales, the packing."""
    lib = quant_library("quant_k")
    groups, _, lanes = xl.shape
    levels = empty_lanes(groups, 256, np.uint8, lanes)
    scale = empty_lanes(groups, 8, np.float32, lanes)
    the_min = empty_lanes(groups, 8, np.float32, lanes)
    lib.qkx2_search(xl, nmax, rmin, nstep, levels, scale, the_min)
    dm = empty_lanes(groups, 2, np.float16, lanes)
    sb = empty_lanes(groups, 12, np.uint8, lanes)
    count = out.shape[0]
    lib.final_levels(xl, nmax, scale, the_min, levels, dm, sb)
    (lib.pack_q4_k if nmax == 15 else lib.pack_q5_k)(levels, blocks)
    out[:, 0:4] = from_lanes(dm, count).view(np.uint8)
    out[:, 4:16] = from_lanes(sb, count)


def _quantize_q6_k(xl: np.ndarray, blocks: np.ndarray, out: np.ndarray) -> None:
    lib = quant_library("quant_q6")
    groups = xl.shape[0]
    levels = empty_lanes(groups, 256, np.uint8)
    scale = empty_lanes(groups, 16, np.float32)
    lib.qx_search(xl, levels, scale)
    dh = empty_lanes(groups, 1, np.float16)
    lib.pack_q6_k(xl, scale, levels, dh, blocks)
    out[:, 208:210] = from_lanes(dh, out.shape[0]).view(np.uint8)


_QUANTIZERS = {
    "q4_k": lambda xl, blocks, out: _quantize_k(xl, blocks, out, 15, -1.0, 20),
    "q5_k": lambda xl, blocks, out: _quantize_k(xl, blocks, out, 31, -0.5, 15),
    "q6_k": _quantize_q6_k,
}
_LANES = {"q4_k": K_LANES, "q5_k": K_LANES, "q6_k": LANES}
