"""dsl.ops.matmul's short path for two stacks of matrices with one batch axis
of one length (`_plain_3d`): straight to the kernels, and what a kernel
refuses (unaligned memory, an out that overlaps an operand, a read-only or
misshapen out) the general path handles or reports as numpy does."""

import numpy as np
import pytest

import dsl

from test_ops_matmul import close, rand

SHAPES = [((3, 5, 7), (3, 7, 9)),        # the batched GEMM
          ((3, 1, 7), (3, 7, 130)),      # one row each: matmul_row_*
          ((4, 2, 33), (4, 33, 129)),    # two rows each: matmul_rows_*
          ((1, 64, 64), (1, 64, 64)),    # a batch of one
          ((2, 0, 4), (2, 4, 5)), ((0, 3, 4), (0, 4, 5)), ((2, 3, 0), (2, 0, 5))]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
def test_stacks(a_shape, b_shape, dtype):
    a, b = rand(a_shape, dtype), rand(b_shape, dtype, seed=1)
    close(dsl.ops.matmul(a, b), a, b)
    out = np.full(a_shape[:2] + b_shape[2:], np.nan, dtype)
    assert dsl.ops.matmul(a, b, out=out) is out
    close(out, a, b)


@pytest.mark.parametrize("a_shape, b_shape", SHAPES[:3])
def test_what_the_kernels_refuse(a_shape, b_shape):
    a, b = rand(a_shape), rand(b_shape, seed=1)
    raw = np.zeros(a.size * 4 + 1, np.uint8)
    unaligned = np.frombuffer(raw[1:].data, np.float32).reshape(a.shape)
    unaligned[...] = a
    close(dsl.ops.matmul(unaligned, b), a, b)
    p, m, n = a.shape[0], a.shape[1], b.shape[2]
    wide = np.full((p, m, 2 * n), np.nan, np.float32)
    assert dsl.ops.matmul(a, b, out=wide[..., ::2]).base is wide
    close(wide[..., ::2], a, b)
    assert np.all(np.isnan(wide[..., 1::2]))


def test_out_overlapping_an_input():
    a, b = rand((3, 4, 6)), rand((3, 6, 6), seed=1)
    want = a.astype(np.float64) @ b.astype(np.float64)
    b_copy = b.copy()
    got = dsl.ops.matmul(a, b, out=b[:, :4])
    assert np.allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(b[:, 4:], b_copy[:, 4:])


def test_bad_out():
    a, b = np.ones((2, 3, 4), np.float32), np.ones((2, 4, 5), np.float32)
    with pytest.raises(ValueError, match=r"matmul: out has shape \(2, 5, 3\), the result has shape \(2, 3, 5\)"):
        dsl.ops.matmul(a, b, out=np.empty((2, 5, 3), np.float32))
    with pytest.raises(TypeError, match="matmul: out has dtype float64, the result is float32"):
        dsl.ops.matmul(a, b, out=np.empty((2, 3, 5)))
    frozen = np.empty((2, 3, 5), np.float32)
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="matmul: out is read-only"):
        dsl.ops.matmul(a, b, out=frozen)
    with pytest.raises(ValueError, match="mismatch in its core dimension 0"):
        dsl.ops.matmul(a, np.ones((2, 3, 5), np.float32))
