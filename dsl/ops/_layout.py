"""Shapes for the pointwise ops: argument checks, numpy broadcasting, `out=`,
and coalescing of axes so that one rank-1 or rank-3 kernel serves any shape.

    shape, arrays = broadcast_operands("add", {"x": x, "y": y})
    views = coalesced(shape, arrays)      # equal-shaped strided views, rank <= 3
"""

from __future__ import annotations

import numbers

import numpy as np

from .arrays import address, as_view
from .arrays import strided as byte_strided

F32 = np.dtype(np.float32)


def as_f32_array(op: str, name: str, value) -> np.ndarray:
    """`value` as a float32 array (Python numbers and lists are converted);
    arrays of other dtypes are refused rather than silently converted."""
    if is_scalar(value) or isinstance(value, (list, tuple)):
        return np.asarray(value, dtype=F32)
    arr = np.asarray(as_view(f"dsl.ops.{op}", f"'{name}'", value))
    if arr.dtype != F32:
        raise TypeError(f"dsl.ops.{op}: '{name}' must be float32, got {arr.dtype}")
    return arr


def is_scalar(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def broadcast_shape(op: str, arrays: dict[str, np.ndarray]) -> tuple[int, ...]:
    try:
        return np.broadcast_shapes(*(a.shape for a in arrays.values()))
    except ValueError:
        shapes = ", ".join(f"{n}{a.shape}" for n, a in arrays.items())
        raise ValueError(f"dsl.ops.{op}: shapes do not broadcast: {shapes}") from None


def output(op: str, out, shape: tuple[int, ...], like: tuple = ()) -> np.ndarray:
    """`out` checked (float32, the result's shape, writable), or a new array
    laid out as the inputs `like` of that shape are when they agree (numpy's
    order='K': a Fortran-ordered x gives a Fortran-ordered exp(x)), else C."""
    if out is None:
        return _like(shape, like)
    out = as_view(f"dsl.ops.{op}", "'out'", out)
    if not isinstance(out, np.ndarray):
        raise TypeError(f"dsl.ops.{op}: 'out' must be a numpy array, got {type(out).__name__}")
    if out.dtype != F32:
        raise TypeError(f"dsl.ops.{op}: 'out' must be float32, got {out.dtype}")
    if out.shape != tuple(shape):
        raise ValueError(f"dsl.ops.{op}: 'out' has shape {out.shape}, the result has {tuple(shape)}")
    if not out.flags.writeable:
        raise ValueError(f"dsl.ops.{op}: 'out' is read-only")
    return out


def _like(shape: tuple[int, ...], inputs: tuple) -> np.ndarray:
    full = [x for x in inputs if isinstance(x, np.ndarray) and x.shape == tuple(shape) and 0 not in x.strides]
    if not full or full[0].flags.c_contiguous:
        return np.empty(shape, F32)
    order = _axis_order(full[0])
    if any(_axis_order(x) != order for x in full[1:]):
        return np.empty(shape, F32)
    return np.empty_like(full[0], dtype=F32)


def _axis_order(a: np.ndarray) -> tuple[int, ...]:
    """a's axes from the largest step in memory to the smallest (axes of 1 left out)."""
    return tuple(sorted((k for k in range(a.ndim) if a.shape[k] > 1), key=lambda k: -abs(a.strides[k])))


def unaliased(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """`x`, or a copy of it when it overlaps `out` other than element for
    element (numpy's rule: results are as if the inputs were read first)."""
    if x.size == 0 or out.size == 0 or not np.may_share_memory(x, out):
        return x
    same = address(x) == address(out) and x.strides == out.strides
    return x if same else x.copy()


def broadcast_inputs(inputs: list[np.ndarray], out: np.ndarray) -> list[np.ndarray]:
    """Each input as out's shape (itself when it has it: `np.broadcast_to`
    costs ~5 us), copied where it overlaps `out` (`unaliased`)."""
    return [unaliased(x if x.shape == out.shape else np.broadcast_to(x, out.shape), out) for x in inputs]


def _element_strides(a: np.ndarray) -> list[int]:
    return [s // a.itemsize for s in a.strides]


def coalesced(shape: tuple[int, ...], arrays: list[np.ndarray]) -> tuple[tuple[int, ...], list[list[int]]]:
    """Merge axes that every array steps through as one (and drop axes of size
    1): the fewest (shape, element strides per array) describing the same
    elements in the same order.

        >>> coalesced((2, 3), [np.empty((2, 3), np.float32)])
        ((6,), [[1]])
    """
    return merge_axes(shape, [_element_strides(a) for a in arrays])


def merge_axes(shape: tuple[int, ...], strides: list[list[int]]) -> tuple[tuple[int, ...], list[list[int]]]:
    """`coalesced` on element strides given directly (one list per array)."""
    dims = [k for k, n in enumerate(shape) if n != 1]
    out_shape: list[int] = []
    out_strides: list[list[int]] = [[] for _ in strides]
    for k in dims:
        mergeable = out_shape and all(s[-1] == st[k] * shape[k] for s, st in zip(out_strides, strides))
        if mergeable:
            out_shape[-1] *= shape[k]
            for s, st in zip(out_strides, strides):
                s[-1] = st[k]
        else:
            out_shape.append(shape[k])
            for s, st in zip(out_strides, strides):
                s.append(st[k])
    return tuple(out_shape), out_strides


def strided(a: np.ndarray, shape: tuple[int, ...], element_strides: list[int]) -> np.ndarray:
    """A view of `a`'s memory with the given shape and element strides."""
    return byte_strided(a, shape, tuple(s * a.itemsize for s in element_strides), writeable=a.flags.writeable)


def flat_views(inputs: list[np.ndarray], out: np.ndarray) -> list[np.ndarray] | None:
    """Rank-1 views of `inputs` and `out` when they all are C-contiguous of
    `out`'s shape, each input either `out` itself or apart from it; else None
    (the general path broadcasts, coalesces and copies overlapping inputs).

        >>> a = np.zeros((2, 3), np.float32)
        >>> [v.shape for v in flat_views([a], np.empty_like(a))]
        [(6,), (6,)]
    """
    if not out.flags.c_contiguous:
        return None
    for x in inputs:
        if x.shape != out.shape or not x.flags.c_contiguous:
            return None
        if x is not out and np.may_share_memory(x, out):
            return None
    return [x.reshape(-1) for x in inputs] + [out.reshape(-1)]


def rank_views(shape: tuple[int, ...], arrays: list[np.ndarray]) -> tuple[int, list[list[np.ndarray]]]:
    """Views for the rank-1 kernel (rank 1) or rank-3 calls (rank 3, one list
    of views per call: leading axes beyond three are looped over here). The
    axes are taken in the order of the last array's (the output's) strides,
    so that its stores, and the reads of any input laid out alike, run along
    unit strides whatever the order of the axes in the shape."""
    order = _axis_order(arrays[-1])
    if order != tuple(sorted(order)):
        order += tuple(k for k in range(len(shape)) if k not in order)
        arrays = [a.transpose(order) for a in arrays]
        shape = tuple(shape[k] for k in order)
    cshape, cstrides = coalesced(shape, arrays)
    if len(cshape) <= 1:
        n = cshape[0] if cshape else (0 if 0 in shape else 1)
        return 1, [[strided(a, (n,), s or [1]) for a, s in zip(arrays, cstrides)]]
    if len(cshape) == 2:  # (B, 1, C): the kernel's outer loop, which runs on all threads, gets B
        cshape = (cshape[0], 1, cshape[1])
        cstrides = [[s[0], 0, s[1]] for s in cstrides]
    full = [strided(a, cshape, s) for a, s in zip(arrays, cstrides)]
    return 3, [[v[index] for v in full] for index in np.ndindex(*cshape[:-3])]
