"""dsl.ops.matmul for 2 to 4 rows of A, B's rows contiguous, and batches of
products of 1 or 2 rows: the rows kernel (`matmul_rows_*`,
dsl/ops/few_rows.py), which streams B's rows through once, in column blocks
or products per thread. Its edges (K not a multiple of 4, columns not a
multiple of the vector, quads, pairs and single rows), its blocks on 1 and 2
threads, an `out` whose blocks would share cache lines (written through an
aligned copy), broadcast batches, and which products it takes, against
numpy."""

import numpy as np
import pytest

import dsl
from dsl.ops import few_rows

from test_ops_matmul import close, rand


def recording(monkeypatch):
    """dsl.ops' dense kernels, each name looked up appended to the list returned."""
    from dsl.ops import dense

    called, lib = [], dense._kernels()
    monkeypatch.setattr(dense, "_kernels", lambda: type("L", (), {
        "__getattr__": lambda _, name: (called.append(name), getattr(lib, name))[1]})())
    return called


@pytest.fixture
def any_size(monkeypatch):
    """The rows kernel for products of any size, on all threads when there
    are several (its own rules keep small ones on the GEMM and one thread)."""
    monkeypatch.setattr(few_rows, "_MIN_ELEMENTS", 0)
    monkeypatch.setattr(few_rows, "_L2_BYTES", 0)
    monkeypatch.setattr(few_rows, "_PARALLEL_ELEMENTS", 0)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m", [2, 3, 4])
@pytest.mark.parametrize("k, n", [(0, 17), (1, 1), (3, 16), (4, 15), (5, 33), (9, 100), (64, 47), (301, 1031)])
def test_rows_kernel_against_numpy(m, k, n, dtype, threads, any_size, monkeypatch):
    a, b = rand((m, k), dtype), rand((k, n), dtype, seed=1)
    called = recording(monkeypatch)
    dsl.set_num_threads(threads)
    try:
        close(dsl.ops.matmul(a, b), a, b)
        out = np.full((m, n), np.nan, dtype)  # K = 0 must still write zeros
        assert dsl.ops.matmul(a, b, out=out) is out
        close(out, a, b)
    finally:
        dsl.set_num_threads(0)
    suffix = "f32" if dtype == np.float32 else "f64"
    if k == 0:  # numpy gives empty arrays strides of 0: no rows to stream, any kernel
        return
    assert called and set(called) == {f"matmul_rows_{suffix}"}, called


@pytest.mark.parametrize("threads", [1, 2])
def test_out_whose_blocks_would_share_lines(threads, any_size, monkeypatch):
    """An out that starts inside a line, or whose rows are no whole lines
    apart, gets its result through an aligned copy; the elements around it
    are left alone."""
    m, k, n = 3, 40, 70
    a, b = rand((m, k)), rand((k, n), seed=1)
    dsl.set_num_threads(threads)
    try:
        for pad in (1, 5):
            wide = np.full((m, n + pad), np.nan, np.float32)
            got = dsl.ops.matmul(a, b, out=wide[:, pad:])
            assert got.base is wide
            close(wide[:, pad:], a, b)
            assert np.all(np.isnan(wide[:, :pad]))
    finally:
        dsl.set_num_threads(0)


@pytest.mark.parametrize("threads", [1, 2])
def test_out_overlapping_an_input(threads, any_size):
    """An out that overlaps A or B is refused before anything is written (on
    2 threads the blocks and the columns after them are two calls); the
    general path computes into a copy."""
    a, b = rand((2, 16)), rand((16, 16), seed=1)
    want = a.astype(np.float64) @ b.astype(np.float64)
    dsl.set_num_threads(threads)
    try:
        assert np.allclose(dsl.ops.matmul(a, b, out=a), want, rtol=1e-5, atol=1e-5)
        a, b = rand((2, 40)), rand((40, 40), seed=1)
        want = a.astype(np.float64) @ b.astype(np.float64)
        assert np.allclose(dsl.ops.matmul(a, b, out=b[6:8]), want, rtol=1e-5, atol=1e-5)
    finally:
        dsl.set_num_threads(0)


def test_wrong_out_raises_numpys_error(any_size):
    a, b = rand((2, 16)), rand((16, 8), seed=1)
    with pytest.raises(ValueError, match="non-broadcastable output|shape"):
        dsl.ops.matmul(a, b, out=np.empty((2, 9), np.float32))
    with pytest.raises(ValueError, match="mismatch in its core dimension"):
        dsl.ops.matmul(a, rand((15, 8)))


@pytest.mark.parametrize("m, k, n, rows", [
    (2, 512, 512, True),    # 2 rows, B from 2^17 elements on
    (2, 64, 64, False),     # small: the GEMM's builtin door is quicker to call
    (3, 300, 700, False),   # 3 rows, B within L2: the in-place GEMM keeps up
    (4, 768, 768, True),    # B beyond L2
    (5, 768, 768, False),   # 5 rows: the GEMM
])
def test_which_products_take_the_rows_kernel(m, k, n, rows, monkeypatch):
    a, b = rand((m, k)), rand((k, n), seed=1)
    called = recording(monkeypatch)
    close(dsl.ops.matmul(a, b), a, b)
    assert called == ["matmul_rows_f32"] if rows else "matmul_rows_f32" not in called, called
    del called[:]
    at = rand((k, m)).T  # A's columns contiguous: the GEMM written for that layout
    close(dsl.ops.matmul(at, b), at, b)
    assert "matmul_rows_f32" not in called, called


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("a_shape, b_shape", [
    ((5, 1, 7), (5, 7, 130)),       # one row per product (attention's scores while decoding), K < 8
    ((3, 1, 21), (3, 21, 128)),     # K % 8 = 5
    ((3, 2, 33), (3, 33, 129)),     # a pair, K % 4 = 1, a masked last vector
    ((2, 3, 2, 9), (3, 9, 200)),    # batch axes that broadcast: b shared by the first
    ((1, 2, 40), (4, 40, 128)),     # a shared by every product (stride 0)
    ((3, 4, 21), (3, 21, 515)),     # four rows each, 512 columns or more
    ((2, 3, 6), (2, 6, 512)),       # three rows: a quad loop that does not run, a pair, one
])
def test_batch_of_few_rows(a_shape, b_shape, dtype, threads, monkeypatch):
    """A batch of products of 1 or 2 rows and 128 columns or more, or of 3 or
    4 rows and 512 or more: the rows kernels (one row: eight rows of B at a
    time), a product per thread."""
    a, b = rand(a_shape, dtype), rand(b_shape, dtype, seed=1)
    called = recording(monkeypatch)
    dsl.set_num_threads(threads)
    try:
        close(dsl.ops.matmul(a, b), a, b)
    finally:
        dsl.set_num_threads(0)
    kernel = ("matmul_row_" if a_shape[-2] == 1 else "matmul_rows_") + ("f32" if dtype == np.float32 else "f64")
    assert called and set(called) == {kernel}, called


@pytest.mark.parametrize("a_shape, b_shape", [((4, 3, 50), (4, 50, 200)), ((4, 2, 50), (4, 50, 100)),
                                              ((4, 5, 50), (4, 50, 600))])
def test_batches_the_rows_kernel_leaves_to_the_gemm(a_shape, b_shape, monkeypatch):
    """3 rows a product and fewer than 512 columns, 2 rows and fewer than
    128, or 5 rows: the batched GEMM."""
    a, b = rand(a_shape), rand(b_shape, seed=1)
    called = recording(monkeypatch)
    close(dsl.ops.matmul(a, b), a, b)
    assert "matmul_rows_f32" not in called, called
