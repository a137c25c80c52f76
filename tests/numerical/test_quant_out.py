"""`dsl.ops.quantize(x, qtype, out=...)`: the same bytes as a fresh result,
written into the caller's array (directly when it holds whole groups of
blocks, through a padded buffer when not), and clear errors for a bad `out`."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

QTYPES = ("q8_0", "q8_k", "q4_k", "q5_k", "q6_k")


@pytest.mark.parametrize("qtype", QTYPES)
@pytest.mark.parametrize("rows", [1, 16, 17, 48])
def test_out_gets_the_bytes_of_a_fresh_result(qtype, rows):
    x = np.random.default_rng(rows).standard_normal((rows, 512)).astype(np.float32)
    x[0, 3] = np.nan
    fresh = dsl.ops.quantize(x, qtype)
    out = np.full_like(fresh, 0xA5)
    assert dsl.ops.quantize(x, qtype, out=out) is out
    np.testing.assert_array_equal(out, fresh)


def test_out_of_a_strided_input_and_a_3d_shape():
    x = np.random.default_rng(5).standard_normal((2, 3, 1024)).astype(np.float32)[:, :, ::2]
    out = np.empty((2, 3, 2 * 144), np.uint8)
    dsl.ops.quantize(x, "q4_k", out=out)
    np.testing.assert_array_equal(out, dsl.ops.quantize(np.ascontiguousarray(x), "q4_k"))


@pytest.mark.parametrize("out, words", [
    (np.empty((2, 143), np.uint8), "of shape \\(2, 144\\)"),
    (np.empty((2, 144), np.int8), "uint8 array"),
    (np.empty((2, 288), np.uint8)[:, ::2], "C-contiguous"),
    (np.empty((2, 144), np.uint8), None),  # made read-only below
])
def test_a_bad_out_is_refused(out, words):
    x = np.zeros((2, 256), np.float32)
    if words is None:
        out.flags.writeable = False
        words = "writable"
    with pytest.raises(ValueError, match=words):
        dsl.ops.quantize(x, "q4_k", out=out)


def test_out_overlapping_x_is_refused():
    buf = np.zeros(2 * 256 * 4, np.uint8)
    x = buf.view(np.float32).reshape(2, 256)
    with pytest.raises(ValueError, match="overlaps x"):
        dsl.ops.quantize(x, "q4_k", out=buf[: 2 * 144].reshape(2, 144))


@pytest.mark.parametrize("qtype", QTYPES)
def test_out_at_an_odd_address(qtype):
    """An `out` one byte off its buffer's start gets the same bytes (the
    formats whose kernels write typed fields go through an aligned copy)."""
    x = np.random.default_rng(4).standard_normal((3, 512)).astype(np.float32)
    want = dsl.ops.quantize(x, qtype)
    odd = np.frombuffer(bytearray(want.nbytes + 1), np.uint8)[1:].reshape(want.shape)
    assert dsl.ops.quantize(x, qtype, out=odd) is odd
    np.testing.assert_array_equal(odd, want)
