"""`dsl.ops.permute`'s tiles into output rows that start inside a cache line
(`shifted{s}_u32`, `shifted{s}_u64` of stdlib/permute_shifted.tk): 4- and
8-byte elements whose output rows lie s = 1 ... n - 1 elements apart
modulo a line of n (16, 8). Each row of
a tile is written from its own first whole line on, so every streamed store
is a whole line; the ends of the rows that no such line covers go back to
the ordinary tiles. Only for an output large enough to be streamed (as
the kernels' stores are): in the cache, a store across two lines costs
little and the ends' extra passes more (16 x 200 x 200: 0.57 -> 0.38 of a
copy). Interleaved, share of a plain copy, 1 / 2 threads, before -> after:
60 x 500 x 500 0.30 -> 0.54 / 0.37 -> 0.63, 30 x 1000 x 1000 0.42 -> 0.74 /
0.43 -> 0.75; the kernel's part alone 0.88-0.90 / 0.93-0.99: the ends,
copied in passes of their own into lines the kernel streamed, cost the
rest."""

from __future__ import annotations

import os
import re

import numpy as np

from dsl.backends.llvm.streaming import ENV_VAR, STREAM_BYTES

from .arrays import address
from .library import wide_vectors

_LINE = 64
_TILE = 16  # the side of permute.tk's tiles, which copy the ends
_MIN_PLANES = 4  # fewer planes than this: rows of tiles become planes, for the threads
_ROW_PARTS = 8  # the rows of a plane in this many parts (planes for parallel(p))


def shifted(lib, src: np.ndarray, dst: np.ndarray, rest) -> bool:
    """dst = src ([P, A, B]; src contiguous along A, dst along B; A, B >= 16)
    by the shifted kernels when dst's rows start inside a line at different
    places (their stride not a whole number of lines); `rest(src, dst)`
    copies the blocks no kernel line covers (each row's first and last
    elements, the rows past the last whole tile). False, having done
    nothing, where the kernels do not apply: other element sizes, no
    512-bit vectors (a 16-lane tile in one register), an output too small
    to stream, rows a whole number of lines apart, or fewer than 32
    elements in a row past its first line."""
    size = src.itemsize
    if size not in (4, 8) or not wide_vectors() or dst.nbytes < _stream_bytes():
        return False
    n = _LINE // size  # elements to a line, and the side of the kernel's tiles
    planes, rows, cols = dst.shape
    stride, start = dst.strides[1], address(dst)
    if stride <= 0 or stride % size or start % size or rows < _TILE:
        return False
    s = stride // size % n
    first = (-start // size) % n  # the column where row 0 reaches a line
    lines = (cols - first) // n - 1  # per row: the kernel's lines (the last shifted by up to n - 1)
    if s == 0 or lines < 1 or cols < _TILE:
        return False
    kernel = getattr(lib, f"shifted{s}_u{8 * size}")
    # The ends first: lines they write through the cache are then overwritten
    # whole by the kernel's streamed ones (the other way round, 60 x 500 x 500
    # f32: 6.2-6.8 ms against 5.6-5.7).
    head = max(_TILE, first + n - 1)  # every row's lines start before this column
    end = min(first + n * lines, cols - _TILE)  # and end at or after this one
    rest(src[:, :, :head], dst[:, :, :head])
    rest(src[:, :, end:], dst[:, :, end:])
    if rows % n:
        rest(src[:, rows - _TILE :], dst[:, rows - _TILE :])
    for x, y in _parts(src[:, :, first:], dst[:, :, first:], n):
        kernel(x.transpose(0, 2, 1), y)
    return True


def _stream_bytes() -> int:
    """The size from which the kernels stream their stores: DSL_STREAM_BYTES's
    leading digits, as the compiled code reads it, else STREAM_BYTES."""
    digits = re.match(r"\d+", os.environ.get(ENV_VAR, ""))
    return int(digits.group()) if digits else STREAM_BYTES


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
    per = n * -(-tiles // min(tiles, _ROW_PARTS))  # rows per part
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
