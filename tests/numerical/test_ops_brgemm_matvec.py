"""dsl.ops.matvec and dsl.ops.brgemm against numpy: edge sizes, both layouts
of the matrix (rows or columns contiguous, and neither), views, betas, errors,
1 and 2 threads."""

import numpy as np
import pytest

import dsl


def rand(shape, dtype=np.float32, seed=0):
    rng = np.random.default_rng(seed + sum((i + 3) * s for i, s in enumerate(shape)))
    return rng.standard_normal(shape).astype(dtype)


def bound(a, x, rtol):
    """rtol * sqrt(K) * (1 + |a| @ |x|)"""
    k = a.shape[-1]
    return rtol * max(1, k) ** 0.5 * (1 + np.abs(a.astype(np.float64)) @ np.abs(x.astype(np.float64)))


RTOL = {np.float32: 1e-6, np.float64: 1e-14}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [(0, 3), (3, 0), (1, 1), (2, 5), (4, 9), (7, 13), (17, 1), (1, 33), (255, 257), (1030, 70),
                                  (70, 1030)])
@pytest.mark.parametrize("layout", ["rows", "columns", "strided", "unaligned"])
def test_matvec(size, dtype, layout):
    m, k = size
    a = {"rows": rand((m, k), dtype), "columns": rand((k, m), dtype).T,
         "strided": rand((2 * m, 3 * k), dtype)[::2, ::3], "unaligned": _unaligned(rand((m, k), dtype))}[layout]
    x = rand((k,), dtype, 1)
    got = dsl.ops.matvec(a, x)
    want = a.astype(np.float64) @ x.astype(np.float64)
    assert got.shape == (m,) and got.dtype == dtype
    assert np.all(np.abs(got - want) <= bound(a, x, RTOL[dtype]))


def _unaligned(a: np.ndarray) -> np.ndarray:
    """A copy of `a` whose data starts one byte past an element boundary."""
    raw = np.empty(a.nbytes + 1, np.uint8)
    b = raw[1:].view(a.dtype).reshape(a.shape)
    b[...] = a
    return b


def test_matvec_threads_and_out():
    a, x = rand((3000, 500)), rand((500,))
    outs = []
    for threads in (1, 2):
        dsl.set_num_threads(threads)
        out = np.empty(3000, np.float32)
        assert dsl.ops.matvec(a, x, out=out) is out
        outs.append(out)
        outs.append(dsl.ops.matvec(np.asfortranarray(a), x))
    dsl.set_num_threads(0)
    assert np.array_equal(outs[0], outs[2]) and np.array_equal(outs[1], outs[3])
    assert np.all(np.abs(outs[1] - a.astype(np.float64) @ x) <= bound(a, x, 1e-6))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [(5000, 70), (70001, 9), (700, 600)])
@pytest.mark.parametrize("threads", [1, 2])
def test_matvec_columns_in_blocks(size, dtype, threads):
    """A matrix with contiguous columns runs as blocks of y (more than one
    when y outgrows 256 KiB, 70001 columns, or the matrix is large enough for
    both threads), the columns the blocks leave in a second call; reversed
    columns too."""
    m, k = size
    base = rand((k, m), dtype)
    dsl.set_num_threads(threads)
    try:
        for a in (base.T, base.T[::-1]):
            x = rand((k,), dtype, 1)
            out = np.full(m + 1, np.nan, dtype)
            got = dsl.ops.matvec(a, x, out=out[:m])
            assert np.all(np.abs(got - a.astype(np.float64) @ x) <= bound(a, x, RTOL[dtype]))
            assert np.isnan(out[m])
    finally:
        dsl.set_num_threads(0)


def test_matvec_out_overlapping_the_matrix():
    """An out that is a column of the matrix gets the product of the matrix as
    it was, whichever way the product runs."""
    for a in (np.asfortranarray(rand((1200, 300))), rand((1200, 300))):
        x = rand((a.shape[1],), seed=1)
        want = a.astype(np.float64) @ x
        got = dsl.ops.matvec(a, x, out=a[:, 0])
        assert np.all(np.abs(got - want) <= bound(a, x, 1e-6))


def test_matvec_errors():
    with pytest.raises(ValueError, match=r"matvec: shapes \(3, 4\) and \(5,\) not aligned"):
        dsl.ops.matvec(np.ones((3, 4), np.float32), np.ones(5, np.float32))
    with pytest.raises(ValueError, match="matvec: expects a matrix and a vector"):
        dsl.ops.matvec(np.ones(4, np.float32), np.ones(4, np.float32))
    with pytest.raises(TypeError, match="matvec: unsupported dtype int64"):
        dsl.ops.matvec(np.ones((3, 4), np.int64), np.ones(4, np.int64))


def brgemm_reference(a, b, c, beta):
    s = np.einsum("rmk,rkn->mn", a.astype(np.float64), b.astype(np.float64))
    return s if beta == 0 else beta * c.astype(np.float64) + s


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("size", [(0, 3, 4, 5), (3, 0, 4, 5), (2, 3, 0, 5), (4, 1, 1, 1), (3, 7, 17, 33),
                                  (8, 32, 32, 32), (5, 61, 40, 70), (2, 150, 300, 90)])
@pytest.mark.parametrize("beta", [1.0, 0.0, -0.5])
def test_brgemm(size, dtype, beta):
    r, m, k, n = size
    a, b = rand((r, m, k), dtype), rand((r, k, n), dtype, 1)
    c = rand((m, n), dtype, 2)
    if beta == 0:
        c[...] = np.nan  # beta = 0 ignores C
    want = brgemm_reference(a, b, c, beta)
    got = dsl.ops.brgemm(a, b, c, beta=beta)
    assert got is c
    scale = 1 + np.abs(c.astype(np.float64)) * abs(beta) if beta else 1.0
    tol = RTOL[dtype] * max(1, r * k) ** 0.5 * (scale + np.einsum("rmk,rkn->mn", np.abs(a).astype(np.float64),
                                                                  np.abs(b).astype(np.float64)))
    assert np.all(np.abs(c - want) <= tol)


def test_brgemm_views_and_threads():
    """The seed's layouts: column-major blocks, as transposed views."""
    a = rand((8, 32, 32)).transpose(0, 2, 1)
    b = rand((8, 32, 32)).transpose(0, 2, 1)
    results = []
    for threads in (1, 2):
        dsl.set_num_threads(threads)
        c = np.zeros((32, 32), np.float32).T
        dsl.ops.brgemm(a, b, c)
        results.append(c)
    dsl.set_num_threads(0)
    assert np.array_equal(results[0], results[1])
    assert np.allclose(results[0], np.einsum("rmk,rkn->mn", a, b), rtol=1e-5, atol=1e-4)


def test_brgemm_errors():
    a, b, c = np.ones((2, 3, 4), np.float32), np.ones((2, 4, 5), np.float32), np.zeros((3, 5), np.float32)
    with pytest.raises(ValueError, match="brgemm: shapes do not agree"):
        dsl.ops.brgemm(a, b[:1], c)
    with pytest.raises(TypeError, match="brgemm: c has dtype float32, the operands make float64"):
        dsl.ops.brgemm(a.astype(np.float64), b, c)
    with pytest.raises(TypeError, match="brgemm: c must be a numpy array"):
        dsl.ops.brgemm(a, b, [[0.0] * 5] * 3)
    with pytest.raises(TypeError, match="brgemm: beta must be a number"):
        dsl.ops.brgemm(a, b, c, beta="1")
    frozen = c.copy()
    frozen.setflags(write=False)
    with pytest.raises(ValueError, match="brgemm: c is read-only"):
        dsl.ops.brgemm(a, b, frozen)
