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


# Columns of a matrix at most this many to a block of y: 16 KiB of f32 stays
# in L1 while eight rows of the transpose stream past it (4096^2 from DRAM,
# 1 thread of Zen 4: 2.29 ms in blocks of 4096, 2.56 in 2048, 2.83 in 1024;
# numpy 2.30).
_COLS_BLOCK_BYTES = 16384
# Below this many elements of the matrix, the blocks run on one thread (a
# 256^2 product takes ~3 us, about what handing work to a thread costs).
_COLS_PARALLEL_ELEMENTS = 1 << 18


def matvec_calls(lib, t: str, a: np.ndarray, x: np.ndarray, y: np.ndarray) -> list:
    """The (kernel, arguments) calls of y = a @ x. Rows contiguous (or
    neither way): dot products. Columns contiguous: a's transpose, whose
    rows are contiguous, added row by row into blocks of y, one block per
    thread at least; the columns the blocks leave, in a second call."""
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
