"""Blocks in lanes: the layout the quantizers of `stdlib/quant_*.tk` work in.

A quantizer runs LANES blocks at once, one per vector lane, so it reads x
regrouped as [groups, values per block, LANES] (value k of block LANES * g + b
at [g, k, b]; `stdlib/quant_lanes.tk` does the regrouping) and writes its
bytes straight into the blocks, [groups, LANES, bytes per block]. A last,
partial group is padded with zero blocks, whose bytes are dropped. The small
fields (f16 scales, q8_K's bsums) come back in lanes, [groups, n, LANES].
"""

from __future__ import annotations

import numpy as np

from .quant_formats import quant_library


LANES = 16  # the `16` of the kernels' signatures


def groups_of(count: int) -> int:
    return -(-count // LANES)


def padded_to_groups(rows: np.ndarray) -> np.ndarray:
    """float32 [blocks, n] with zero blocks appended up to a whole number of groups."""
    count, n = rows.shape
    if count % LANES == 0:
        return rows
    padded = np.zeros((groups_of(count) * LANES, n), np.float32)
    padded[:count] = rows
    return padded


def to_lanes(rows: np.ndarray) -> np.ndarray:
    """float32 [blocks, n] (C-contiguous) -> [groups, n, LANES], zero-padded."""
    rows = padded_to_groups(rows)
    groups, n = rows.shape[0] // LANES, rows.shape[1]
    out = np.empty((groups, n, LANES), np.float32)
    tiles = n // LANES  # n: 256 values a block (the k-quants)
    quant_library("quant_lanes").lanes_f32(rows.reshape(groups, LANES, tiles, LANES),
                                           out.reshape(groups, tiles, LANES, LANES))
    return out


def from_lanes(arr: np.ndarray, count: int) -> np.ndarray:
    """[groups, n, LANES] -> [count, n]: the first `count` blocks' values (small fields only)."""
    groups, n, _ = arr.shape
    return np.ascontiguousarray(arr.transpose(0, 2, 1).reshape(groups * LANES, n)[:count])


def empty_lanes(groups: int, n: int, dtype) -> np.ndarray:
    """A small output field in lanes: [groups, n, LANES] of `dtype`."""
    return np.empty((groups, n, LANES), dtype)


def whole_groups(rows: np.ndarray, out: np.ndarray, write) -> None:
    """`write(blocks, into)` on whole groups of LANES blocks (the kernels put
    one block in each vector lane): straight into `out` ([count, bytes]) but
    for a partial last group, which goes through a zero-padded group of its own."""
    count = rows.shape[0]
    whole = count // LANES * LANES
    if whole:
        write(rows[:whole], out[:whole])
    if whole < count:
        last = np.empty((LANES, out.shape[1]), np.uint8)
        write(padded_to_groups(rows[whole:]), last)
        out[whole:] = last[:count - whole]
