"""How softmax and the norms (norm.py) see an array: the normalized axis as
the rows of x[R, C] when it is contiguous, else down the columns of
x[O, C, I], where I is the contiguous run of the axes inside it (the
`_cols` kernels of stdlib/norm_cols.tk take strips of I as vector lanes,
the `_down` kernels whole rows: kernel_name picks).

    kind, x_view, out_view = views(x, out, axis)   # or None: copy x first

Either way every kernel access is unit-stride; a layout that gives neither
(no axis contiguous, or outer axes that do not merge into one) is None, and
the caller copies x into C order once, which always gives one of the two.
"""

from __future__ import annotations

import numpy as np

from . import _layout as L

# At least this many columns of I take the 64-lane kernels (stdlib/norm_cols.tk).
WIDE_COLUMNS = 64
# Softmax down columns at least this long takes whole rows at a time
# (softmax_down: a 64-column strip of them outgrows L2).
LONG_COLUMNS = 1024
# The norms down columns all take whole rows at a time; the plain forms take
# a weight of ones (and a bias of zeros).
DOWN = {"layer_norm": "layer_norm_down", "layer_norm_plain": "layer_norm_down",
        "rms_norm": "rms_norm_down", "rms_norm_plain": "rms_norm_down"}


def views(a: np.ndarray, out: np.ndarray, axis: int):
    """("rows", a as (R, C), out as (R, C)) or ("cols", a as (O, C, I), out
    likewise), every access unit-stride; None when `a` and `out` allow neither."""
    unit = [a.strides[axis] == a.itemsize, out.strides[axis] == out.itemsize]
    if unit[0] != unit[1]:
        return None
    shape, strides = _other_axes(a, out, axis)
    C = a.shape[axis]
    if unit[0]:  # rows: the other axes must merge into one
        if len(shape) > 1:
            return None
        R = shape[0] if shape else 1
        return ("rows", *(L.strided(arr, (R, C), [st[0] if shape else 0, 1])
                          for arr, st in zip((a, out), strides)))
    # Columns: the other axes must merge into at most an outer axis O and a
    # unit-stride inner run I of more than one column (one column would be a
    # row done a lane at a time).
    if not shape or len(shape) > 2 or strides[0][-1] != 1 or strides[1][-1] != 1:
        return None
    O, I = (shape[0] if len(shape) == 2 else 1), shape[-1]
    return ("cols", *(L.strided(arr, (O, C, I), [st[0] if len(shape) == 2 else 0, arr.strides[axis] // arr.itemsize, 1])
                      for arr, st in zip((a, out), strides)))


def kernel_name(kind: str, name: str, x_view: np.ndarray) -> tuple[str, str]:
    """(stdlib module, kernel) of `name` ('softmax', 'log_softmax', or a norm:
    'layer_norm_plain', ...) for these views. A `_down` kernel takes scratch
    rows besides (norm.py's `_down` calls it)."""
    if kind == "rows":
        return "norm", f"{name}_rows"
    if not name.endswith("softmax"):
        return "norm_cols", DOWN[name]
    if x_view.shape[2] < WIDE_COLUMNS:
        return "norm_cols", f"{name}_cols16"
    if x_view.shape[1] >= LONG_COLUMNS:
        return "norm_cols", f"{name}_down"
    return "norm_cols", f"{name}_cols64"


def _other_axes(a: np.ndarray, out: np.ndarray, axis: int) -> tuple[tuple[int, ...], list[list[int]]]:
    """The axes but `axis`, ordered by a's strides (rows and columns may be
    visited in any order, the same for a and out) and merged where both allow:
    (shape, [a's element strides, out's])."""
    order = sorted((k for k in range(a.ndim) if k != axis), key=lambda k: -abs(a.strides[k]))
    strides = [[arr.strides[k] // arr.itemsize for k in order] for arr in (a, out)]
    return L.merge_axes(tuple(a.shape[k] for k in order), strides)
