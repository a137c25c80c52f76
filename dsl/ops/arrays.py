"""Argument checks and views shared by the `dsl.ops` wrappers.

Every check runs before any native code, and raises the `TypeError` or
`ValueError` numpy would, in numpy's message style, naming the op:

    >>> check_float_dtype("matmul", np.zeros(2, np.int32))      # doctest: +SKIP
    TypeError: matmul: unsupported dtype int32 (float32 and float64 are)

Views never copy unless a layout cannot be described by element strides
(byte strides that are not a multiple of the item size, unaligned data):
then `kernel_view` copies, so a kernel never sees such memory.
"""

from __future__ import annotations

import ctypes
import math

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..call import foreign_view

FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}


def as_view(op: str, name: str, value):
    """`value` as an ndarray sharing its memory when it is a foreign array (an
    object with `__dlpack__`, such as a torch tensor, or with a buffer); any
    other value as it is, for the caller's own checks."""
    if isinstance(value, np.ndarray) or not (hasattr(value, "__dlpack__") or _has_buffer(value)):
        return value
    try:
        return foreign_view(value)
    except TypeError as exc:
        raise TypeError(f"{op}: {name}: cannot view {type(value).__name__} as an array: {exc}") from None


def _has_buffer(value) -> bool:
    try:
        memoryview(value)
    except TypeError:
        return False
    return True


def as_array(op: str, name: str, value) -> np.ndarray:
    """`value` as an ndarray (no copy for arrays, `__dlpack__` objects and buffers)."""
    value = as_view(op, name, value)
    if isinstance(value, np.ndarray):
        return value
    try:
        return np.asarray(value)
    except (TypeError, ValueError) as exc:
        raise TypeError(f"{op}: {name} must be an array, got {type(value).__name__} ({exc})") from None


def check_float_dtype(op: str, *arrays: np.ndarray) -> np.dtype:
    """The common float dtype of `arrays` (float32 and float64 mix as numpy's
    promotion does, to float64); TypeError for any other dtype."""
    for a in arrays:
        if a.dtype.base not in FLOATS and a.dtype.newbyteorder("=") not in FLOATS:
            raise TypeError(f"{op}: unsupported dtype {a.dtype} (float32 and float64 are)")
    return np.result_type(*[a.dtype.newbyteorder("=") for a in arrays])


def kernel_view(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """`a` as `dtype` in native byte order, copied only when it must be (another
    dtype, foreign byte order, unaligned, strides that are no whole elements)."""
    if a.dtype != dtype or not a.dtype.isnative:
        return a.astype(dtype)
    if not a.flags.aligned or any(s % a.itemsize for s in a.strides):
        return np.array(a, dtype=dtype)
    return a


def check_out(op: str, out, shape: tuple, dtype: np.dtype) -> np.ndarray:
    """`out` (as an ndarray view, when it is a torch tensor or another foreign
    array) when it can hold the result: exactly `shape` and `dtype`, writable."""
    out = as_view(op, "out", out)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"{op}: out must be a numpy array, got {type(out).__name__}")
    if out.shape != tuple(shape):
        raise ValueError(f"{op}: out has shape {out.shape}, the result has shape {tuple(shape)}")
    if out.dtype != dtype:
        raise TypeError(f"{op}: out has dtype {out.dtype}, the result is {dtype} (no casting)")
    if not out.flags.writeable:
        raise ValueError(f"{op}: out is read-only")
    return out


def _interface_address(a: np.ndarray) -> int:
    """The address of `a`'s first element."""
    return a.__array_interface__["data"][0]


def _struct_address():
    """An `address` that reads the data pointer from the array object itself
    (numpy's C structure: the object header, then `char *data`; 0.15 us
    where `__array_interface__` builds a dict in 1.1, and a small permute
    asks twice), if this interpreter and numpy lay it out so; else None."""
    try:
        from_address = ctypes.c_void_p.from_address
        probes = [np.zeros(3, np.float32)[1:], np.zeros((2, 2))[:, ::-1], np.frombuffer(b"abcd", np.uint8)[2:]]
        if all(from_address(id(p) + _DATA_OFFSET).value == _interface_address(p) for p in probes):
            def address(a: np.ndarray) -> int:
                """The address of `a`'s first element."""
                return from_address(id(a) + _DATA_OFFSET).value or 0
            return address
    except (AttributeError, ValueError, TypeError):
        pass
    return None


_DATA_OFFSET = 2 * ctypes.sizeof(ctypes.c_void_p)  # after PyObject_HEAD's refcount and type
address = _struct_address() or _interface_address


LINE = 64  # bytes in a cache line (x86-64 and the AArch64 cores we target)


def empty_aligned(shape: tuple, dtype, align: int = LINE) -> np.ndarray:
    """np.empty(shape, dtype), C-contiguous, its data on an `align`-byte
    boundary (numpy starts a large array 16 bytes past a page; streamed
    stores need whole aligned lines)."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize
    buf = np.empty(nbytes + align, np.uint8)
    start = -address(buf) % align
    return buf[start:start + nbytes].view(dtype).reshape(shape)


def writable_target(out: np.ndarray, *inputs: np.ndarray) -> np.ndarray:
    """Where a kernel may write `out`'s result: `out` itself, or a scratch array
    when it overlaps an input, is unaligned, or has strides that are no whole
    elements (copy back with `finish`)."""
    if any(np.may_share_memory(out, a) for a in inputs) or kernel_view(out, out.dtype) is not out:
        return empty_aligned(out.shape, out.dtype)
    return out


def short_path_out(out, shape: tuple, dtype: np.dtype, *inputs: np.ndarray) -> np.ndarray | None:
    """Where a short path (kernels called without the general path's checks)
    writes its result: a new array when `out` is None; `out` itself when it
    is an ndarray of `shape` and `dtype` that overlaps none of `inputs` (a
    kernel refuses an overlap before it writes, but a path of two calls could
    be refused after the first had written); else None, for the general
    path to check, report or work around."""
    if out is None:
        return np.empty(shape, dtype)
    if type(out) is not np.ndarray or out.dtype is not dtype or out.shape != shape:
        return None
    for x in inputs:
        if np.may_share_memory(out, x):
            return None
    return out


def finish(target: np.ndarray, out: np.ndarray) -> np.ndarray:
    if target is not out:
        np.copyto(out, target)
    return out


def merge_axes(arrays: list[np.ndarray], count: int) -> list[np.ndarray]:
    """Views of `arrays` (same leading shape) whose first `count` axes are merged
    where every array allows it (stride[i] == stride[i + 1] * shape[i + 1]),
    axes of size 1 dropped; at least one leading axis is kept."""
    shape = arrays[0].shape[:count]
    groups: list[list[int]] = []
    for i in range(count):
        if shape[i] == 1:
            continue
        if groups and all(a.strides[groups[-1][-1]] == a.strides[i] * a.shape[i] for a in arrays):
            groups[-1].append(i)
        else:
            groups.append([i])
    lead_shape = tuple(math.prod(shape[i] for i in g) for g in groups) or (1,)
    return [view_as(a, lead_shape + a.shape[count:]) for a in arrays]


def even_strips(n: int, pieces: int) -> int:
    """The width of `pieces` equal strips across n elements (one per thread, or
    per cache-sized block): a multiple of 16, so that strips of 4-byte elements
    start 64 bytes apart and no two threads write one cache line; 0 when n is
    too short. The n - pieces * width elements after them are the caller's."""
    return n // pieces // 16 * 16


def column_strips(arrays: list[np.ndarray], pieces: int) -> list[list[np.ndarray]]:
    """Arrays of one outer row, [1, ..., I] with the columns last, as the parts
    a kernel over [O, ..., I] is called on: [pieces, ..., width] views, a strip
    of columns each (one per thread: even_strips' width), then [1, ..., rest]
    views of the columns left over, if any; [arrays] when I is too narrow."""
    columns = arrays[0].shape[-1]
    width = even_strips(columns, pieces)
    if not width:
        return [arrays]
    done = width * pieces
    strips = []
    for a in arrays:
        mid = a.shape[1:-1]
        part = view_as(a[0, ..., :done], mid + (pieces, width))
        strips.append(part.transpose(len(mid), *range(len(mid)), len(mid) + 1))
    return [strips] + ([[a[..., done:] for a in arrays]] if done < columns else [])


def view_as(a: np.ndarray, shape: tuple) -> np.ndarray:
    """`a` reshaped to `shape` as a view, never a copy (the caller knows the
    strides allow it). numpy's reshape takes 0.3 us where `as_strided` took 5."""
    if _RESHAPE_NO_COPY:
        return a.reshape(shape, copy=False)
    view = a.reshape(shape)
    if not np.shares_memory(view, a):  # numpy < 2.1 copies silently when it must
        raise ValueError(f"internal: {a.shape} {a.strides} cannot be viewed as {shape}")
    return view


def strided(a: np.ndarray, shape: tuple, strides: tuple, writeable: bool = True) -> np.ndarray:
    """`as_strided(a, shape, strides)`: built on a C-contiguous `a`'s buffer in
    one `np.ndarray(...)` (0.6 us) when the view stays inside it, else by
    `as_strided` (3-5 us)."""
    if a.flags.c_contiguous:
        try:
            view = np.ndarray(shape, a.dtype, a, 0, strides)
        except (ValueError, TypeError):  # reaches past a's own elements
            pass
        else:
            if not (writeable and a.flags.writeable):
                view.flags.writeable = False
            return view
    return as_strided(a, shape, strides, writeable=writeable)


_RESHAPE_NO_COPY = np.lib.NumpyVersion(np.__version__) >= "2.1.0"
