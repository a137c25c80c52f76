"""dsl.ops.matmul against numpy on random calls: shapes with zeros, ones and
primes, batches of up to two axes that broadcast, 1-D operands, and each
operand plain, transposed, stepped, flipped (negative strides) or broadcast
along its batch, with and without `out`. Every layout picks its own path
(short paths, rows kernels, matrix-vector products, the batched GEMM), so
the draws reach them in combinations the targeted tests do not name."""

import numpy as np
import pytest

import dsl

from test_ops_matmul import close

SIZES = [0, 1, 2, 3, 4, 5, 7, 8, 16, 17, 31, 33, 64, 65, 100, 130]
CALLS = 150  # per seed: ~0.3 s once the kernels are compiled


def _operand(rng, shape: tuple, dtype) -> np.ndarray:
    """A random array of `shape` in one of five layouts."""
    kind = rng.integers(0, 5)
    if kind == 1 and len(shape) >= 2:  # the transpose of a C array
        return np.swapaxes(rng.standard_normal(shape[:-2] + shape[:-3:-1]).astype(dtype), -1, -2)
    if kind == 2:  # every axis stepped by 1 or 2
        steps = [int(rng.integers(1, 3)) for _ in shape]
        whole = rng.standard_normal([n * s for n, s in zip(shape, steps)]).astype(dtype)
        return whole[tuple(slice(None, None, s) for s in steps)]
    if kind == 3:  # one axis reversed
        return np.flip(rng.standard_normal(shape).astype(dtype), int(rng.integers(0, len(shape))))
    if kind == 4 and len(shape) > 2:  # one matrix repeated along the batch (stride 0)
        return np.broadcast_to(rng.standard_normal((1,) + shape[1:]).astype(dtype), shape)
    return rng.standard_normal(shape).astype(dtype)


def _shapes(rng) -> tuple[tuple, tuple]:
    m, k, n = (int(rng.choice(SIZES)) for _ in range(3))
    batch = tuple(int(rng.integers(1, 4)) for _ in range(rng.integers(0, 3)))
    a_batch = tuple(b if rng.random() < 0.7 else 1 for b in batch)
    b_batch = tuple(b if rng.random() < 0.7 else 1 for b in batch)
    a_shape = a_batch + (m, k) if rng.random() > 0.1 else (k,)
    b_shape = b_batch + (k, n) if rng.random() > 0.1 else (k,)
    return a_shape, b_shape


@pytest.mark.parametrize("seed", range(4))
def test_random_calls(seed):
    rng = np.random.default_rng(seed)
    for _ in range(CALLS):
        dtype = (np.float32, np.float64)[rng.integers(0, 2)]
        a_shape, b_shape = _shapes(rng)
        a, b = _operand(rng, a_shape, dtype), _operand(rng, b_shape, dtype)
        want_shape = np.matmul(np.zeros(a_shape, np.float32), np.zeros(b_shape, np.float32)).shape
        if rng.random() < 0.3:
            out = np.full(want_shape, np.nan, dtype)
            assert dsl.ops.matmul(a, b, out=out) is out, (a_shape, b_shape, a.strides, b.strides)
            got = out
        else:
            got = dsl.ops.matmul(a, b)
        close(got, a, b)
