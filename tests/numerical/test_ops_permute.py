"""dsl.ops.permute against numpy's transpose: ranks 1 to 5, dtypes of every
size, views (steps, negative steps, transposed), `out`, errors, threads."""

import itertools

import numpy as np
import pytest

import dsl


def rand(shape, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(shape) * 100).astype(dtype)


@pytest.mark.parametrize("shape", [(3, 4, 7, 5), (33, 65), (1, 40, 1, 70), (0, 5, 3)])
def test_every_permutation(shape):
    x = rand(shape, np.float32)
    for axes in itertools.permutations(range(len(shape))):
        got = dsl.ops.permute(x, axes)
        assert got.flags.c_contiguous
        assert np.array_equal(got, x.transpose(axes)), axes


@pytest.mark.parametrize("dtype", [np.int8, np.float16, np.int32, np.float64, np.complex64, np.bool_, np.uint64])
def test_dtypes(dtype):
    x = rand((37, 5, 66), dtype)
    assert np.array_equal(dsl.ops.permute(x, (2, 0, 1)), x.transpose(2, 0, 1))


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32, np.float64])
@pytest.mark.parametrize("shape, axes", [((16, 16), (1, 0)), ((48, 80), (1, 0)), ((37, 70), (1, 0)),
                                         ((3, 33, 50), (0, 2, 1)), ((20, 17, 5), (2, 1, 0)),
                                         ((6, 40, 35), (0, 2, 1)), ((33, 5, 40), (2, 1, 0))])
def test_whole_tiles_and_ragged_edges(dtype, shape, axes):
    """Transposes of >= 16 x 16: whole tiles in registers (rows of tiles on the
    threads for 3 planes, whole planes for 5 or 6), the rest element by element."""
    x = rand(shape, dtype, seed=sum(shape))
    assert np.array_equal(dsl.ops.permute(x, axes), x.transpose(axes))
    view = x[..., 1:]  # rows no longer contiguous after each other
    assert np.array_equal(dsl.ops.permute(view, axes), view.transpose(axes))


def test_replayed_plans_follow_the_layout():
    """Contiguous operands replay the kernel calls recorded for their layout
    (ops/call_plans.py): new values, new arrays, an output whose rows fall
    elsewhere in a line (another plan: the tiles start where the rows are
    aligned), and an input seen first as a view (not recorded) then whole."""
    from dsl.ops import permutation
    from dsl.ops.arrays import empty_aligned

    for seed in range(3):
        x = rand((6, 300, 40), np.float32, seed=seed)
        for offset in (0, 3, 0, 5):
            room = empty_aligned((x.size + 16,), np.float32)
            room[:] = 7
            out = room[offset:offset + x.size].reshape(6, 40, 300)
            dsl.ops.permute(x, (0, 2, 1), out=out)
            assert np.array_equal(out, x.transpose(0, 2, 1)), (seed, offset)
            assert (room[:offset] == 7).all() and (room[offset + x.size:] == 7).all()
    layouts = {key for key in permutation._plans if key[:3] == ((6, 300, 40), 4, (0, 2, 1))}
    assert {key[4] for key in layouts} == {0, 12, 20}  # one plan per position of out's rows in a line
    x = rand((9, 70, 33), np.int16)
    assert np.array_equal(dsl.ops.permute(x[:, :, 1:], (2, 0, 1)), x[:, :, 1:].transpose(2, 0, 1))
    assert np.array_equal(dsl.ops.permute(x, (2, 0, 1)), x.transpose(2, 0, 1))


def test_tiles_start_where_the_input_columns_are_aligned():
    """An input whose long columns start mid-line (numpy's large arrays, 16
    bytes past a page): the tiles start at its first aligned column, the
    elements before it and after the last whole tile go to tiles of their own
    (one plan per position in a line: 2 kernel calls aligned, 6 shifted)."""
    from dsl.ops import permutation
    from dsl.ops.arrays import empty_aligned

    rows, cols = 40, 1040  # rows of 65 whole lines
    for offset in (0, 1, 5, 13):
        room = empty_aligned((rows * cols + 16,), np.float32)
        room[:] = np.arange(room.size, dtype=np.float32)
        x = room[offset:offset + rows * cols].reshape(rows, cols)
        assert np.array_equal(dsl.ops.permute(x, (1, 0)), x.T), offset
        out = np.full((cols + 1, rows), -1.0, np.float32)
        dsl.ops.permute(x, (1, 0), out=out[1:])
        assert np.array_equal(out[1:], x.T) and (out[0] == -1).all(), offset
    plans = {key[3]: plan for key, plan in permutation._plans.items() if key[:3] == ((rows, cols), 4, (1, 0))}
    assert set(plans) == {0, 4, 20, 52}
    assert [len(plans[k].steps) for k in (0, 4, 20, 52)] == [2, 6, 6, 6]


def test_pairs_of_tiles_where_the_rows_allow():
    """4-byte tiles go in pairs, one above the other in the input (128 bytes
    to each output row), when the input's rows follow one another in whole
    lines, a pair of input rows spans at most 256 KiB and the input's rows
    lie no multiple of 4 KiB apart, or else the output's rows lie a multiple
    of 4 KiB apart and a pair spans at most 1 MiB; 16 rows left after the
    pairs go to single tiles. Exact on 1 and 2 threads."""
    from dsl.ops import permutation

    def kernels(shape, dtype=np.float32):
        x = rand(shape, dtype, seed=sum(shape))
        for threads in (1, 2):
            dsl.set_num_threads(threads)
            assert np.array_equal(dsl.ops.permute(x, (0, 2, 1)), x.transpose(0, 2, 1)), (shape, threads)
        dsl.set_num_threads(0)
        plans = [plan for key, plan in permutation._plans.items() if key[:3] == (shape, x.itemsize, (0, 2, 1))]
        return {fn for plan in plans for fn, _, _ in plan.steps}

    assert kernels((5, 48, 80)) == {"pair_planes_u32", "tile_planes_u32"}  # 32 rows in pairs, 16 single
    assert kernels((2, 64, 80)) == {"pairs_u32"}  # few planes: the rows of pairs on the threads
    assert kernels((4, 64, 1024)) == {"tile_planes_u32"}  # input rows 4 KiB apart
    assert kernels((4, 1024, 64)) == {"pair_planes_u32"}  # output rows 4 KiB apart
    assert kernels((1, 32, 2304)) == {"tiles_u32"}  # a pair spans 288 KiB
    assert kernels((1, 1024, 2304)) == {"pairs_u32"}  # the same, into output rows 4 KiB apart
    assert kernels((4, 64, 100)) == {"tile_planes_u32"}  # rows not whole lines
    assert kernels((4, 64, 80), np.float64) == {"tile_planes_u64"}


def test_rows_inside_lines_take_shifted_tiles(monkeypatch):
    """Output rows s = 1 ... n - 1 elements mod n apart (n to a line: 16 f32,
    8 f64) start inside lines at different places: a large (streamed)
    output takes `shifted{s}_u32` / `_u64`, each
    tile row from its own first whole line, and the rows' ends the ordinary
    tiles; planes a whole number of lines apart in one call, others (and
    fewer than 4 planes) as parts of rows. Streaming forced for these small
    arrays; exact at 1 and 2 threads, `out` at two places in a line, nothing
    written outside it."""
    from dsl.ops import permutation
    from dsl.ops.arrays import empty_aligned
    from dsl.ops.library import vector_bits

    monkeypatch.setenv("DSL_STREAM_BYTES", "0")  # read by the op at each choice
    monkeypatch.setattr(permutation, "_plans", {})
    monkeypatch.setattr(permutation, "_fresh", {})
    cases = [(np.float32, 5, 4, 40), (np.float32, 6, 1, 48), (np.float32, 1, 15, 70), (np.float32, 2, 8, 33),
             (np.float32, 4, 12, 64), (np.float64, 5, 3, 40), (np.float64, 1, 6, 37)]
    for dtype, planes, s, rows in cases:
        n = 64 // np.dtype(dtype).itemsize  # elements to a line
        x = rand((planes, 3 * n + s, rows), dtype, seed=s)
        want = x.transpose(0, 2, 1)
        for offset in (0, 5):
            room = empty_aligned((want.size + 32,), dtype)
            room[:] = -1
            out = room[offset : offset + want.size].reshape(want.shape)
            for threads in (1, 2):
                dsl.set_num_threads(threads)
                dsl.ops.permute(x, (0, 2, 1), out=out)
                assert np.array_equal(out, want), (dtype, planes, s, rows, offset, threads)
            dsl.set_num_threads(0)
            assert (room[:offset] == -1).all() and (room[offset + want.size :] == -1).all()
        steps = {fn for key, plan in permutation._plans.items() if key[0] == x.shape for fn, _, _ in plan.steps}
        assert (f"shifted{s}_u{8 * x.itemsize}" in steps) == (vector_bits() >= 256), (dtype, planes, s, steps)


@pytest.mark.parametrize("intel", [True, False], ids=["intel-avx512", "other"])
def test_a_reversal_takes_whole_planes_or_one_group_of_rows_through_every_plane(monkeypatch, intel):
    """(2, 1, 0) of [I, J, K]: the planes (J) lie between the rows a tile
    reads (I). When the output's rows start on a line, 4-byte tiles go plane
    by plane on an Intel core with AVX-512, each output row written whole,
    where those rows are at most 1 KiB (`tiles_by_plane_u32`); elsewhere,
    and for longer rows and 8-byte tiles, one group of 16 rows goes through
    a chunk of 4 planes at a time (`tiles_by_chunk_*`, the planes left over
    by `tiles_by_group_*`). A
    (0, 2, 1) keeps its planes outermost; output rows that start inside a
    line are written through the cache, planes outermost, and a reversal
    never takes the shifted tiles. Exact on 1 and 2 threads, edges
    included."""
    from dsl.ops import permutation
    from dsl.ops.arrays import empty_aligned

    monkeypatch.setattr(permutation, "intel_avx512", lambda: intel)
    monkeypatch.setattr(permutation, "_plans", {})  # plans recorded under the other choice
    monkeypatch.setattr(permutation, "_fresh", {})
    chunks = {"tiles_by_chunk_u32"}
    by_plane = {"tiles_by_plane_u32"} if intel else chunks

    def kernels(shape, axes, dtype, out_offset=None):
        x = rand(shape, dtype, seed=len(shape))
        out = None
        if out_offset is not None:
            room = empty_aligned((x.size + out_offset,), dtype)
            out = room[out_offset:].reshape(x.transpose(axes).shape)
        for threads in (1, 2):
            dsl.set_num_threads(threads)
            assert np.array_equal(dsl.ops.permute(x, axes, out=out), x.transpose(axes)), (shape, axes, threads)
        dsl.set_num_threads(0)
        plans = [plan for key, plan in permutation._plans.items() if key[:3] == (shape, x.itemsize, axes)]
        return {fn for plan in plans for fn, _, _ in plan.steps}

    assert kernels((32, 8, 50), (2, 1, 0), np.float32) == by_plane  # 128-byte rows
    assert kernels((256, 4, 20), (2, 1, 0), np.float32) == by_plane  # 1 KiB rows
    assert kernels((272, 4, 20), (2, 1, 0), np.float32) == chunks  # 1088-byte rows
    # 7 planes: a chunk of 4, the other 3 by group
    assert kernels((272, 7, 20), (2, 1, 0), np.float32) == chunks | {"tiles_by_group_u32"}
    assert kernels((32, 8, 50), (2, 1, 0), np.float64) == {"tiles_by_chunk_u64"}
    assert kernels((32, 6, 50), (2, 1, 0), np.float64) == {"tiles_by_chunk_u64", "tiles_by_group_u64"}
    assert kernels((6, 20, 50), (0, 2, 1), np.float32) == {"tile_planes_u32"}
    assert kernels((64, 6, 48), (2, 1, 0), np.float32, out_offset=4) == {"tile_planes_u32"}  # 16 bytes past a line
    monkeypatch.setenv("DSL_STREAM_BYTES", "0")  # large enough for the shifted tiles, were it not a reversal
    assert kernels((50, 6, 40), (2, 1, 0), np.float32) == {"tile_planes_u32"}  # rows 200 bytes apart


def test_nan_bits_kept():
    x = np.array([[np.nan, -0.0], [1.0, np.inf]], np.float32)
    x.view(np.uint32)[0, 0] = 0x7FC01234  # a NaN with a payload
    got = dsl.ops.permute(x, (1, 0))
    assert np.array_equal(got.view(np.uint32), x.T.view(np.uint32))


def test_seed_trus_to_turs():
    """The seeds' example: t r u s -> t u r s."""
    for t, r, u, s in itertools.product((3, 4, 7), repeat=4):
        x = rand((t, r, u, s), np.float32, seed=t + r + u + s)
        assert np.array_equal(dsl.ops.permute(x, (0, 2, 1, 3)), x.transpose(0, 2, 1, 3))


def test_views_and_out():
    x = rand((40, 30, 20), np.float64)[::-3, 1::2, ::2].transpose(1, 2, 0)
    out = np.zeros((14, 20, 15), np.float64)[:, ::2].transpose(1, 0, 2)  # (10, 14, 15), strided
    assert dsl.ops.permute(x, (1, 2, 0), out=out) is out
    assert np.array_equal(out, x.transpose(1, 2, 0))


def test_threads_and_large():
    x = rand((6, 300, 500), np.float32)
    for threads in (1, 2):
        dsl.set_num_threads(threads)
        assert np.array_equal(dsl.ops.permute(x, (0, 2, 1)), x.transpose(0, 2, 1))
        assert np.array_equal(dsl.ops.permute(x, (2, 1, 0)), x.transpose(2, 1, 0))
    dsl.set_num_threads(0)


def test_long_rows_in_pieces():
    """A copy whose layout merges into a few long rows goes in pieces of
    64 KiB that the threads share, the rest of each row after them: every
    element once, nothing past `out`."""
    from dsl.ops.arrays import empty_aligned

    for threads in (1, 2):
        dsl.set_num_threads(threads)
        for shape, dtype in (((3, 40000), np.float32), ((2, 16384), np.float64), ((70001,), np.uint8)):
            x = rand(shape, dtype, seed=threads)
            room = empty_aligned((x.size + 8,), dtype)
            room[:] = 7
            out = room[:x.size].reshape(shape)
            dsl.ops.permute(x, tuple(range(x.ndim)), out=out)
            assert np.array_equal(out, x) and (room[x.size:] == 7).all(), (shape, threads)
            sliced = x[..., 1:-1]  # rows apart: one call per row
            assert np.array_equal(dsl.ops.permute(sliced, tuple(range(x.ndim))), sliced)
    dsl.set_num_threads(0)


def test_out_overlapping_input():
    x = rand((8, 8), np.float32)
    want = x.T.copy()
    assert np.array_equal(dsl.ops.permute(x, (1, 0), out=x), want)


@pytest.mark.parametrize("args, error, text", [
    ((np.ones((2, 3)), (0,)), ValueError, "axes don't match array"),
    ((np.ones((2, 3)), (0, 0)), ValueError, "repeated axis"),
    ((np.ones((2, 3)), (0, 2)), ValueError, "axis out of bounds"),
    ((np.ones((2, 3)), None), TypeError, "axes must be a sequence"),
    ((np.array([[None]]), (1, 0)), TypeError, "unsupported dtype object"),
])
def test_errors(args, error, text):
    with pytest.raises(error) as info:
        dsl.ops.permute(*args)
    assert text in str(info.value) and str(info.value).startswith("permute: ")


def test_bad_out():
    with pytest.raises(ValueError, match=r"permute: out has shape \(2, 3\), the result has shape \(3, 2\)"):
        dsl.ops.permute(np.ones((2, 3), np.float32), (1, 0), out=np.empty((2, 3), np.float32))


_STREAMED = r"""
import itertools, numpy as np, dsl
rng = np.random.default_rng(5)
for dtype in (np.uint8, np.int16, np.float32, np.float64):
    for shape in ((20, 3, 70), (3, 40, 33), (17, 16, 129)):
        x = (rng.standard_normal(shape) * 100).astype(dtype)
        for axes in itertools.permutations(range(3)):
            want = x.transpose(axes)
            room = np.full(want.size + 64, 7, dtype)
            out = room[13:13 + want.size].reshape(want.shape)  # rows at every alignment
            dsl.ops.permute(x, axes, out=out)
            assert np.array_equal(out, want), (dtype, shape, axes)
            assert (room[:13] == 7).all() and (room[13 + want.size:] == 7).all(), (dtype, shape, axes)
from dsl.ops.arrays import empty_aligned
for dtype in (np.uint8, np.float32, np.float64):  # tiles from the column where out's rows are aligned
    for shape, axes in (((5, 272, 40), (0, 2, 1)), ((2, 300, 33), (0, 2, 1)), ((300, 7, 20), (2, 1, 0)),
                        ((272, 40), (1, 0)), ((5, 48, 80), (0, 2, 1)), ((2, 80, 48), (0, 2, 1))):
        x = (rng.standard_normal(shape) * 100).astype(dtype)
        want = x.transpose(axes)
        for offset in (0, 1, 4, 13):
            room = empty_aligned((want.size + 32,), dtype)
            room[:] = 7
            out = room[offset:offset + want.size].reshape(want.shape)
            dsl.ops.permute(x, axes, out=out)
            assert np.array_equal(out, want), (dtype, shape, axes, offset)
            assert (room[:offset] == 7).all() and (room[offset + want.size:] == 7).all(), (dtype, shape, axes)
        assert dsl.ops.permute(x, axes).ctypes.data % 64 == 0
print("ok")
"""


@pytest.mark.parametrize("threads", ["1", "2"])
def test_streamed_rows(threads):
    """Row copies and 4- and 8-byte tiles stream their output (nontemporal=):
    with streaming forced for every size, rows of every length and
    alignment, nothing written outside `out`, the tiles' grid shifted to
    where out's rows are aligned. A subprocess: the threshold is read once
    per library."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "DSL_STREAM_BYTES": "0", "DSL_NUM_THREADS": threads}
    run = subprocess.run([sys.executable, "-c", _STREAMED], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stdout.strip() == "ok", run.stderr[-2000:]


def test_new_results_replay_the_plan_of_an_aligned_output():
    """A result permute allocates (64-byte aligned) replays the plan recorded
    for one, without the checks again; a plan made for an `out` at another
    place in a line is never taken for it."""
    from dsl.ops import permutation
    from dsl.ops.arrays import address, empty_aligned

    x = rand((5, 300, 40), np.float32, seed=11)
    room = empty_aligned((x.size + 3,), np.float32)
    out = room[3:].reshape(5, 40, 300)  # its rows start 12 bytes into a line
    dsl.ops.permute(x, (0, 2, 1), out=out)
    assert not any(key[:3] == (x.shape, x.dtype, (0, 2, 1)) for key in permutation._fresh)
    for seed in range(3):
        x = rand((5, 300, 40), np.float32, seed=seed)
        got = dsl.ops.permute(x, (0, 2, 1))
        assert np.array_equal(got, x.transpose(0, 2, 1)) and got.flags.c_contiguous
        assert (x.shape, x.dtype, (0, 2, 1), address(x) % 64) in permutation._fresh
    view = rand((5, 600, 40), np.float32)[:, ::2]  # the same shape, not contiguous: the checked path
    assert np.array_equal(dsl.ops.permute(view, (0, 2, 1)), view.transpose(0, 2, 1))
    with pytest.raises(ValueError, match="repeated axis"):
        dsl.ops.permute(x, (0, 1, 1))


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32, np.float64])
@pytest.mark.parametrize("channels", [2, 3, 4, 5])
def test_pixels_and_planes(dtype, channels):
    """Pixels of 2-4 channels to planes and back (HWC <-> CHW), by whole
    registers of pixels (stdlib/channels.tk), the pixels left over element by
    element; 5 channels take the element-by-element path throughout. Pixel
    counts below, at and past a register's; a batch; pixels with a step."""
    rng = np.random.default_rng(channels)
    for n in (7, 64, 100, 4099):
        x = (rng.standard_normal((n, channels)) * 100).astype(dtype)
        planes = np.ascontiguousarray(x.T)
        for a, axes in ((x, (1, 0)), (planes, (1, 0)), (np.stack([x, x + 1, x + 2]), (0, 2, 1)),
                        (np.stack([planes, planes + 1]), (0, 2, 1)), (x[::2], (1, 0))):
            assert np.array_equal(dsl.ops.permute(a, axes), a.transpose(axes)), (n, a.shape, axes)
    image = (rng.standard_normal((37, 53, channels)) * 100).astype(dtype)
    chw = dsl.ops.permute(image, (2, 0, 1))
    assert np.array_equal(chw, image.transpose(2, 0, 1))
    assert np.array_equal(dsl.ops.permute(chw, (1, 2, 0)), image)
    batch = (rng.standard_normal((5, channels, 20, 30)) * 100).astype(dtype)
    assert np.array_equal(dsl.ops.permute(batch, (0, 2, 3, 1)), batch.transpose(0, 2, 3, 1))
