"""GGML's block-quantized formats: sizes, and checked views of block bytes.

Each format packs a fixed number of values (`block`) into a fixed number of
bytes (`nbytes`), laid out as in ggml's `ggml-common.h`:

    q8_0  f16 d, i8 qs[32]                                    34 bytes / 32 values
    q4_k  f16 d, f16 dmin, u8 scales[12], u8 qs[128]          144 bytes / 256
    q5_k  f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]  176 / 256
    q6_k  u8 ql[128], u8 qh[64], i8 scales[16], f16 d         210 / 256
    q8_k  f32 d, i8 qs[256], i16 bsums[16]                    292 / 256
"""

from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import numpy as np

from .arrays import as_view
from .library import stdlib_module


@dataclass(frozen=True)
class QuantFormat:
    """One block format: its name, values per block and bytes per block."""

    name: str
    block: int
    nbytes: int


FORMATS = {f.name: f for f in (
    QuantFormat("q8_0", 32, 34),
    QuantFormat("q4_k", 256, 144),
    QuantFormat("q5_k", 256, 176),
    QuantFormat("q6_k", 256, 210),
    QuantFormat("q8_k", 256, 292),
)}


def quant_format(op: str, qtype: object) -> QuantFormat:
    """The format named `qtype` ('q4_k', 'Q4_K', ...), or a ValueError naming `op`."""
    if not isinstance(qtype, str):
        raise TypeError(f"{op}: qtype must be a string such as 'q4_k', not {type(qtype).__name__}")
    fmt = FORMATS.get(qtype.lower())
    if fmt is None:
        raise ValueError(f"{op}: unknown quantized type '{qtype}' (known: {', '.join(FORMATS)})")
    return fmt


def check_shape(op: str, fmt: QuantFormat, shape: object) -> tuple[int, ...]:
    """`shape` as a tuple of ints whose last axis is a whole number of blocks."""
    try:
        dims = tuple(operator.index(d) for d in shape)  # type: ignore[union-attr]
    except TypeError:
        raise TypeError(f"{op}: shape must be a tuple of ints, not {shape!r}") from None
    if not dims or any(d < 0 for d in dims):
        raise ValueError(f"{op}: shape {dims} must have at least one axis and no negative size")
    if dims[-1] % fmt.block:
        raise ValueError(f"{op}: rows of {dims[-1]} values are not a whole number of "
                         f"{fmt.name} blocks ({fmt.block} values each)")
    return dims


def block_rows(op: str, fmt: QuantFormat, blocks: object, shape: tuple[int, ...]) -> np.ndarray:
    """`blocks` as a C-contiguous uint8 array [number of blocks, nbytes], checked against `shape`."""
    blocks = as_view(op, "blocks", blocks)
    if not isinstance(blocks, np.ndarray):
        raise TypeError(f"{op}: blocks must be a numpy uint8 array, not {type(blocks).__name__}")
    if blocks.dtype != np.uint8:
        raise TypeError(f"{op}: blocks must have dtype uint8, not {blocks.dtype}")
    count = math.prod(shape) // fmt.block  # math.prod: np.prod alone costs 3 us a call
    if blocks.size != count * fmt.nbytes:
        raise ValueError(f"{op}: {blocks.size} bytes of blocks, but shape {shape} in {fmt.name} "
                         f"takes {count * fmt.nbytes} ({count} blocks of {fmt.nbytes} bytes)")
    return aligned(np.ascontiguousarray(blocks)).reshape(count, fmt.nbytes)


def aligned(blocks: np.ndarray) -> np.ndarray:
    """`blocks`, or a copy of them when their address is not a multiple of 4:
    the kernels read the blocks' f16 and f32 fields in place, as typed views."""
    return blocks if blocks.ctypes.data % 4 == 0 else blocks.copy()


def quant_library(name: str):
    """The kernels of `stdlib/<name>.tk` (`stdlib_module`, which finds them
    without re-reading the sources: cheaper than a small matvec)."""
    return stdlib_module(name)
