"""dsl.ops softmax, log_softmax, layer_norm and rms_norm against float64
numpy (and torch where installed): every axis, strided and transposed inputs,
odd row lengths, huge logits, special values, `out=` and bad calls."""

from __future__ import annotations

import numpy as np
import pytest

import dsl

RNG = np.random.default_rng(5)
X = RNG.standard_normal((6, 7, 33)).astype(np.float32) * 3


def softmax64(x, axis):
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def log_softmax64(x, axis):
    x = x.astype(np.float64)
    m = x.max(axis=axis, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=axis, keepdims=True))


def layer_norm64(x, axis, w=None, b=None, eps=1e-5):
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    y = (x - x.mean(-1, keepdims=True)) / np.sqrt(x.var(-1, keepdims=True) + eps)
    y = y * (1 if w is None else w) + (0 if b is None else b)
    return np.moveaxis(y, -1, axis)


def rms_norm64(x, axis, w=None, eps=1e-6):
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    y = x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * (1 if w is None else w)
    return np.moveaxis(y, -1, axis)


INPUTS = {"contiguous": X, "transposed": X.transpose(2, 0, 1), "strided": X[::2, ::-1, 1::2]}


@pytest.mark.parametrize("layout", sorted(INPUTS))
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_and_log_softmax(axis, layout):
    x = INPUTS[layout]
    np.testing.assert_allclose(dsl.ops.softmax(x, axis=axis), softmax64(x, axis), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(dsl.ops.log_softmax(x, axis=axis), log_softmax64(x, axis), rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("layout", sorted(INPUTS))
@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_norms(axis, layout):
    x = INPUTS[layout]
    c = x.shape[axis]
    w, b = RNG.standard_normal(c).astype(np.float32), RNG.standard_normal(c).astype(np.float32)
    np.testing.assert_allclose(dsl.ops.layer_norm(x, axis=axis), layer_norm64(x, axis), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(dsl.ops.layer_norm(x, w, b, axis=axis), layer_norm64(x, axis, w, b),
                               rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(dsl.ops.layer_norm(x, weight=w, axis=axis), layer_norm64(x, axis, w),
                               rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(dsl.ops.rms_norm(x, axis=axis), rms_norm64(x, axis), rtol=1e-5, atol=2e-6)
    np.testing.assert_allclose(dsl.ops.rms_norm(x, w, axis=axis, eps=1e-3), rms_norm64(x, axis, w, 1e-3),
                               rtol=1e-5, atol=2e-6)


def test_layer_norm_with_a_large_mean_keeps_its_digits():
    """The variance from deviations, not E[x^2] - E[x]^2 (which would lose
    every digit at a mean of 1e4). The float32 mean itself is off by up to
    about an ulp of 1e4 (1e-3), and so is every deviation."""
    for seed in range(4):
        x = (np.random.default_rng(seed).standard_normal((4, 4096)) + 1e4).astype(np.float32)
        for axis, rows in ((-1, x), (0, x.T)):
            np.testing.assert_allclose(dsl.ops.layer_norm(rows, axis=axis), layer_norm64(rows, axis),
                                       rtol=1e-3, atol=2e-3)


def test_softmax_is_stable_at_huge_logits():
    x = np.array([[1e4, -1e4, 0, 1e4], [-1e4, -1e4, -1e4, -1e4]], np.float32)
    np.testing.assert_allclose(dsl.ops.softmax(x), softmax64(x, -1), atol=1e-7)
    np.testing.assert_allclose(dsl.ops.log_softmax(x), log_softmax64(x, -1), rtol=1e-6)


def test_special_values_propagate_like_torch():
    torch = pytest.importorskip("torch")
    x = np.array([[np.nan, 1, 2], [np.inf, 0, 1], [-np.inf, 0, 1], [1, 2, 3]], np.float32)
    t = torch.from_numpy(x)
    np.testing.assert_allclose(dsl.ops.softmax(x), torch.softmax(t, -1).numpy(), rtol=1e-6)  # nan where torch's
    np.testing.assert_allclose(dsl.ops.log_softmax(x), torch.log_softmax(t, -1).numpy(), rtol=1e-6)


def test_columns_take_special_values_and_huge_logits_like_rows():
    """Down the columns of x (the normalized axis not the contiguous one)
    the answers are the row kernels' on the transpose (but for the order of
    their sums): NaN, infinities and logits of 1e4 included, in the narrow
    and wide strips."""
    rows = np.array([[np.nan, 1, 2], [np.inf, 0, 1], [-np.inf, 0, 1], [1e4, -1e4, 1e4], [1, 2, 3]], np.float32)
    for width in (5, 70):
        x = np.tile(rows, (1, 24))[:, :width].T.copy()
        for op in ("softmax", "log_softmax", "layer_norm", "rms_norm"):
            f = getattr(dsl.ops, op)
            np.testing.assert_allclose(f(x.T.copy(), axis=0), f(x, axis=1).T, rtol=1e-6, atol=1e-7, err_msg=op)


@pytest.mark.parametrize("op, reference", [("softmax", softmax64), ("log_softmax", log_softmax64)])
def test_long_columns_take_whole_rows_at_a_time(op, reference):
    """Columns of 1024 rows or more: the max and the sum in one pass, 8 rows
    at a time, rescaled to each new max (rows that raise it late included),
    then one pass that writes; special values as the row kernel's; 1 and 2
    threads (a strip of columns each) the same bits."""
    from dsl.ops import norm_layout

    f = getattr(dsl.ops, op)
    x = RNG.standard_normal((1100, 70)).astype(np.float32)
    x[1090:, 1] += 30  # the maximum found in the last block of rows
    x[::3, 2] -= 80  # terms far below the max
    assert norm_layout.kernel_name("cols", op, x[None]) == ("norm_cols", f"{op}_down")
    np.testing.assert_allclose(f(x, axis=0), reference(x, 0), rtol=2e-6, atol=2e-6 if op == "log_softmax" else 1e-9)
    rows = np.array([[np.nan, 1, 2], [np.inf, 0, 1], [-np.inf, -np.inf, -np.inf], [1e4, -1e4, 1e4]], np.float32)
    special = np.tile(rows, (1, 400))[:, :1100].T.copy()
    special = np.tile(special, (1, 18))[:, :70]
    np.testing.assert_allclose(f(special, axis=0), f(special.T.copy(), axis=1).T, rtol=1e-6, atol=1e-7)
    wide = RNG.standard_normal((1027, 2 * 2048 + 37)).astype(np.float32)
    results = []
    for threads in (1, 2):
        dsl.set_num_threads(threads)
        try:
            results.append(f(wide, axis=0))
        finally:
            dsl.set_num_threads(0)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_allclose(results[0], reference(wide, 0), rtol=2e-6, atol=2e-6 if op == "log_softmax" else 1e-9)


@pytest.mark.parametrize("op", ["softmax", "layer_norm"])
def test_layouts_of_the_result(op):
    """A new result is laid out as x is (numpy's order='K'); an out laid out
    otherwise gets the same numbers."""
    f, ref = getattr(dsl.ops, op), {"softmax": softmax64, "layer_norm": layer_norm64}[op]
    x = np.asfortranarray(RNG.standard_normal((70, 130)).astype(np.float32))
    for axis in (0, 1):
        got = f(x, axis=axis)
        assert got.flags.f_contiguous
        np.testing.assert_allclose(got, ref(x, axis), rtol=1e-5, atol=2e-6)
        out = np.full((70, 130), np.nan, np.float32)
        assert f(x, axis=axis, out=out) is out
        np.testing.assert_array_equal(out, got)


@pytest.mark.parametrize("rows, cols", [(1, 1), (3, 7), (17, 255), (64, 1024)])
def test_against_torch(rows, cols):
    torch = pytest.importorskip("torch")
    x = RNG.standard_normal((rows, cols)).astype(np.float32)
    w, b = RNG.standard_normal(cols).astype(np.float32), RNG.standard_normal(cols).astype(np.float32)
    t, tw, tb = (torch.from_numpy(a) for a in (x, w, b))
    F = torch.nn.functional
    np.testing.assert_allclose(dsl.ops.softmax(x), F.softmax(t, -1).numpy(), rtol=2e-6, atol=1e-7)
    np.testing.assert_allclose(dsl.ops.layer_norm(x, w, b), F.layer_norm(t, (cols,), tw, tb).numpy(),
                               rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(dsl.ops.rms_norm(x, w), F.rms_norm(t, (cols,), tw, eps=1e-6).numpy(),
                               rtol=1e-5, atol=1e-6)


def test_out_in_place_and_empty():
    x = X.copy()
    assert dsl.ops.softmax(x, axis=1, out=x) is x
    np.testing.assert_allclose(x, softmax64(X, 1), rtol=2e-6, atol=1e-7)
    out = np.empty((6, 7, 66), np.float32)[:, :, ::2]
    dsl.ops.rms_norm(X, out=out)
    np.testing.assert_allclose(out, rms_norm64(X, -1), rtol=1e-5, atol=2e-6)
    assert dsl.ops.layer_norm(np.zeros((0, 5), np.float32)).shape == (0, 5)


@pytest.mark.parametrize("op", ["softmax", "rms_norm"])
def test_out_overlapping_x_by_a_row(op):
    """Contiguous rows, out one row on from x: each row is read before the
    one above it is written (numpy's rule), as for any overlap."""
    x = X.copy().reshape(-1, 66)
    want = getattr(dsl.ops, op)(x[:-1].copy())
    getattr(dsl.ops, op)(x[:-1], out=x[1:])
    np.testing.assert_array_equal(x[1:], want)


@pytest.mark.parametrize("call, error, message", [
    (lambda: dsl.ops.softmax(np.float32(1)), ValueError, "dsl.ops.softmax: needs an array"),
    (lambda: dsl.ops.softmax(X, axis=3), ValueError, "dsl.ops.softmax: axis 3 is out of range"),
    (lambda: dsl.ops.log_softmax(X, axis=(0, 1)), TypeError, r"'axis' must be an int \(one axis\), got \(0, 1\)"),
    (lambda: dsl.ops.layer_norm(X, axis=None), TypeError, "'axis' must be an int"),
    (lambda: dsl.ops.rms_norm(X, axis=1.0), TypeError, "'axis' must be an int"),
    (lambda: dsl.ops.layer_norm(X, np.ones(5, np.float32)), ValueError, r"'weight' must have shape \(33,\)"),
    (lambda: dsl.ops.rms_norm(X, eps=-1.0), ValueError, "'eps' must be a number >= 0"),
    (lambda: dsl.ops.rms_norm(X.astype(np.float64)), TypeError, "dsl.ops.rms_norm: 'x' must be float32"),
])
def test_bad_calls(call, error, message):
    with pytest.raises(error, match=message):
        call()
