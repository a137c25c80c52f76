"""Blocks in lanes: the layout the quantizers of `stdlib/quant_*.tk` work in.

A quantizer runs a group of `lanes` blocks at once (LANES, or K_LANES for
q4_K and q5_K), one per vector lane, so it reads x regrouped as [groups,
values per block, lanes] (value k of block lanes * g + b at [g, k, b];
`stdlib/quant_lanes.tk` does the regrouping) and writes its bytes straight
into the blocks, [groups, lanes, bytes per block]. A last, partial group is
padded with zero blocks, whose bytes are dropped. The small fields (f16
scales, q8_K's bsums) come back in lanes, [groups, n, lanes].
"""

from __future__ import annotations

import numpy as np

from .quant_formats import quant_library


LANES = 16  # the `16` of most kernels' signatures
K_LANES = 32  # q4_K's and q5_K's (stdlib/quant_k.tk says why)
_TRANSPOSE = {16: "lanes_f32", 32: "lanes32_f32"}  # stdlib/quant_lanes.tk


def groups_of(count: int, lanes: int = LANES) -> int:
    return -(-count // lanes)


def padded_to_groups(rows: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """float32 [blocks, n] with zero blocks appended up to a whole number of groups."""
    count, n = rows.shape
    if count % lanes == 0:
        return rows
    padded = np.zeros((groups_of(count, lanes) * lanes, n), np.float32)
    padded[:count] = rows
    return padded


def to_lanes(rows: np.ndarray, lanes: int = LANES) -> np.ndarray:
    """float32 [blocks, n] (C-contiguous) -> [groups, n, lanes], zero-padded."""
    rows = padded_to_groups(rows, lanes)
    groups, n = rows.shape[0] // lanes, rows.shape[1]
    out = np.empty((groups, n, lanes), np.float32)
    tiles = n // 16  # n: 256 values a block (the k-quants), in tiles of 16
    getattr(quant_library("quant_lanes"), _TRANSPOSE[lanes])(rows.reshape(groups, lanes, tiles, 16),
                                                             out.reshape(groups, tiles, 16, lanes))
    return out


def from_lanes(arr: np.ndarray, count: int) -> np.ndarray:
    """[groups, n, lanes] -> [count, n]: the first `count` blocks' values (small fields only)."""
    groups, n, lanes = arr.shape
    return np.ascontiguousarray(arr.transpose(0, 2, 1).reshape(groups * lanes, n)[:count])


def empty_lanes(groups: int, n: int, dtype, lanes: int = LANES) -> np.ndarray:
    """A small output field in lanes: [groups, n, lanes] of `dtype`."""
    return np.empty((groups, n, lanes), dtype)


def whole_groups(rows: np.ndarray, out: np.ndarray, write, lanes: int = LANES) -> None:
    """`write(blocks, into)` on whole groups of `lanes` blocks (the kernels put
    one block in each vector lane): straight into `out` ([count, bytes]) but
    for a partial last group, which goes through a zero-padded group of its own."""
    count = rows.shape[0]
    whole = count // lanes * lanes
    if whole:
        write(rows[:whole], out[:whole])
    if whole < count:
        last = np.empty((lanes, out.shape[1]), np.uint8)
        write(padded_to_groups(rows[whole:], lanes), last)
        out[whole:] = last[:count - whole]
