"""`dsl.ops.permute`'s tiles into output rows that start inside a cache line
(`shifted{s}_u32`, `shifted{s}_u64` of stdlib/permute_shifted.tk): 4- and
8-byte elements whose output rows lie s = 1 ... n - 1 elements apart
modulo a line of n (16, 8). Each row of
a tile is written from its own first whole line on, so every streamed store
is a whole line; the ends of the rows that no such line covers go back to
the ordinary tiles. Only for an output large enough to be streamed (as
the kernels' stores are): in the cache, a store across two lines costs
little and the ends' extra passes more (16 x 200 x 200: 0.57 -> 0.38 of a
copy). dsl.ops.permute into an aligned `out`, interleaved, share of a plain
copy, 1 / 2 threads, before -> after, axes (0, 2, 1): f32 60 x 500 x 500
0.34 -> 0.61-0.65 / 0.34-0.43 -> 0.66-0.75, 30 x 1000 x 1000 0.42-0.45 ->
0.75-0.79 / 0.50-0.55 -> 0.82-0.85, 1 x 3000 x 3000 0.31 -> 0.77-0.85 /
0.27-0.46 -> 0.71-0.86; f64 60 x 500 x 500 0.43-0.45 -> 0.78-0.89 /
0.48-0.57 -> 0.88-0.90. The kernel's
part alone ran at 0.84-0.90 of a copy (f32, 1 thread; built for AVX2,
the rows transposed in pieces of 8, 60 x 500 x 500 went 0.23 -> 0.57 and
f64 0.33 -> 0.77 on this Zen 4): the rows' ends,
each a part of a line read before it is written, in passes of their own,
and the last rows of a plane (a tile of their own, reading 16 columns of
every row of x) cost the rest."""

from __future__ import annotations

import math

import numpy as np

from dsl.library import stream_bytes

from .arrays import LINE as _LINE, address
from .library import vector_bits

_MIN_PLANES = 4  # fewer planes than this: rows of tiles become planes, for the threads
_ROW_PARTS = 8  # the rows of a plane in this many parts (planes for parallel(p))


def shifted(lib, src: np.ndarray, dst: np.ndarray, ends) -> bool:
    """dst = src ([P, A, B]; src contiguous along A, dst along B; A, B >= 16)
    by the shifted kernels when dst's rows start inside a line at different
    places (their stride not a whole number of lines); `ends(src, dst)`
    copies the blocks no kernel line covers (each row's first and last
    elements). False, having done nothing, where the kernels do not apply:
    other element sizes, vectors narrower than AVX2's (NEON's 4 lanes of
    a 16-lane row: not measured), an output too small to stream, rows a
    whole number of lines apart, fewer than 2 lines in a row past its
    first, or planes that lie between the rows."""
    size = src.itemsize
    if size not in (4, 8) or vector_bits() < 256 or dst.nbytes < stream_bytes():
        return False
    n = _LINE // size  # elements to a line, and the side of the kernel's tiles
    planes, rows, cols = dst.shape
    stride = dst.strides[1]
    if planes > 1 and abs(dst.strides[0]) < abs(stride):
        # planes between the rows (a reversal, (2, 1, 0)): not whole lines apart, they
        # went one call each, and the ordinary tiles ran faster. Interleaved on an Intel Xeon, f32,
        # share of a copy, shifted -> ordinary, 1 thread: 50 x 500 x 500 0.07 -> 0.30,
        # 100 x 300 x 300 0.26 -> 0.42, 500 x 20 x 500 0.45 -> 0.58, 1000 x 8 x 1000
        # 0.24 -> 0.50; 2 threads: 50 x 500 x 500 0.06 -> 0.31, the others even
        return False
    if stride <= 0 or stride % size or address(dst) % size or rows < n or (cols - n) // n < 2:
        return False
    s = stride // size % n
    if s == 0:
        return False
    whole = rows // n * n
    _cover(lib, src[:, :whole], dst[:, :whole], s, ends)
    if whole < rows:  # the last n rows, a tile of their own (overlapping the others)
        _cover(lib, src[:, rows - n :], dst[:, rows - n :], s, ends)
    return True


def _cover(lib, src: np.ndarray, dst: np.ndarray, s: int, ends) -> None:
    """`shifted` on [P, A, B] with A a multiple of n: the kernel from where
    row 0 reaches a line, each row's ends by `ends`. The rows start their
    lines at up to n places (rows r, r + period, ...: one place); 8-byte
    elements take each place's ends exactly, a strided slice of rows each.
    For 4-byte elements those 2 x 16 slices (s odd) went to the
    element-by-element kernel and took half the time of short rows; two
    blocks of every row's first and last 16-31 columns go to whole tiles
    instead, the columns that the kernel's lines cover again written twice.
    Interleaved, f32, share of a copy, 1 / 2 threads: 200 x 200 x 200
    0.32 -> 0.37-0.38 / 0.35-0.37 -> 0.43-0.47, 100 x 300 x 300 0.33-0.44
    -> 0.45-0.51 / 0.48-0.57 -> 0.56-0.59, 30 x 1000 x 1000 0.75-0.80 ->
    0.75-0.81 / 0.73-0.80 -> 0.76-0.79, 60 x 500 x 500 and 1 x 3000 x 3000
    even (0.61-0.72); f64 lost with blocks (100 x 300 x 300 0.72 -> 0.69,
    60 x 500 x 500 0.87 -> 0.81)."""
    size = src.itemsize
    n = _LINE // size
    cols = dst.shape[2]
    first = (-address(dst) // size) % n  # the column where row 0 reaches a line
    lines = (cols - first) // n - 1  # per row: the kernel's lines (the last shifted by up to n - 1)
    # The ends first: lines they write through the cache are then overwritten
    # whole by the kernel's streamed ones (the other way round, 60 x 500 x 500
    # f32: 6.2-6.8 ms against 5.6-5.7).
    if size == 4:  # every row's first and last n to 2n - 1 columns
        ends(src[:, :, : first + n], dst[:, :, : first + n])
        ends(src[:, :, first + n * lines :], dst[:, :, first + n * lines :])
    else:
        period = n // math.gcd(s, n)  # rows r, r + period, ... start at one place in a line
        for r in range(period):
            start = first + (n - s) * r % n  # where row r's kernel lines start
            stop = start + n * lines
            ends(src[:, r::period, :start], dst[:, r::period, :start])
            ends(src[:, r::period, stop:], dst[:, r::period, stop:])
    _kernel(lib, src, dst, s, first)


def _kernel(lib, src: np.ndarray, dst: np.ndarray, s: int, first: int) -> None:
    """The shifted kernel on [P, A, B] from column `first`, where row 0 reaches a line."""
    n = _LINE // src.itemsize
    kernel = getattr(lib, f"shifted{s}_u{8 * src.itemsize}")
    for x, y in _parts(src[:, :, first:], dst[:, :, first:], n):
        kernel(x.transpose(0, 2, 1), y)


def _parts(src: np.ndarray, dst: np.ndarray, n: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """[P, A, B] views for the kernel, whose row 0 starts where dst's does and
    whose planes lie a whole number of lines apart: all planes in one call
    when there are enough and they do; else each plane's rows in parts of
    whole tiles (n rows of n elements to a line are n x stride bytes: whole
    lines), as planes."""
    planes, rows, cols = dst.shape
    if planes >= _MIN_PLANES and dst.strides[0] % _LINE == 0:
        return [(src, dst)]
    tiles = rows // n
    per = n * max(1, tiles // _ROW_PARTS)  # rows per part; fewer than _ROW_PARTS tiles left over
    count = tiles * n // per
    out = []
    for p in range(planes):
        x, y = src[p], dst[p]
        if count:
            out.append((_stack(x, per, count), _stack(y, per, count)))
        done = count * per
        if done + n <= rows:
            out.append((x[None, done : tiles * n], y[None, done : tiles * n]))
    return out


def _stack(a: np.ndarray, per: int, count: int) -> np.ndarray:
    """Rows 0 ... count * per of the 2-D view `a`, as `count` planes of `per` rows."""
    return np.lib.stride_tricks.as_strided(a, (count, per, a.shape[1]), (per * a.strides[0], *a.strides),
                                           writeable=a.flags.writeable)
