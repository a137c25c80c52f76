"""The kernel calls of a matrix-vector product y = a @ x (`dsl.ops.matvec`,
and `dsl.ops.matmul` when one operand is a vector): which stdlib/dense.tk
kernel runs for a's layout, on which views, in how many blocks."""

from __future__ import annotations

import numpy as np

from ..library import num_threads
from .arrays import even_strips, view_as


def run_matvec(lib, t: str, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> None:
    """y = a @ x by the calls `matvec_calls` lists."""
    for kernel, args in matvec_calls(lib, t, a, x, y):
        kernel(*args)


# Columns of a matrix at most this many bytes to a block of y. Each block
# reads its part of every row of the transpose once, eight rows at a time,
# so a wider block reads longer runs of each row; y's block stays in L2 (256
# KiB: half of Zen 3's). Interleaved, 1 thread of Zen 4, blocks of 16 KiB
# (y in L1) -> 256 KiB, GB/s: f32 8192^2 19.6 -> 21.7, x (1 x 4096) @ W
# (4096 x 16384) 21.1 -> 24.6 (numpy 22.7), x (1 x 1024) @ W (1024 x 65536)
# 17.6 -> 21.8; f64 the same three 1.17-1.24x; 4096^2 level (f64 1.07x).
# Kernel alone, f32 1024 x 65536: blocks of 16, 64, 256 KiB 19.5-20.6,
# 22.7-25.1, 24.6-26.5 GB/s; 512 and 1024 KiB no faster than 256.
_COLS_BLOCK_BYTES = 1 << 18
# Below this many elements of the matrix, the blocks run on one thread (a
# 256^2 product takes ~3 us, about what handing work to a thread costs).
_COLS_PARALLEL_ELEMENTS = 1 << 18


def matvec_calls(lib, t: str, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> list:
    """The (kernel, arguments) calls of y = a @ x. Rows contiguous (or
    neither way): dot products. Columns contiguous: a's transpose, whose
    rows are contiguous, added row by row into blocks of y, one block per
    thread at least (on several threads, the widest blocks that share the
    columns evenly: 2 threads, f32 65536 columns, kernel alone: 2 blocks
    36-54 GB/s, 16 blocks 28-44); the columns the blocks leave, in a second
    call."""
    if abs(a.strides[1]) == a.itemsize or abs(a.strides[0]) != a.itemsize:
        return [(getattr(lib, f"matvec_rows_{t}"), (a, x, y))]
    kernel = getattr(lib, f"matvec_cols_{t}")
    m, k = a.shape
    blocks = -(-m * a.itemsize // _COLS_BLOCK_BYTES)
    if m * k >= _COLS_PARALLEL_ELEMENTS:
        blocks = max(blocks, num_threads())
    width = even_strips(m, blocks) if blocks > 1 else m
    if width == 0:
        blocks, width = 1, m
    at = a.T
    if blocks == 1:
        return [(kernel, (at[:, None], x, y[None]))]
    done = blocks * width  # splitting an axis in two is always a view
    head, y_head = (at, y) if done == m else (at[:, :done], y[:done])
    calls = [(kernel, (view_as(head, (k, blocks, width)), x, view_as(y_head, (blocks, width))))]
    if done < m:
        calls.append((kernel, (at[:, None, done:], x, y[None, done:])))
    return calls
