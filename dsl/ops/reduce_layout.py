"""How a reduction (reduce.py) sees its array: the kept axes merged into one
(O) and the reduced ones into another (R), each ordered by x's strides, so
that any layout that is contiguous some way round (C, Fortran, transposed,
reversed) is read in place along unit strides.

    kind, x_view, result_view = views(x, axes, result, any_order=True)

kind "last": x as (O, R) with R contiguous, one reduction per row (the
`_last` kernels); "mid": x as (O, R, I) with I contiguous, whole rows of I
combined at a time (the `_mid` kernels; O is 1 when no kept axis lies
outside the reduced ones). None: no such view, x is copied.
"""

from __future__ import annotations

import math

import numpy as np

from . import _layout as L


def empty_like_kept(x: np.ndarray, kept: list[int], shape: tuple[int, ...], dtype) -> np.ndarray:
    """A new result of `shape` (one axis per kept axis of x), its axes laid out
    in the order of x's strides (numpy's order='K': a Fortran x gives a
    Fortran result), so that it merges wherever x's kept axes do."""
    order = sorted(range(len(kept)), key=lambda j: -abs(x.strides[kept[j]]))
    return np.empty([shape[j] for j in order], dtype).transpose(np.argsort(order))


def views(x: np.ndarray, axes: tuple[int, ...], result: np.ndarray, any_order: bool):
    """(kind, x view, result view) for reducing `axes` of x into `result` (one
    axis per kept axis), or None. `any_order`: the reduction does not depend
    on the order it meets the elements (sum, max, min; not argmax), so the
    reduced axes may be reordered and reversed too. Kept axes are reversed
    where x steps backwards, in x and in the result alike."""
    kept = [k for k in range(x.ndim) if k not in axes]
    flip = [x.strides[k] < 0 and (k not in axes or any_order) for k in range(x.ndim)]
    # (the Ellipsis keeps a 0-d array a view: indexing it by () gives a scalar)
    x = x[(*(slice(None, None, -1) if f else slice(None) for f in flip), ...)]
    result = result[(*(slice(None, None, -1) if flip[k] else slice(None) for k in kept), ...)]
    reduced = sorted(axes, key=lambda k: -x.strides[k]) if any_order else list(axes)
    order = sorted(range(len(kept)), key=lambda j: -x.strides[kept[j]])
    oshape, ostrides = L.merge_axes(tuple(x.shape[kept[j]] for j in order),
                                    [[x.strides[kept[j]] // x.itemsize for j in order],
                                     [result.strides[j] // result.itemsize for j in order]])
    rshape, rstrides = L.merge_axes(tuple(x.shape[k] for k in reduced),
                                    [[x.strides[k] // x.itemsize for k in reduced]])
    if len(oshape) > 2 or len(rshape) > 1:
        return None
    R = math.prod(x.shape[k] for k in reduced)
    sr = rstrides[0][0] if rshape else 0
    if len(oshape) == 2:  # kept axes outside and inside the reduced ones: x as (O, R, I)
        (O, I), (xs, rs) = oshape, ostrides
        if xs[1] != 1 or rs[1] != 1:  # (a kernel's fast version wants every inner stride 1)
            return None
        return "mid", L.strided(x, (O, R, I), [xs[0], sr, 1]), L.strided(result, (O, I), rs)
    O = math.prod(oshape)
    so, ro = (ostrides[0][0], ostrides[1][0]) if oshape else (0, 0)
    if ro != 1 and O > 1:
        return None
    if so == 1 and sr != 1 and O > 1:
        return "mid", L.strided(x, (1, R, O), [0, sr, 1]), L.strided(result, (1, O), [0, ro])
    if sr == 1 or R <= 1:
        return "last", L.strided(x, (O, R), [so, sr]), L.strided(result, (O,), [ro])
    return None
