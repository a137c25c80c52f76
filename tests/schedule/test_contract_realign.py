"""B's rows read from an aligned copy (`Realign`) when they start inside a
cache line: where the contraction puts one, what the backend makes of it, and
that the results are those of B read in place, bit for bit, whatever B's
offset from a line, its view, or the thread count."""

from __future__ import annotations

import numpy as np
import pytest
from numpy.lib.stride_tricks import as_strided
from tk_library import compile_to, load_library

import dsl
from dsl.lowering.printer import format_kernel

KERNELS = """
def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

def x_wt(A: f32[M, K], W: f32[N, K], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * W[n, k])

@options(reassociate=True)
def seed(A: f32[Ma, Kc, Kf, Md], B: f32[Nb, Kc, Ne, Kf], C: f32[Ma, Nb, Ne, Md]):
    C[a, b, e, d] = sum(B[b, c, e, f] * A[a, c, f, d])
"""


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def placed(values: np.ndarray, offset: int, strides: tuple[int, ...] | None = None) -> np.ndarray:
    """`values` copied to memory that starts `offset` elements past a 64-byte
    line, with element `strides` (default: C order)."""
    strides = strides or tuple(s // values.itemsize for s in np.empty(values.shape, values.dtype).strides)
    span = 1 + sum((n - 1) * abs(s) for n, s in zip(values.shape, strides, strict=True))
    buf = np.empty(span + 32, values.dtype)
    start = (-buf.ctypes.data % 64) // values.itemsize + offset
    start += sum((n - 1) * -s for n, s in zip(values.shape, strides, strict=True) if s < 0)
    out = as_strided(buf[start:], values.shape, tuple(s * values.itemsize for s in strides))
    out[...] = values
    return out


def test_realign_before_the_nest_of_a_product_read_in_place():
    """A matmul gets one, conditioned on the unpacked path and on 256 rows
    of A a thread reading B; the seeds' configuration counts the batch loop that does
    not move over B (b: 32 products of 32 rows); x @ W.T, whose W is always
    packed, gets none."""
    job = compile_to(KERNELS, "schedule")
    text = {k.name: format_kernel(k) for k in job.program.kernels}
    assert "realign B if " in text["mm"] and "and M >= 256 * threads() else #" in text["mm"]
    assert "realign A if " in text["seed"] and "Ne * Nb >= 256 * threads()" in text["seed"]
    assert "realign" not in text["x_wt"]
    assert any(line.startswith("  realign B if ") for line in text["mm"].split("\n"))  # at the top level


def test_the_backend_copies_only_when_it_helps():
    """The copy is an `llvm.memcpy` behind a branch; the tensor's pointer is
    a phi of the argument and the copy."""
    llvm = str(compile_to(KERNELS, "llvm", opt_level=0).llvm)
    assert "B.realign:" in llvm and "@llvm.memcpy" in llvm
    assert "%B.data = phi ptr [ %B, " in llvm


@pytest.mark.parametrize("offset", [0, 1, 4, 8])
@pytest.mark.parametrize("threads", [1, 2])
def test_same_bits_at_any_offset(lib, offset, threads):
    """Rows on a line and rows inside one give the same C, bit for bit (the
    copy changes where B is read, not the sums); C is close to numpy's."""
    rng = np.random.default_rng(offset)
    a, b = rng.standard_normal((600, 96), np.float32), rng.standard_normal((96, 48), np.float32)
    dsl.set_num_threads(threads)
    try:
        want = np.empty((600, 48), np.float32)
        lib.mm(a, placed(b, 0), want)
        got = np.full((600, 48), np.nan, np.float32)
        lib.mm(a, placed(b, offset), got)
    finally:
        dsl.set_num_threads(0)
    assert np.array_equal(got, want)
    assert np.allclose(got, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


def test_a_broadcast_b_at_an_offset(lib):
    """A batch axis of stride 0 (one B for every product) is copied with its
    stride kept: the same bits as B on a line."""
    rng = np.random.default_rng(5)
    b = rng.standard_normal((32, 1, 32, 32), np.float32)  # b c e f, one block of c
    a = rng.standard_normal((8, 1, 32, 32), np.float32)
    outs = []
    for offset in (0, 4):
        wide = placed(a, offset)
        view = as_strided(wide, (8, 1, 32, 32), (0, *wide.strides[1:]))  # the same A for every a
        c = np.full((8, 32, 32, 32), np.nan, np.float32)
        lib.seed(view, b, c)
        outs.append(c)
    assert np.array_equal(outs[0], outs[1])
    want = np.einsum("acfd,bcef->abed", np.broadcast_to(a[:1], a.shape).astype(np.float64), b)
    assert np.allclose(outs[0], want, rtol=1e-4, atol=1e-3)


def test_seed_configuration_at_an_offset(lib):
    """The seeds' configuration with B's rows 16 bytes past a line, as numpy
    allocates large arrays: the same bits as with B on a line."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((8, 8, 32, 32), np.float32)   # a c f d
    b = rng.standard_normal((32, 8, 32, 32), np.float32)  # b c e f
    outs = []
    for offset in (0, 4):
        c = np.full((8, 32, 32, 32), np.nan, np.float32)
        lib.seed(placed(a, offset), b, c)
        outs.append(c)
    assert np.array_equal(outs[0], outs[1])
    assert np.allclose(outs[0], np.einsum("acfd,bcef->abed", a.astype(np.float64), b), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("strides", [(-48, 1), (144, 1), (1, 96), (52, 1)], ids=["reversed", "sparse", "by-columns",
                                                                              "rows-off-lines"])
def test_views_that_are_not_copied_read_in_place(lib, strides):
    """Negative strides, a view that spans twice its elements, a B whose
    rows are not whole lines apart: read in place, with the right sums."""
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((300, 64), np.float32), rng.standard_normal((64, 48), np.float32)
    b_view = placed(b, 4, strides)
    c = np.full((300, 48), np.nan, np.float32)
    lib.mm(a, b_view, c)
    assert np.allclose(c, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)
