"""dsl.ops reductions against numpy: every axis and pair of axes, keepdims,
`out=`, empty and strided inputs, NaN, and the accuracy of a float32 sum of
16M elements against numpy's pairwise sum."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

import dsl

RNG = np.random.default_rng(11)
X = RNG.standard_normal((4, 5, 6, 7)).astype(np.float32)
AXES = [None, *range(-1, 4), *itertools.combinations(range(4), 2), (0, 1, 2), (1, 2, 3)]
INPUTS = {"contiguous": X, "transposed": X.transpose(2, 0, 3, 1), "strided": X[:, ::2, ::-1, 1::2],
          "fortran": np.asfortranarray(X), "reversed": X[::-1, :, ::-1, ::-1]}


@pytest.mark.parametrize("layout", sorted(INPUTS))
@pytest.mark.parametrize("axis", AXES, ids=str)
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min"])
def test_reductions_match_numpy(op, axis, layout):
    x = INPUTS[layout]
    for keepdims in (False, True):
        # Sums against float64: numpy's float32 sum over a Fortran array adds
        # in an order that drifts further from the exact sum than ours.
        want = getattr(np, op)(x if op in ("max", "min") else x.astype(np.float64), axis=axis, keepdims=keepdims)
        got = getattr(dsl.ops, op)(x, axis=axis, keepdims=keepdims)
        assert np.shape(got) == np.shape(want)
        if op in ("max", "min"):
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("layout", sorted(INPUTS))
@pytest.mark.parametrize("axis", [None, 0, 1, 2, 3, -1])
def test_argmax_matches_numpy(axis, layout):
    x = INPUTS[layout]
    np.testing.assert_array_equal(dsl.ops.argmax(x, axis=axis), np.argmax(x, axis=axis))
    np.testing.assert_array_equal(dsl.ops.argmax(x, axis=axis, keepdims=True),
                                  np.argmax(x, axis=axis, keepdims=True))


def test_result_layout_follows_x_as_numpy_s():
    """A new sum, max or min is laid out as x's kept axes are (numpy's
    order='K'), and an `out` laid out otherwise (keepdims too) gets the same
    numbers."""
    x = np.asfortranarray(X)
    for op in ("sum", "max", "argmax"):  # (argmax is no ufunc: numpy's result is C-ordered)
        got, want = getattr(dsl.ops, op)(x, axis=1), getattr(np, op)(x, axis=1)
        assert got.strides == want.strides, op
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=2e-6)
    out = np.full((4, 1, 6, 7), np.nan, np.float32)
    assert dsl.ops.sum(x, axis=1, keepdims=True, out=out) is out
    np.testing.assert_allclose(out, x.sum(axis=1, keepdims=True), rtol=2e-6, atol=2e-6)


def test_argmax_ties_and_nan_follow_numpy():
    x = np.array([[1, 3, 3, 2], [np.nan, 5, np.nan, 1], [-np.inf, -np.inf, -np.inf, -np.inf]], np.float32)
    for axis in (0, 1):
        np.testing.assert_array_equal(dsl.ops.argmax(x, axis=axis), np.argmax(x, axis=axis))


@pytest.mark.parametrize("length", [255, 256, 300, 1000])
def test_argmax_of_long_rows_across_lanes(length):
    """Rows of 256 or more run as 64 lanes: ties, infinities and NaN in
    several lanes, and the elements after the last whole vector, still give
    numpy's first maximum."""
    rng = np.random.default_rng(length)
    values = np.array([0, 1, 2, -1, np.inf, -np.inf, np.nan], np.float32)
    for weights in ([1, 1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 0.01, 0, 0.002], [0, 0, 0, 0, 0, 1, 0.001]):
        p = np.array(weights) / np.sum(weights)
        x = rng.choice(values, size=(40, length), p=p)
        np.testing.assert_array_equal(dsl.ops.argmax(x, axis=1), np.argmax(x, axis=1))


def test_nan_and_inf_propagate():
    x = np.array([[1, np.nan, 3], [np.inf, 2, -np.inf]], np.float32)
    for op in ("sum", "max", "min"):
        for axis in (None, 0, 1):
            with np.errstate(invalid="ignore"):
                np.testing.assert_array_equal(getattr(dsl.ops, op)(x, axis=axis), getattr(np, op)(x, axis=axis))


def test_empty_axes():
    x = np.zeros((3, 0), np.float32)
    np.testing.assert_array_equal(dsl.ops.sum(x, axis=1), np.zeros(3, np.float32))
    np.testing.assert_array_equal(dsl.ops.max(x, axis=0), np.zeros(0, np.float32))
    with pytest.raises(ValueError, match="dsl.ops.max: zero-size reduction"):
        dsl.ops.max(x, axis=1)


def test_out_and_errors():
    x = X[:, :, 0, 0].T  # (5, 4), strided
    out = np.empty(10, np.float32)[::2]
    assert dsl.ops.sum(x, axis=1, out=out) is out
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-6)
    found = np.empty(5, np.int64)
    assert dsl.ops.argmax(x, axis=1, out=found) is found
    np.testing.assert_array_equal(found, x.argmax(axis=1))
    with pytest.raises(ValueError, match="dsl.ops.sum: axis 4 is out of range"):
        dsl.ops.sum(X, axis=4)
    with pytest.raises(ValueError, match="repeated axis"):
        dsl.ops.min(X, axis=(1, -3))
    with pytest.raises(ValueError, match="'out' has shape"):
        dsl.ops.sum(X, axis=0, out=np.empty(3, np.float32))


@pytest.mark.parametrize("n", [(1 << 18) + 37, 1 << 19])
def test_long_rows_cut_into_pieces(n):
    x = RNG.standard_normal(n).astype(np.float32)
    np.testing.assert_allclose(dsl.ops.sum(x), np.sum(x, dtype=np.float64), rtol=1e-6, atol=1e-3)
    x[n - 5] = 100.0
    assert dsl.ops.max(x) == np.max(x) and dsl.ops.min(x) == np.min(x)
    assert dsl.ops.argmax(x) == n - 5


@pytest.mark.parametrize("layout", ["row", "column"])
def test_sum_of_16m_within_1e6_of_numpy_pairwise(layout):
    """numpy sums a row pairwise; down a column it adds in order (and drifts
    ~2e-5 here), so columns are compared with the pairwise sum of the same
    numbers laid out as rows, and both with float64."""
    n = 1 << 24
    x = RNG.random(n, dtype=np.float32) + np.float32(0.5)
    if layout == "column":
        x2 = x.reshape(-1, 4)
        got = dsl.ops.sum(x2, axis=0).astype(np.float64)
        pairwise = np.sum(np.ascontiguousarray(x2.T), axis=1).astype(np.float64)
        exact = np.sum(x2, axis=0, dtype=np.float64)
    else:
        got, pairwise, exact = float(dsl.ops.sum(x)), float(np.sum(x)), np.sum(x, dtype=np.float64)
    assert np.all(np.abs(got - pairwise) <= 1e-6 * np.abs(pairwise))
    assert np.all(np.abs(got - exact) <= 1e-6 * np.abs(exact))
    np.testing.assert_allclose(dsl.ops.mean(x), np.mean(x), rtol=1e-6)


@pytest.mark.parametrize("rows", [1, 7, 8, 9, 16, 23])
def test_column_sums_in_blocks_of_eight_rows_and_the_rest(rows):
    """Down columns, rows go in blocks of eight (a float32 tree), the rows
    after the last block one by one: every count of rows sums the same
    numbers as float64 does, within float32's rounding, and max/min find
    numpy's values, NaN and inf included."""
    x = np.random.default_rng(rows).standard_normal((2, rows, 37)).astype(np.float32)
    got = dsl.ops.sum(x, axis=1)
    np.testing.assert_allclose(got, x.astype(np.float64).sum(axis=1), rtol=1e-6, atol=1e-6 * rows)
    for op in ("max", "min"):
        np.testing.assert_array_equal(getattr(dsl.ops, op)(x, axis=1), getattr(np, op)(x, axis=1))
    x[1, rows - 1, 5] = np.inf
    x[0, 0, 3] = np.nan
    got = dsl.ops.sum(x, axis=1)
    assert np.isinf(got[1, 5]) and np.isnan(got[0, 3]) and np.isfinite(np.delete(got[0], 3)).all()
    for op in ("max", "min"):
        np.testing.assert_array_equal(getattr(dsl.ops, op)(x, axis=1), getattr(np, op)(x, axis=1))


def test_a_wide_column_sum_split_across_threads_is_the_same_sum(monkeypatch):
    """Sums down the columns of one wide output row run as a strip of columns
    per thread (and the columns left over): each column is added in the same
    order, so 1, 2 and 3 threads give the same bits, within float64's answer."""
    from dsl.ops import reduce as reduce_ops

    x = np.random.default_rng(3).standard_normal((40, 3 * 2048 * 3 + 37)).astype(np.float32)
    monkeypatch.setattr(reduce_ops, "_SPLIT_MID_ELEMENTS", 1)
    results = []
    for threads in (1, 2, 3):
        dsl.set_num_threads(threads)
        try:
            results.append(dsl.ops.sum(x, axis=0))
        finally:
            dsl.set_num_threads(0)
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], results[2])
    np.testing.assert_allclose(results[0], x.astype(np.float64).sum(axis=0), rtol=1e-6, atol=1e-5)
