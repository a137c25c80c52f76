"""vectorize's `nontemporal=`: a masked head that aligns the stores, stores
marked non-temporal, the run-time choice (size threshold, alignment), the
closing `sfence`, and the numbers at every alignment against numpy, natively
(streaming forced on and off) and in the reference interpreter. Also
`parallel(i, min_work=n)`."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tk_program import compile_tk, run

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import CompileError, Source
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

CHUNKED = """
@schedule(split(i, 1024, tail=peel), parallel(i.outer), vectorize(i.inner, 16, nontemporal=out))
def axpy(x: f32[N], y: f32[N], out: f32[N]):
    out[i] = 2.0 * x[i] + y[i]
"""

ROWS = """
@schedule(vectorize(j, 8, tail=mask, nontemporal=out))
def rows(x: f64[R, C], out: f64[R, C]):
    for r in range(R):
        for j in range(C):
            out[r, j] = x[r, j] * 4.0 - 1.0
"""


def native(tmp_path, text: str, name: str = "t"):
    job = compile_source(Source("t.tk", text), CompileOptions(), stop_after="obj")
    return dsl.load(str(link_shared(job.obj, tmp_path / f"{name}.so", job.target)))


def scheduled(text: str) -> str:
    return format_kernel(compile_tk(text, "schedule").program.kernels[-1])


def offset_view(n: int, offset: int, dtype, rng) -> tuple[np.ndarray, np.ndarray]:
    """(buffer, view): a view of n values `offset` elements into a zeroed buffer."""
    buf = np.zeros(n + offset + 16, dtype)
    return buf, buf[offset:offset + n]


def test_the_head_aligns_the_store_and_the_main_loop_streams():
    text = scheduled(CHUNKED)
    assert "i.inner.align: i64 = min(align_gap(out[i.outer * 1024], 64), 1024)" in text
    assert "if 0 < i.inner.align:" in text  # the head: one masked vector step
    streamed = [line.lstrip() for line in text.splitlines() if line.endswith("  nontemporal")]
    assert len(streamed) == 3  # the head, the main loop's stores, the tail
    assert streamed[1].startswith("out[i.outer * 1024 + (i.inner.align + (i.inner.outer * 16 + ramp(0, 1, 16)))]")
    assert all(" where ramp(0, 1, 16) < " in line for line in (streamed[0], streamed[2]))
    rows = scheduled(ROWS)
    assert "j.align: i64 = min(align_gap(out[r, 0], 64), max(C, 0))" in rows  # 8 f64 lanes: 64 bytes


@pytest.mark.parametrize("cpu", ["znver3", "znver4"])
def test_the_head_and_tail_are_plain_stores(cpu):
    """A masked store to a line not in the cache is slow on Zen 4 (27 against
    44 GB/s, streaming 2 KiB rows 32 bytes past a line): the head and the tail
    store whole pieces, plainly, and no masked store is left."""
    asm = compile_source(Source("t.tk", ROWS), CompileOptions(cpu=cpu), stop_after="asm").asm
    assert "vmovntpd" in asm
    avx2_store = re.compile(r"maskmov\w*\t%[xy]mm\d+, %[xy]mm\d+, [^%]")  # mask, value, memory
    avx512_store = re.compile(r"\tvmov\w+\t%[xyz]mm\d+, [^\n]*\{%k")  # value, memory {mask}
    assert not avx2_store.search(asm) and not avx512_store.search(asm)
    assert "vmovupd\t%xmm" in asm or "vmovups\t%xmm" in asm  # the pieces: 2, 1 lanes


@pytest.mark.parametrize("stream_bytes", ["0", None])
@pytest.mark.parametrize("threads", [1, 2])
def test_every_alignment_and_length_matches_numpy(tmp_path, monkeypatch, stream_bytes, threads):
    if stream_bytes is None:
        monkeypatch.delenv("DSL_STREAM_BYTES", raising=False)
    else:
        monkeypatch.setenv("DSL_STREAM_BYTES", stream_bytes)  # read on the module's first call
    lib = native(tmp_path, CHUNKED + ROWS)
    lib.set_num_threads(threads)
    rng = np.random.default_rng(0)
    for n in [0, 1, 15, 16, 17, 1023, 1024, 1025, 5000]:
        for offset in range(5):
            x = rng.standard_normal(n, dtype=np.float32)
            y = rng.standard_normal(n + 3, dtype=np.float32)[3:]
            buf, out = offset_view(n, offset, np.float32, rng)
            lib.axpy(x, y, out)
            np.testing.assert_array_equal(out, np.float32(2) * x + y)
            assert not buf[:offset].any() and not buf[offset + n:].any()  # nothing written outside
    for r, c in [(1, 1), (3, 7), (5, 8), (4, 9), (6, 100)]:
        for offset in range(3):
            x = rng.standard_normal((r, c + offset))[:, offset:]
            buf = np.zeros((r, c + 4))
            out = buf[:, 1:c + 1]
            lib.rows(x, out)
            np.testing.assert_array_equal(out, x * 4.0 - 1.0)
            assert not buf[:, 0].any() and not buf[:, c + 1:].any()


TILES = """
@schedule(reorder(jb, ib, il, jl), vectorize(jl, 16, nontemporal=Y))
def tiles(X: f32[JB, 16, IB, 16], Y: f32[IB, 16, JB, 16]):
    Y[ib, il, jb, jl] = X[jb, jl, ib, il]
"""


def test_stores_aligned_with_the_rows_need_no_head():
    """Y's last axis is 16 and each store starts a row of it: aligned exactly
    when Y's rows are, so no head; the one-trip vector loop is its body, and
    transpose_loads turns the tile's gathers into row loads."""
    text = scheduled(TILES)
    assert "align_gap" not in text and "jl.outer" not in text and "jl.tail" not in text
    assert "Y[ib, 15, jb, ramp(0, 1, 16)] = " in text and text.count("  nontemporal") == 16
    assert "X[jb, ramp(0, 1, 16), ib, il]" not in text  # the gather is gone: 16 rows, transposed
    asm = compile_source(Source("t.tk", TILES), CompileOptions(cpu="znver3"), stop_after="asm").asm
    body = asm[asm.index("tiles__unit:"):asm.index("tiles__any:")] if "tiles__any:" in asm else asm
    assert "vmovntps" in body or "vmovntdq" in body
    assert "gather" not in body


@pytest.mark.parametrize("stream_bytes", ["0", None])
def test_tiles_streamed_at_every_alignment(tmp_path, monkeypatch, stream_bytes):
    if stream_bytes is None:
        monkeypatch.delenv("DSL_STREAM_BYTES", raising=False)
    else:
        monkeypatch.setenv("DSL_STREAM_BYTES", stream_bytes)
    lib = native(tmp_path, TILES)
    rng = np.random.default_rng(2)
    for jb, ib in [(1, 1), (3, 2), (5, 7)]:
        x = rng.standard_normal((jb, 16, ib, 16), dtype=np.float32)
        want = x.reshape(jb * 16, ib * 16).T.reshape(ib, 16, jb, 16)
        for offset in range(0, 17, 4):
            buf, out = offset_view(want.size, offset, np.float32, rng)
            lib.tiles(x, out.reshape(want.shape))
            np.testing.assert_array_equal(out.reshape(want.shape), want)
            assert not buf[:offset].any() and not buf[offset + want.size:].any()


def test_the_interpreter_runs_the_head_where_the_address_puts_it():
    rng = np.random.default_rng(1)
    for offset in range(4):
        x = rng.standard_normal(3000, dtype=np.float32)
        y = rng.standard_normal(3000, dtype=np.float32)
        _, out = offset_view(3000, offset, np.float32, rng)
        run(CHUNKED, x=x, y=y, out=out)
        np.testing.assert_array_equal(out, np.float32(2) * x + y)


def test_the_streaming_stores_are_non_temporal_and_fenced():
    options = CompileOptions(cpu="znver3")
    job = compile_source(Source("t.tk", CHUNKED), options, stop_after="asm")
    asm = job.asm
    assert "vmovntps" in asm
    assert "sfence" in asm
    llvm = str(compile_source(Source("t.tk", CHUNKED), options, stop_after="llvm").llvm)
    assert "!nontemporal" in llvm and "__dsl_stream_bytes" in llvm


@pytest.mark.parametrize("schedule, message", [
    ("vectorize(i, 16, nontemporal=z)", "nontemporal=: no tensor named 'z'"),
    ("vectorize(i, 16, nontemporal=x)", "nontemporal=: loop 'i' stores nothing to 'x'"),
    ("vectorize(i, 16, nontemporal=out, tail=peel)", "nontemporal= runs the head and the tail as masked"),
    ("vectorize(i, 16, nontemporal=3)", "nontemporal= takes the name of the tensor"),
])
def test_bad_nontemporal_options_are_located_errors(schedule, message):
    text = f"@schedule({schedule})\ndef k(x: f32[N], out: f32[N]):\n    out[i] = x[i]\n"
    with pytest.raises(CompileError) as info:
        compile_tk(text, "schedule")
    assert message in info.value.render() and "t.tk:1:" in info.value.render()


def test_streaming_takes_the_targets_width_or_needs_one():
    """Without a width, a loop of any length streams in vectors of the target's
    width; one of constant trip count (a single vector of that many lanes) must say."""
    any_length = "@schedule(vectorize(i, nontemporal=out))\ndef k(x: f32[N], out: f32[N]):\n    out[i] = x[i]\n"
    assert "nontemporal" in str(compile_tk(any_length, "llvm").llvm)
    fixed = "@schedule(vectorize(i, nontemporal=out))\ndef k(x: f32[64], out: f32[64]):\n    out[i] = x[i]\n"
    with pytest.raises(CompileError, match="nontemporal= needs a vector width"):
        compile_tk(fixed, "schedule")


def test_a_store_that_does_not_move_by_one_element_cannot_stream():
    text = """
@schedule(vectorize(i, 8, nontemporal=out))
def k(x: f32[N], out: f32[N, 2]):
    for i in range(N):
        out[i, 0] = x[i]
"""
    with pytest.raises(CompileError, match="does not move by one element of its last axis per iteration of 'i'"):
        compile_tk(text, "schedule")


def test_min_work_keeps_small_calls_on_the_calling_thread():
    text = """
@schedule(parallel(r, min_work=4096))
def k(x: f32[R, C], out: f32[R, C]):
    for r in range(R):
        for c in range(C):
            out[r, c] = x[r, c] + 1.0
"""
    assert "for r in range(0, R) parallel if " in scheduled(text)
    assert ">= 4096:" in scheduled(text)
    with pytest.raises(CompileError, match="min_work= takes a positive integer"):
        compile_tk(text.replace("min_work=4096", "min_work=0"), "schedule")
