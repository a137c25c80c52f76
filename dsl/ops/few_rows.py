"""The kernel calls of C = A @ B for a few rows of A (2 to 4), and of
batches of products of 1 or 2 rows, the rows of A and B contiguous:
`matmul_rows_*` and `matmul_row_*` (stdlib/dense.tk), which stream B's rows
through once; in how many column blocks, into which C.

A product of a few rows reads each element of B only that often. The GEMM
packs B first (a copy as long as the product), or, read in place, its tiles
walk B in column strips, a few lines of each row far apart, which the
hardware prefetcher follows badly. Measurements: the kernels' docstrings.
"""

from __future__ import annotations

import numpy as np

from ..library import num_threads
from .arrays import LINE, address, column_strips, empty_aligned, even_strips, finish

MAX_ROWS = 4
# B's elements from which 2 rows take the rows kernel: below, the GEMM's
# builtin door costs ~0.5 us less than the views the rows kernel takes,
# and the kernels' times differ by about that (2 x 256 x 256, 1 thread: 5.2
# us GEMM, 3.8 rows).
_MIN_ELEMENTS = 1 << 17
# 3 or 4 rows take it only when B is beyond L2 (1 MiB on Zen 4); within it
# the in-place GEMM keeps up (1 thread, us, GEMM in brackets: 4 x 512 x 512
# 22-25 (21-29), 4 x 768 x 768 65 (148)).
_ROWS_IN_CACHE = 2
_L2_BYTES = 1 << 20
# Below this many elements of B (16 MiB of f32) one thread streams it: the
# rows come from L3 as fast to one core as to two (Zen 4 VM, 2 threads, us,
# one block / a block per thread: 2 x 512 x 512 20 / 20-23, 2 x 1024 x 1024
# 69 / 67-70, 4 x 1024 x 1024 138-287 / 196-351, 2 x 2048 x 2048 731-821 /
# 485-520).
_PARALLEL_ELEMENTS = 1 << 22


def few_rows(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether c = a @ b (2-D, one float dtype) goes to the rows kernel: 2
    rows of a, or up to 4 when b is larger than L2; a's and b's rows
    contiguous."""
    m, isz, size = a.shape[0], a.itemsize, b.size
    return (2 <= m <= MAX_ROWS and size >= _MIN_ELEMENTS and a.strides[1] == isz and b.strides[1] == isz
            and (m <= _ROWS_IN_CACHE or size * isz > _L2_BYTES))


def run_few_rows(lib, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c = a @ b by the rows kernel (`few_rows(a, b)` holds; c's rows
    contiguous). On several threads each takes a block of columns. A block
    must start on a cache line of c, or two threads would write one line at
    every step over K (8 x 512 x 512 on 2 threads: 4x slower), so an
    unaligned c gets its result through an aligned copy. Raises the
    kernel's ValueError, having written nothing, when it refuses the
    arguments (sizes that disagree, c overlapping a or b, ...)."""
    kernel = lib.matmul_rows_f32 if a.itemsize == 4 else lib.matmul_rows_f64  # (f32 or f64 only)
    k, n = b.shape
    blocks = num_threads() if k * n >= _PARALLEL_ELEMENTS else 1
    width = even_strips(n, blocks) if blocks > 1 else 0
    if width == 0:
        if kernel.try_fast(a[None], b[None], c[None]) is not None:
            kernel(a[None], b[None], c[None])
        return
    m = a.shape[0]
    if c.shape != (m, n) or a.shape[1] != k:
        raise ValueError(f"matmul: shapes {a.shape} @ {b.shape} -> {c.shape} do not agree")
    if np.may_share_memory(c, a) or np.may_share_memory(c, b):  # (before either call writes)
        raise ValueError("matmul: out overlaps an operand")
    target = c
    if address(c) % LINE or c.strides[0] % LINE:
        row = -(-n * c.itemsize // LINE) * LINE // c.itemsize  # rows of whole lines
        target = empty_aligned((m, row), c.dtype)[:, :n]
    for b_part, c_part in column_strips([b[None], target[None]], blocks):  # the blocks, then the columns left
        kernel(np.broadcast_to(a, (b_part.shape[0], m, k)), b_part, c_part)
    finish(target, c)


# In a batch, products of 1 or 2 rows and at least 128 columns take the rows
# kernel, and of 3 or 4 rows with at least 512. Narrower rows leave each step
# over K too little to do while C's vector goes to memory and back (1 thread
# of Zen 4, us, rows / batched GEMM / numpy: 16 x (1 x 1000 x 128) 203 / 426
# / 193, 64 x (2 x 256 x 128) 211 / 241 / 191, 64 x (2 x 256 x 32) 71 / 47
# / 36, 16 x (4 x 1000 x 128) 877 / 721 / 438, 32 x (4 x 128 x 512) 392-447
# / 408-512 / 336-361, 16 x (4 x 256 x 1024) 1536-1595 / 1800-1880 /
# 3136-3613, 32 x (3 x 128 x 512) 307-373 / 271-372 / 368-439).
_PAIR_COLUMNS, _QUAD_COLUMNS = 128, 512  # the least for 1-2 rows, for 3-4


def few_rows_batch(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether the products c[p] = a[p] @ b[p] (3-D views, one float dtype)
    go to the rows kernel, a product per thread: 1-2 rows each and 128
    columns or more, or 3-4 rows and 512 columns or more; the rows of a and b
    contiguous. Each product reads its B once, where the batched GEMM packs
    it (attention's scores while decoding, 1 thread of Zen 4, (32, 1, 128) @
    (32, 128, 512): 446 -> 201-207 us, numpy 153)."""
    isz, m, n = a.itemsize, a.shape[1], b.shape[2]
    return ((n >= _PAIR_COLUMNS if m <= 2 else m <= MAX_ROWS and n >= _QUAD_COLUMNS)
            and a.strides[2] == isz and b.strides[2] == isz)


def run_few_rows_batch(lib, a: np.ndarray, b: np.ndarray, c: np.ndarray) -> None:
    """c[p] = a[p] @ b[p] by the rows kernel (`few_rows_batch(a, b)` holds):
    products of one row by `matmul_row_*`, eight rows of B at a time."""
    f32 = a.itemsize == 4  # (f32 or f64 only)
    if a.shape[1] == 1:
        (lib.matmul_row_f32 if f32 else lib.matmul_row_f64)(a[:, 0], b, c[:, 0])
    else:
        (lib.matmul_rows_f32 if f32 else lib.matmul_rows_f64)(a, b, c)
