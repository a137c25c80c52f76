"""Softmax and the row normalizations, along one axis of a float32 array.

    x = np.random.randn(8, 1024).astype(np.float32)
    p = dsl.ops.softmax(x)                            # along the last axis
    y = dsl.ops.layer_norm(x, weight=w, bias=b)       # w, b: shape (1024,)
    z = dsl.ops.rms_norm(x, eps=1e-6, out=x)          # in place

Kernels: `stdlib/norm.tk`, one row of x[R, C] at a time (the row stays in
cache between its passes), when the axis is contiguous; `stdlib/norm_cols.tk`
down the columns of x[O, C, I] when another axis is (norm_layout.py).
"""

from __future__ import annotations

import functools
import numbers

import numpy as np

from ..library import num_threads
from . import _layout as L
from .arrays import column_strips
from .library import stdlib_kernel
from .norm_layout import kernel_name, views
from .reduce import normalize_axes

__all__ = ["softmax", "log_softmax", "layer_norm", "rms_norm"]

_SPLIT_ELEMENTS = 1 << 16  # columns of fewer elements stay on one thread (and whole)


_kernel = functools.partial(stdlib_kernel, "norm")


def _last_rows(x, axis, out):
    """(rows of x, rows of the result, the result) for the common call: x a
    C-contiguous, non-empty float32 array normalized along its last axis,
    `out` absent or another such array apart from x; None for anything else,
    which the general path (~3-4 us more a call) checks and handles."""
    if axis != -1 or type(axis) is not int or type(x) is not np.ndarray or x.dtype is not L.F32 or not x.size:
        return None
    shape = x.shape
    if not shape or not x.flags.c_contiguous:
        return None
    if out is None:
        out = np.empty(shape, L.F32)
    elif (type(out) is not np.ndarray or out.dtype is not L.F32 or out.shape != shape
          or not (out.flags.c_contiguous and out.flags.writeable) or np.may_share_memory(x, out)):
        return None
    C = shape[-1]
    return x.reshape(-1, C), out.reshape(-1, C), out


def _vector(value, C: int) -> bool:
    """Whether a weight or bias is a float32 array of shape (C,) as it is."""
    return type(value) is np.ndarray and value.dtype is L.F32 and value.shape == (C,)


def _rowwise(op: str, x, axis, out, name: str, extra: tuple = ()) -> np.ndarray:
    """`name`'s kernel (x, *extra, out) along `axis`, honouring `out=`. A new
    result takes x's layout (numpy's order='K'), so that both are read and
    written the same way."""
    a = L.as_f32_array(op, "x", x)
    ax = _axis(op, a, axis)
    result = np.empty_like(a) if out is None else L.output(op, out, a.shape)
    if a.size == 0:
        return result
    # The kernels are not declared in place: a row read again after its
    # first write must be a copy when out is x (numpy allows out=x).
    a = a.copy() if np.may_share_memory(a, result) else a
    target = result
    found = views(a, target, ax)
    if found is None:  # out laid out otherwise than x: into x's layout, then copied
        target = np.empty_like(a)
        found = views(a, target, ax)
    if found is None:  # no axis of x contiguous: one copy into C order
        a = np.ascontiguousarray(a)
        target = result if result.flags.c_contiguous else np.empty_like(a)
        found = views(a, target, ax)
    kind, x_view, out_view = found
    module, kernel = kernel_name(kind, name, x_view)
    if kernel.endswith("_down"):
        _down(kernel, name, x_view, extra, out_view)
    else:
        stdlib_kernel(module, kernel)(x_view, *extra, out_view)
    if target is not result:
        np.copyto(result, target)
    return result


# The scratch rows (one per o) of the `_down` kernels, by dtype.
_SCRATCH = {"layer_norm_down": (np.float64, np.float32), "rms_norm_down": (np.float64,),
            "softmax_down": (np.float32, np.float32), "log_softmax_down": (np.float32, np.float32)}


def _down(kernel: str, name: str, x: np.ndarray, extra: tuple, out: np.ndarray) -> None:
    """out = `name` of x [O, C, I] along C by the whole-row `kernel`. A single
    o of columns enough for the threads is cut into one strip per thread (as
    sums down columns are, ops/reduce.py), the columns left over in a second call."""
    O, C, I = x.shape
    if name.endswith("_plain"):  # (eps,) -> a weight of ones (and a bias of zeros), eps
        extra = (np.ones(C, np.float32),) + ((np.zeros(C, np.float32),) if name == "layer_norm_plain" else ()) + extra
    run = stdlib_kernel("norm_cols", kernel)
    threads = num_threads()
    split = O == 1 and threads > 1 and C * I >= _SPLIT_ELEMENTS
    for xs, outs in column_strips([x, out], threads) if split else [[x, out]]:
        scratch = (np.empty((xs.shape[0], xs.shape[2]), dtype) for dtype in _SCRATCH[kernel])
        run(xs, *extra, *scratch, outs)


def _axis(op: str, a: np.ndarray, axis) -> int:
    """`axis` checked and made non-negative (-1, the usual one, without numpy's helpers)."""
    if a.ndim == 0:
        raise ValueError(f"dsl.ops.{op}: needs an array with at least one dimension")
    if axis == -1 and type(axis) is int:
        return a.ndim - 1
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"dsl.ops.{op}: 'axis' must be an int (one axis), got {axis!r}")
    (ax,) = normalize_axes(op, axis, a.ndim)
    return ax


def _axis_length(op: str, a: np.ndarray, axis) -> int:
    return a.shape[_axis(op, a, axis)]


def _param(op: str, name: str, value, length: int) -> np.ndarray | None:
    if value is None:
        return None
    arr = L.as_f32_array(op, name, value)
    if arr.shape != (length,):
        raise ValueError(f"dsl.ops.{op}: '{name}' must have shape ({length},), got {arr.shape}")
    return arr


def _eps(op: str, eps) -> float:
    if not isinstance(eps, numbers.Real) or isinstance(eps, bool) or not eps >= 0:
        raise ValueError(f"dsl.ops.{op}: 'eps' must be a number >= 0, got {eps!r}")
    return float(eps)


def softmax(x, axis: int = -1, out=None):
    """exp(x) / sum(exp(x)) along `axis`, the maximum subtracted first (no
    overflow at +-1e4): `dsl.ops.softmax(logits, axis=-1)`."""
    if (rows := _last_rows(x, axis, out)) is not None:
        _kernel("softmax_rows")(rows[0], rows[1])
        return rows[2]
    return _rowwise("softmax", x, axis, out, "softmax")


def log_softmax(x, axis: int = -1, out=None):
    """x - logsumexp(x) along `axis`, computed stably."""
    if (rows := _last_rows(x, axis, out)) is not None:
        _kernel("log_softmax_rows")(rows[0], rows[1])
        return rows[2]
    return _rowwise("log_softmax", x, axis, out, "log_softmax")


def layer_norm(x, weight=None, bias=None, eps: float = 1e-5, axis: int = -1, out=None):
    """(x - mean) / sqrt(var + eps) * weight + bias along `axis` (biased
    variance, as torch): `dsl.ops.layer_norm(h, weight=g, bias=b)`."""
    if type(eps) is float and eps >= 0 and (rows := _last_rows(x, axis, out)) is not None:
        C = rows[0].shape[1]
        if weight is None and bias is None:
            _kernel("layer_norm_plain_rows")(rows[0], eps, rows[1])
            return rows[2]
        if _vector(weight, C) and _vector(bias, C):
            _kernel("layer_norm_rows")(rows[0], weight, bias, eps, rows[1])
            return rows[2]
    a = L.as_f32_array("layer_norm", "x", x)
    C = _axis_length("layer_norm", a, axis)
    w, b, e = _param("layer_norm", "weight", weight, C), _param("layer_norm", "bias", bias, C), _eps("layer_norm", eps)
    if w is None and b is None:
        return _rowwise("layer_norm", a, axis, out, "layer_norm_plain", (e,))
    w = np.ones(C, np.float32) if w is None else w
    b = np.zeros(C, np.float32) if b is None else b
    return _rowwise("layer_norm", a, axis, out, "layer_norm", (w, b, e))


def rms_norm(x, weight=None, eps: float = 1e-6, axis: int = -1, out=None):
    """x / sqrt(mean(x**2) + eps) * weight along `axis` (as torch's RMSNorm)."""
    if type(eps) is float and eps >= 0 and (rows := _last_rows(x, axis, out)) is not None:
        if weight is None:
            _kernel("rms_norm_plain_rows")(rows[0], eps, rows[1])
            return rows[2]
        if _vector(weight, rows[0].shape[1]):
            _kernel("rms_norm_rows")(rows[0], weight, eps, rows[1])
            return rows[2]
    a = L.as_f32_array("rms_norm", "x", x)
    C = _axis_length("rms_norm", a, axis)
    w, e = _param("rms_norm", "weight", weight, C), _eps("rms_norm", eps)
    if w is None:
        return _rowwise("rms_norm", a, axis, out, "rms_norm_plain", (e,))
    return _rowwise("rms_norm", a, axis, out, "rms_norm", (w, e))
