"""Reductions over float32 arrays, numpy-style (`axis`, `keepdims`, `out=`).

    x = np.random.rand(4, 5, 6).astype(np.float32)
    dsl.ops.sum(x, axis=(0, 2))               # shape (5,)
    dsl.ops.max(x, axis=1, keepdims=True)     # shape (4, 1, 6)
    dsl.ops.argmax(x, axis=-1)                # int64, first maximum

Kernels: `stdlib/reduce.tk`. The reduced axes are merged into one (R) and
the kept axes into one (O), each in the order of x's strides, without
copying when the strides allow (reduce_layout.py): with R innermost the
`_last` kernels run along contiguous rows; with O innermost the `_mid`
kernels add whole rows at a time. Other layouts are copied first.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..library import num_threads
from . import _layout as L
from .arrays import column_strips
from .library import stdlib_kernel, stdlib_module
from .reduce_layout import empty_like_kept, views

__all__ = ["sum", "mean", "max", "min", "argmax"]

_SPLIT_MIN = 1 << 18  # a single long row is cut into pieces that run in parallel
_PIECES = 64


def _lib():
    return stdlib_module("reduce")


_kernel = functools.partial(stdlib_kernel, "reduce")


def normalize_axes(op: str, axis, ndim: int) -> tuple[int, ...]:
    """`axis` (None, an int or a tuple) as sorted, distinct, non-negative axes."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    axes = []
    for a in items:
        if not isinstance(a, (int, np.integer)) or isinstance(a, bool):
            raise TypeError(f"dsl.ops.{op}: 'axis' must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < ndim:
            raise ValueError(f"dsl.ops.{op}: axis {a} is out of range for an array of {ndim} dimensions")
        axes.append(int(a) % ndim)
    if len(set(axes)) != len(axes):
        raise ValueError(f"dsl.ops.{op}: repeated axis in {axis!r}")
    return tuple(sorted(axes))


def _result_shape(shape, axes, keepdims: bool) -> tuple[int, ...]:
    if keepdims:
        return tuple(1 if k in axes else n for k, n in enumerate(shape))
    return tuple(n for k, n in enumerate(shape) if k not in axes)


def _checked_out(op: str, out, result_shape, dtype) -> np.ndarray:
    """The user's `out`, when it can take the result."""
    out = L.as_view(f"dsl.ops.{op}", "'out'", out)
    if not isinstance(out, np.ndarray) or out.dtype != dtype:
        raise TypeError(f"dsl.ops.{op}: 'out' must be a numpy array of dtype {np.dtype(dtype)}")
    if out.shape != result_shape:
        raise ValueError(f"dsl.ops.{op}: 'out' has shape {out.shape}, the result has {result_shape}")
    if not out.flags.writeable:
        raise ValueError(f"dsl.ops.{op}: 'out' is read-only")
    return out


def _trailing(op: str, x, axis, keepdims: bool, out):
    """The common call without the general path's checks (4 us for a sum of
    16 floats, 1.3 with them skipped): a C-contiguous, non-empty float32
    array reduced over everything or its last axis, into a new result. None
    for anything else."""
    if out is not None or keepdims or type(x) is not np.ndarray or x.dtype is not L.F32 or not x.size:
        return None
    if axis is None:
        shape, rows = (), 1
    elif type(axis) is int and x.ndim and (axis == -1 or axis == x.ndim - 1):
        shape, rows = x.shape[:-1], x.size // x.shape[-1]
    else:
        return None
    if not x.flags.c_contiguous:
        return None
    result = np.empty(shape, np.int64 if op == "argmax" else L.F32)
    _call(op, "last", x.reshape(rows, x.size // rows), result.reshape(rows))
    return result if shape else result[()]


def _reduce(op: str, x, axis, keepdims: bool, out):
    found = _trailing(op, x, axis, keepdims, out)
    if found is not None:
        return found
    a = L.as_f32_array(op, "x", x)
    axes = normalize_axes(op, axis, a.ndim)
    shape = _result_shape(a.shape, axes, keepdims)
    core_shape = _result_shape(a.shape, axes, False)
    dtype = np.int64 if op == "argmax" else np.float32
    kept = [k for k in range(a.ndim) if k not in axes]
    if out is None:  # laid out as numpy's: x's order for a ufunc's reduction, C order for argmax
        result = np.empty(core_shape, dtype) if op == "argmax" else empty_like_kept(a, kept, core_shape, dtype)
    else:
        result = _checked_out(op, out, shape, dtype)
        if keepdims:  # the reduced axes of 1 dropped (indexing: always a view)
            result = result[tuple(0 if k in axes else slice(None) for k in range(a.ndim))]
    O, R = math.prod(core_shape), math.prod(a.shape[k] for k in axes)
    if R == 0 and op != "sum" and O > 0:
        raise ValueError(f"dsl.ops.{op}: zero-size reduction (no identity for {op})")
    if O > 0:
        target = result
        found = views(a, axes, target, any_order=op != "argmax")
        if found is None:  # `out` laid out otherwise than x: into x's layout, then copied
            target = empty_like_kept(a, kept, core_shape, dtype)
            found = views(a, axes, target, any_order=op != "argmax")
        if found is None:  # no axis of x contiguous: x copied into C order
            a = np.ascontiguousarray(a)
            found = views(a, axes, target, any_order=op != "argmax")
        if found is None:  # reduced axes apart in memory: moved last, copied
            target = np.empty(core_shape, dtype)
            found = "last", np.ascontiguousarray(a.transpose(kept + list(axes))).reshape(O, R), target.reshape(O)
        _call(op, *found)
        if target is not result:
            np.copyto(result, target)
    if out is not None:
        return out
    result = result.reshape(shape)
    return result if result.ndim else result[()]


def _call(op: str, kind: str, view: np.ndarray, flat: np.ndarray) -> None:
    if kind == "last" and op != "argmax":
        _along_rows(_kernel(f"{op}_last"), view, flat)
        return
    lib = _lib()
    if op == "argmax":
        if kind == "mid":
            (lib.argmax_mid if view.shape[2] >= 64 else lib.argmax_mid16)(view, flat)
        else:
            lib.argmax_last(view, flat)
    elif op == "sum":  # kind "mid"
        _sum_mid(lib, view, flat)
    else:
        getattr(lib, f"{op}_mid")(view, flat)


# One output row split into a strip of columns per thread from this many
# elements of x, and columns per thread (2 threads of Zen 4, sums down the
# columns of a 64 x 65536 array: 1.34 -> 0.33 ms, numpy 0.87; of 1024 x 1024
# split in two: 0.088 -> 0.125, so that one stays whole).
_SPLIT_MID_ELEMENTS = 1 << 20
_SPLIT_MID_COLUMNS = 2048


def _sum_mid(lib, view: np.ndarray, flat: np.ndarray) -> None:
    """flat[o, i] = the sum of view[o, :, i]; a single o wide enough is cut
    into one strip of columns per thread (as matvec's blocks of columns), the
    columns left over in a second call."""
    O, R, I = view.shape
    threads = num_threads()
    split = O == 1 and threads > 1 and R * I >= _SPLIT_MID_ELEMENTS and I >= _SPLIT_MID_COLUMNS * threads
    for x, y in column_strips([view, flat], threads) if split else [[view, flat]]:
        lib.sum_mid(x, np.empty(y.shape, np.float64), y)


def _along_rows(kernel, view: np.ndarray, flat: np.ndarray) -> None:
    """flat[o] = the reduction of view[o, :] by `kernel` (a `_last` one)."""
    O, R = view.shape
    if O == 1 and R >= _SPLIT_MIN and view.strides[1] == 4:
        # One long row: equal pieces on all threads (and the rest), then
        # their results combined.
        main = R - R % _PIECES
        results = np.empty(_PIECES + (main < R), np.float32)
        kernel(view[:, :main].reshape(_PIECES, main // _PIECES), results[:_PIECES])
        if main < R:
            kernel(view[:, main:], results[_PIECES:])
        kernel(results.reshape(1, -1), flat)
        return
    kernel(view, flat)


def sum(x, axis=None, keepdims: bool = False, out=None):
    """Sum over `axis` (None: all), float32 in blocks, blocks added in float64:
    `dsl.ops.sum(x, axis=0)`."""
    return _reduce("sum", x, axis, keepdims, out)


def mean(x, axis=None, keepdims: bool = False, out=None):
    """Mean over `axis` (nan over an empty axis, as numpy)."""
    total = _trailing("sum", x, axis, keepdims, out)
    if total is not None:  # a non-empty sum: no 0 / 0 to silence
        count = np.float32(x.size if axis is None else x.shape[-1])
        return np.divide(total, count, out=total) if isinstance(total, np.ndarray) else total / count
    a = L.as_f32_array("mean", "x", x)
    axes = normalize_axes("mean", axis, a.ndim)
    total = _reduce("sum", a, axis, keepdims, out)
    count = math.prod(a.shape[k] for k in axes)
    with np.errstate(invalid="ignore", divide="ignore"):
        if isinstance(total, np.ndarray):
            return np.divide(total, np.float32(count), out=total)
        return total / np.float32(count)


def max(x, axis=None, keepdims: bool = False, out=None):
    """Maximum over `axis`; NaN propagates; an empty axis is a ValueError."""
    return _reduce("max", x, axis, keepdims, out)


def min(x, axis=None, keepdims: bool = False, out=None):
    """Minimum over `axis`; NaN propagates; an empty axis is a ValueError."""
    return _reduce("min", x, axis, keepdims, out)


def argmax(x, axis=None, keepdims: bool = False, out=None):
    """Index of the first maximum along one axis (None: of the flattened
    array), int64; the first NaN counts as the maximum, as in numpy."""
    a = L.as_f32_array("argmax", "x", x)
    if axis is None:
        flat = np.ascontiguousarray(a).reshape(-1)
        found = _reduce("argmax", flat, 0, False, None)
        if keepdims:
            found = found.reshape((1,) * a.ndim)
        if out is not None:
            np.copyto(out, found)
            return out
        return found
    if isinstance(axis, tuple):
        raise TypeError("dsl.ops.argmax: 'axis' must be an int or None")
    return _reduce("argmax", a, axis, keepdims, out)

