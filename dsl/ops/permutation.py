"""`dsl.ops.permute`: a copy of an array into a permuted layout (the seeds'
unary permutation, e.g. `trus -> turs`), by the kernels of `stdlib/permute.tk`.

The copy `out = x.transpose(axes)` runs over the axes of the two layouts,
merged where both allow it and ordered so that the output's contiguous axis
is innermost and the input's contiguous axis next to it. When both of those
are contiguous, the whole 16 x 16 tiles of the two are transposed in
registers: by `tile_planes_*` (`tiles_*` for fewer than 4 planes;
`tiles_by_plane_u32`, `tiles_by_chunk_*` or `tiles_by_group_*` when the
planes lie between the tiles' rows, `_planes_between_rows`), 4-byte tiles in
pairs where the rows allow (`_in_pairs`: 128 bytes to a row of the output).
For 4- and 8-byte elements the tiles stream their rows to a large output, so
the grid of tiles starts where the output's rows are 64-byte aligned (an
output this function allocates is), and where the input's columns are, so that
no tile reads half a line; the ragged edges go to whole tiles that overlap
those. Output rows that start inside lines at different places take shifted
tiles, each row from its own first line (permute_shifted.py). Planes narrower
than a tile go to `permute2/3_*` (32 x 32 tiles, element by element).
When the two share their contiguous axis, rows are copied whole instead (64
x 512 x 512, axes (1, 0, 2): 32 x 32 tiles read 32 rows 4 MiB apart), in the
input's order, their stores streamed past the caches for large outputs; a
few long rows (a plain copy) go in 64 KiB pieces, so that all threads share
them.
For contiguous arrays these choices depend only on the layout, so the kernel
calls they make are recorded once per layout and replayed (call_plans.py).
"""

from __future__ import annotations

import functools

import numpy as np

from .arrays import LINE as _LINE  # where the tiles' streamed rows must start
from .arrays import address, as_array, check_out, empty_aligned, finish, merge_axes, view_as, writable_target
from .call_plans import record, remember
from .library import intel_avx512, stdlib_module
from .permute_channels import CHANNELS, channels
from .permute_shifted import shifted

_BITS = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_library: list = []
_plans: dict = {}  # (shape, item size, axes, x and target addresses % 64) -> the recorded kernel calls
# (shape, dtype, axes as given, x's address % 64) -> (the result's shape, its plan), for a new
# result of an input checked before: the call is empty_aligned and a replay
# (1 x 16 x 14 x 14 f32 to NHWC on Zen 4: 11.3 -> 7 us)
_fresh: dict = {}
_SMALL_BATCH = 4  # fewer planes than this: each plane's tile rows go to the threads instead
_TILE = 16  # the tiles of `tiles_*`
_SHIFT_MIN_COLS = 256  # shorter rows start their tiles at column 0, aligned or not
_SHIFT_MIN_INPUT = 1024  # the same for the input's columns (its strips cost more: see _aligned_start)
_ENOUGH_PLANES = 16  # planes enough to share among the threads evenly
_CHUNK = 1 << 16  # bytes: the pieces of a long contiguous row the threads share
_PAIR_RUN = 1 << 18  # bytes: the most a pair of tile rows may span (it and the next one asked for, in L2)
_PAIR_SPAN = 1 << 20  # the same where Y's rows lie a multiple of _L1_PERIOD apart (see _in_pairs)
_BY_PLANE_ROW = 1024  # bytes: the longest rows of Y that `tiles_by_plane_u32` writes whole (see _planes_between_rows)
_CHUNK_PLANES = 4  # planes a reversal's tiles take at a time (_by_chunks)
_L1_PERIOD = 4096  # bytes: rows a multiple of this apart fall in one set of the L1 cache (64 sets of 64 B)


def permute(x, axes, out=None) -> np.ndarray:
    """A new array (or `out`) holding `x.transpose(axes)`, C-contiguous.

    >>> dsl.ops.permute(np.arange(6, dtype=np.float32).reshape(2, 3), (1, 0))
    array([[0., 3.],
           [1., 4.],
           [2., 5.]], dtype=float32)
    """
    if out is None and type(x) is np.ndarray and type(axes) is tuple:
        seen = _fresh.get((x.shape, x.dtype, axes, address(x) % _LINE))  # a layout seen before: no checks to redo
        if seen is not None and x.flags.c_contiguous and x.flags.aligned:
            shape, plan = seen
            target = empty_aligned(shape, x.dtype)
            plan.run(_kernels(), (x, target))
            return target
    x = as_array("permute", "x", x)
    given, axes = axes, _check_axes(x, axes)
    if x.dtype.hasobject or x.dtype.itemsize not in _BITS:
        raise TypeError(f"permute: unsupported dtype {x.dtype} (any dtype of 1, 2, 4 or 8 bytes, not objects)")
    src = x.transpose(axes)
    fresh = out is None
    if fresh:
        out = empty_aligned(src.shape, x.dtype)
    else:
        out = check_out("permute", out, src.shape, x.dtype)
    if out.size == 0:
        return out
    target = writable_target(out, x)
    if x.flags.c_contiguous and x.flags.aligned and target.flags.c_contiguous and target.flags.aligned:
        plan = _planned(x, axes, target)
        if fresh and type(given) is tuple:  # a new aligned array: the same plan every time
            remember(_fresh, (x.shape, x.dtype, given, address(x) % _LINE), (target.shape, plan))
    else:
        _copy(src, target, _kernels())
    return finish(target, out)


def _planned(x: np.ndarray, axes: tuple[int, ...], target: np.ndarray):
    """`_copy` of contiguous arrays: its kernel calls recorded for this layout
    (shape, item size, axes, where the rows of x and target fall in a line)
    once, then replayed (call_plans.py). Returns the plan."""
    key = (x.shape, x.itemsize, axes, address(x) % _LINE, address(target) % _LINE)
    plan = _plans.get(key)
    if plan is None:
        plan = record(lambda lib: _copy(x.transpose(axes), target, lib), (x, target))
        remember(_plans, key, plan)
    plan.run(_kernels(), (x, target))
    return plan


def _kernels():
    if not _library:  # looked up once: finding it hashes the sources
        _library.append(_Kernels())
    return _library[0]


class _Kernels:
    """The kernels of stdlib/permute.tk, permute_shifted.tk and channels.tk as one library
    (a recorded plan names its kernels, whichever module holds them); each
    found once, then an attribute of its own."""

    def __init__(self):
        self._modules = [stdlib_module(m) for m in ("permute", "permute_shifted", "channels")]

    def __getattr__(self, name: str):
        kernel = next((k for k in (getattr(m, name, None) for m in self._modules[:-1]) if k), None)
        kernel = kernel or getattr(self._modules[-1], name)
        setattr(self, name, kernel)
        return kernel


def _check_axes(x: np.ndarray, axes) -> tuple[int, ...]:
    try:
        axes = tuple(int(a) for a in axes)
    except TypeError:
        raise TypeError(f"permute: axes must be a sequence of integers, got {type(axes).__name__}") from None
    if len(axes) != x.ndim:
        raise ValueError(f"permute: axes don't match array (got {len(axes)} axes for an array of {x.ndim} dimensions)")
    normal = tuple(a + x.ndim if a < 0 else a for a in axes)
    if any(not 0 <= a < x.ndim for a in normal):
        raise ValueError(f"permute: axis out of bounds in {axes} for an array of {x.ndim} dimensions")
    if len(set(normal)) != len(normal):
        raise ValueError(f"permute: repeated axis in transpose ({axes})")
    return normal


def _copy(src: np.ndarray, dst: np.ndarray, lib) -> None:
    """dst[...] = src, element bits as they are, by `lib`'s kernels."""
    unsigned = _BITS[src.itemsize]
    if src.strides and any(s % src.itemsize for s in src.strides + dst.strides) or not src.flags.aligned:
        np.copyto(dst, src)  # layouts no element stride describes: numpy's copy is the one that can
        return
    src, dst = src.view(unsigned), dst.view(unsigned)
    order = sorted(range(src.ndim), key=lambda i: (abs(dst.strides[i]), abs(src.strides[i])), reverse=True)
    src, dst = src.transpose(order), dst.transpose(order)
    src, dst = merge_axes([src, dst], src.ndim)
    if src.ndim >= 2:  # the input's most contiguous axis next to the innermost
        inner = min(range(src.ndim - 1), key=lambda i: abs(src.strides[i]))
        if abs(src.strides[inner]) < abs(src.strides[-1]):
            rest = [i for i in range(src.ndim - 1) if i != inner] + [inner, src.ndim - 1]
            src, dst = src.transpose(rest), dst.transpose(rest)
    while src.ndim < 2:
        src, dst = src[None], dst[None]
    _planes(lib, unsigned, src, dst)


def _planes(lib, unsigned, src: np.ndarray, dst: np.ndarray) -> None:
    t = f"u{np.dtype(unsigned).itemsize * 8}"
    if src.strides[-1] == dst.strides[-1] == src.itemsize and src.ndim <= 3:  # rows contiguous on both sides
        if src.ndim == 2 and src.shape[0] < _ENOUGH_PLANES and src.shape[1] * src.itemsize >= 2 * _CHUNK:
            for row in range(src.shape[0]):  # few long rows (a plain copy): pieces of them on the threads
                _row_in_pieces(lib, t, src[row], dst[row])
            return
        if src.ndim == 2:  # each row a plane of its own: rows3 shares its planes among the threads
            src, dst = src[:, None], dst[:, None]
        elif _rows_in_input_order(src):
            src, dst = src.transpose(1, 0, 2), dst.transpose(1, 0, 2)
        getattr(lib, f"rows3_{t}")(src, dst)
        return
    both = src.strides[-2] == dst.strides[-1] == src.itemsize and src.ndim <= 3
    if both and _TILE <= min(src.shape[-2:]):
        _tiles(lib, t, src if src.ndim == 3 else src[None], dst if dst.ndim == 3 else dst[None])
        return
    if both and min(src.shape[-2:]) in CHANNELS:
        src3, dst3 = (src, dst) if src.ndim == 3 else (src[None], dst[None])
        done = channels(lib, t, src3, dst3)
        if done:  # the pixels left over, fewer than a register's, element by element
            rest = np.s_[..., done:] if src.shape[-2] in CHANNELS else np.s_[..., done:, :]
            if src[rest].size:
                _planes(lib, unsigned, src[rest], dst[rest])
            return
    if src.ndim == 2:
        getattr(lib, f"permute2_{t}")(src, dst)
    elif src.ndim == 3 and src.shape[0] >= _SMALL_BATCH:
        getattr(lib, f"permute3_{t}")(src, dst)
    else:
        for i in range(src.shape[0]):
            _planes(lib, unsigned, src[i], dst[i])


def _row_in_pieces(lib, t: str, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src, one contiguous row, as planes of `_CHUNK` bytes that rows3
    shares among the threads, then the rest (a row is one plane: 64 x 512 x
    512 f32, axes (0, 1, 2), 2 threads, ran on one)."""
    size = _CHUNK // src.itemsize
    whole = src.shape[0] - src.shape[0] % size
    pieces = [(src[:whole].reshape(-1, 1, size), dst[:whole].reshape(-1, 1, size))]
    if whole < src.shape[0]:
        pieces.append((src[None, None, whole:], dst[None, None, whole:]))
    for a, b in pieces:
        getattr(lib, f"rows3_{t}")(a, b)


def _rows_in_input_order(src: np.ndarray) -> bool:
    """Whether rows3 should swap the two outer axes of [P, A, row]: to read the
    input in its own order (its larger stride outermost) when that leaves
    enough planes for the threads, else to share the longer axis. The output
    rows are streamed past the caches (rows3's nontemporal=), so their order
    matters less than the reads' (64 x 512 x 512, axes (1, 0, 2), 2 KiB rows:
    1 thread 18.0 -> 20.8 GB/s, 2 threads 35.2 -> 39.7)."""
    by_input = abs(src.strides[1]) > abs(src.strides[0])
    if src.shape[1 if by_input else 0] >= _ENOUGH_PLANES:
        return by_input
    return src.shape[0] < src.shape[1]


def _tiles(lib, t: str, src: np.ndarray, dst: np.ndarray) -> None:
    """dst = src ([P, A, B], A and B >= 16; src contiguous along A, dst along
    B): whole 16 x 16 tiles in registers, from the row where src's columns
    and the column where dst's rows are aligned. The rows and columns left
    over go to whole tiles too, that overlap the others (the same values
    written twice): element by element, 12 columns at the start of 64 x 512
    x 512 f32 rows, axes (0, 2, 1), took a fifth of the time. Rows of dst
    that start inside lines at different places go to the shifted tiles
    (permute_shifted.py), whose rows' ends come back to `_copy`."""
    if shifted(lib, src, dst, lambda s, d: _copy(s, d, lib)):  # dst's rows start inside lines
        return
    rows, cols = src.shape[1:]
    first_row, first = _aligned_start(src, 1, _SHIFT_MIN_INPUT), _aligned_start(dst, 2, _SHIFT_MIN_COLS)
    row_blocks = _blocks(rows, first_row)
    col_blocks = _blocks(cols, first)
    # whole planes to each thread when there are enough: 64 x 512 x 512, axes (0, 2, 1), on
    # 2 threads was never slower than sharing each plane's rows of tiles, and up to 1.36x faster
    planes = src.shape[0] >= _SMALL_BATCH
    kernel = getattr(lib, f"{'tile_planes' if planes else 'tiles'}_{t}")
    if planes and t in ("u32", "u64") and _planes_between_rows(src) and _rows_on_lines(dst, first):
        if t == "u32" and intel_avx512() and dst.shape[2] * dst.itemsize <= _BY_PLANE_ROW:
            kernel = lib.tiles_by_plane_u32
        else:
            kernel = functools.partial(_by_chunks, lib, t)
    pairs = getattr(lib, f"{'pair_planes' if planes else 'pairs'}_{t}") if _in_pairs(src, dst) else None
    for r0, r1 in row_blocks:
        for c0, c1 in col_blocks:
            paired = c1 - c0 - (c1 - c0) % (2 * _TILE) if pairs else 0
            if paired:
                block = np.s_[:, r0:r1, c0 : c0 + paired]
                pairs(*_split_pairs(src[block].transpose(0, 2, 1), dst[block]))
            if c0 + paired < c1:
                block = np.s_[:, r0:r1, c0 + paired : c1]
                kernel(_split_tiles(src[block].transpose(0, 2, 1)), _split_tiles(dst[block]))


def _planes_between_rows(src: np.ndarray) -> bool:
    """Whether the planes of src ([P, A, B], contiguous along A) lie between
    the rows of X (its columns, B), as in a whole reversal (2, 1, 0): each
    of a tile's 16 rows then runs on into the next plane. On an Intel core
    with AVX-512, where dst's rows (B) are at most `_BY_PLANE_ROW` bytes,
    4-byte tiles go plane by plane, 16 rows of dst at a time, each written
    whole (`tiles_by_plane_u32`; it reads a line from each of B rows of X,
    in L2 by its ask). Interleaved on an Intel Xeon (2 MiB of L2 a core),
    through the op into an aligned output, f32 (2, 1, 0), share of a plain copy, by
    group -> by plane, 1 thread: 64 x 512 x 512 0.74 -> 0.87,
    48 x 640 x 768 0.80 -> 0.89, 128 x 256 x 256 0.69 -> 0.78, 256 x 64 x
    256 0.68 -> 0.72; 2 threads 0.68 -> 0.79, 0.71 -> 0.76, 0.67 -> 0.73,
    even. Longer rows lose by plane (the kernels alone, 1 thread: 384 x 64
    x 512 0.76 -> 0.76, on 2 threads 0.70 -> 0.64; 512 x 64 x 256 0.73 ->
    0.67; 1024 x 64 x 1024 0.65 -> 0.40), and 8-byte tiles gain nothing
    sure (0.80-1.13x): they go one group of 16 rows through the planes (a
    chunk of them at a time, `_by_chunks`), 16 streams of reads instead of
    a plane's 16 rows, group after group (Zen 4, 64 x 512 x 512, 1 thread,
    through every plane: 0.46 -> 0.52 of a copy, against each plane's groups
    in turn). On Zen 4 (1 MiB
    of L2) 4-byte tiles go by group too: by plane lost half the speed (the
    kernels alone, 1 thread, share of a copy, by plane -> by group, 64 x 512
    x 512 0.29 -> 0.52, 48 x 640 x 768 0.29 -> 0.55, 128 x 256 x 256 0.20
    -> 0.45, 256 x 64 x 256 0.22 -> 0.43; built for znver3 0.17-0.20 ->
    0.36-0.46; 32 x 256 x 1024 level)."""
    return abs(src.strides[2]) > abs(src.strides[0])


def _by_chunks(lib, t: str, x: np.ndarray, y: np.ndarray) -> None:
    """`tiles_by_group_{t}(x, y)` ([P, JB, 16, IB, 16] views) a chunk of
    `_CHUNK_PLANES` planes at a time (`tiles_by_chunk_{t}`; the planes left
    over by group): each group's 16 streams of reads then go 4 rows of X at a
    time, not one. Zen 4, f32 (2, 1, 0) through the op into an aligned
    output, interleaved, two runs of 9 samples, by group -> by chunk, GB/s,
    1 thread: 64 x 512 x 512 16.3 -> 17.0 and 13.4 -> 15.2, 48 x 640 x 768
    20.9 -> 21.2 and 16.8 -> 18.2, 128 x 256 x 256 16.5 -> 16.9 and 13.3 ->
    14.5, 256 x 64 x 256 level; 2 threads: 18.4 -> 18.6 and 25.8 -> 29.6,
    31.2 -> 32.3 and 31.7 -> 34.7, 24.5 -> 29.7 and 22.9 -> 27.4, 24.2 ->
    27.6 and 22.6 -> 27.0. (Chunks of 2, 4 and 8 planes ran alike.) f64
    through the op, 1 / 2 threads: 64 x 512 x 256 16.5 -> 18.7 / 31.0 ->
    33.7, 48 x 320 x 384 18.7 -> 19.5 / 31.9 -> 33.7, 128 x 128 x 256 19.7
    -> 20.7 / 27.5 -> 29.8 (the kernels alone, share of a copy: 0.62-0.67
    -> 0.66-0.73 / 0.80-0.81 -> 0.85-0.89)."""
    whole = x.shape[0] - x.shape[0] % _CHUNK_PLANES
    if whole:
        chunks = (whole // _CHUNK_PLANES, _CHUNK_PLANES)
        getattr(lib, f"tiles_by_chunk_{t}")(view_as(x[:whole], chunks + x.shape[1:]),
                                            view_as(y[:whole], chunks + y.shape[1:]))
    if whole < x.shape[0]:
        getattr(lib, f"tiles_by_group_{t}")(x[whole:], y[whole:])


def _rows_on_lines(dst: np.ndarray, first: int) -> bool:
    """Whether every row of dst ([P, A, B]) reaches a 64-byte line at column
    `first`, where the grid of tiles starts: the tiles' rows are then
    streamed past the caches whole. Rows that start inside a line are
    written through the cache, each line in two parts by two groups of tiles:
    `tiles_by_group` takes the second part a whole pass over the planes
    later, when the line has left the cache (64 x 512 x 512 f32, (2, 1, 0),
    into np.empty's output, 16 bytes past a line: 10.4 -> 4.0 GB/s)."""
    return (address(dst) + first * dst.itemsize) % _LINE == 0 and _whole_lines(dst.strides[:2])


def _in_pairs(src: np.ndarray, dst: np.ndarray) -> bool:
    """Whether `_tiles` takes its tiles in pairs, one above the other in X
    (`pair_planes_u32`, `pairs_u32`): for 4-byte elements, whose tiles then
    stream 128 bytes to each row of Y instead of 64. The kernels ask for the
    next pair's lines as one run, so X's rows (src's columns) must follow one
    another, in whole lines. A pair of X's rows spans at most `_PAIR_RUN`
    (it and the next one asked for stay in L2; 1 x 4000 x 4000, 500 KiB:
    pairs 0.74-0.79 of a copy on 1 thread, single tiles 0.87), except where
    Y's rows lie a multiple of 4 KiB apart: there a single tile's 16 stores
    all fall on the same low address bits, and pairs win up to a span of
    `_PAIR_SPAN` (1 MiB, L2's size). Interleaved, f32, share of a plain copy,
    single tiles -> pairs, 1 thread (2 threads): 4096 x 4096 (1, 0) 0.57 ->
    0.65 (0.69-0.73 -> 0.76-0.82), 4096 x 4000 (1, 0) 0.66 -> 0.81 (0.71 ->
    0.85), 16 x 1024 x 1024 (0, 2, 1) 0.56 -> 0.60 (0.67-0.76 -> 0.71-0.78),
    2048 x 8192 (1, 0) 0.59 -> 0.66; with X's rows alone 16 KiB apart
    (4000 x 4096) even. Before the tiles asked for their next lines into L1
    (permute.tk), pairs lost at those strides (0.87-0.95x). Elsewhere, pairs
    against single tiles, 1 thread: 1.06-1.25x with rows of 0.5-2 KiB,
    1.2-1.4x with rows of 3-6 KiB."""
    size = src.itemsize
    x_rows, y_rows = src.strides[2], abs(dst.strides[1])
    if size != 4 or x_rows != src.shape[1] * size or not _whole_lines((x_rows, y_rows)):
        return False
    span = x_rows * 2 * _TILE
    return span <= _PAIR_RUN and x_rows % _L1_PERIOD != 0 or span <= _PAIR_SPAN and y_rows % _L1_PERIOD == 0


def _aligned_start(a: np.ndarray, axis: int, min_length: int) -> int:
    """Where the whole tiles start along `axis`, `a`'s contiguous one: where
    its lines along that axis reach a 64-byte boundary, when every line is as
    far from one (other strides of whole lines), a tile's row is a line or
    more (4- and 8-byte elements) and the lines are at least `min_length`
    long, so that the elements left out, copied by tiles of their own, cost
    less than unaligned tiles. numpy puts a large array 16 bytes past a page;
    1 thread, the output: 64 x 512 x 512 f32, axes (0, 2, 1), 9.5 ms from
    column 0, 8.1 from column 12 (with 64-element rows, axes (2, 1, 0), slower:
    10.9 -> 7.8 GB/s). The input: a tile's row across two lines is read by
    two tiles, the line kept for the second while 15 others pass through L1;
    its strips of 16 columns, one line from each of its rows, cost more, so
    its lines must be longer: 16 bytes past a line, f32, GB/s, unshifted ->
    shifted: 4096 x 4096 20.1 -> 23.2, 4112 x 4112 28.4 -> 30.4, 4 x 2048 x
    2048 21.5 -> 23.8, 16 x 1024 x 1024 21.6 -> 22.7, but 64 x 512 x 512
    25.5 -> 22.0."""
    size = a.itemsize
    start = address(a)
    others = [s for k, s in enumerate(a.strides) if k != axis]
    if size < 4 or start % size or a.shape[axis] < min_length or not _whole_lines(others):
        return 0
    return (-start) % _LINE // size


def _whole_lines(strides) -> bool:
    """Whether each of these strides (bytes) is a whole number of 64-byte lines."""
    return all(s % _LINE == 0 for s in strides)


def _blocks(n: int, first: int) -> list[tuple[int, int]]:
    """Ranges of whole tiles covering 0..n (n >= 16): the tiles from `first`,
    then a tile at 0 for the part before `first` and one ending at n for the
    part after the last whole tile (both overlapping the others)."""
    whole = (n - first) - (n - first) % _TILE
    blocks = [(first, first + whole)] if whole else []
    blocks += [(0, _TILE)] if first else []
    return blocks + ([(n - _TILE, n)] if first + whole < n else [])


def _split_pairs(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """X [P, R, C] and Y [P, C, R] (R a multiple of 32, C of 16) as the views
    [P, R / 32, 2, 16, C / 16, 16] and [P, C / 16, 16, R / 32, 2, 16]."""
    p, r, c = x.shape
    pairs, tiles = r // (2 * _TILE), c // _TILE
    return (view_as(x, (p, pairs, 2, _TILE, tiles, _TILE)), view_as(y, (p, tiles, _TILE, pairs, 2, _TILE)))


def _split_tiles(a: np.ndarray) -> np.ndarray:
    """[P, R, C] (R, C multiples of 16) as the view [P, R / 16, 16, C / 16, 16]."""
    p, r, c = a.shape
    return view_as(a, (p, r // _TILE, _TILE, c // _TILE, _TILE))
