"""Quantized tensors in the reference interpreter: numpy views of block bytes.

A quantized argument is its uint8 blocks, [..., blocks per row, bytes per
block]; each field view (`lowering/quant.py`) is a numpy view of those bytes
with the field's dtype, so the interpreter reads exactly the bytes compiled
code reads, and an index outside a view raises its usual IndexError.
"""

from __future__ import annotations

import numpy as np

from . import ir


def quant_blocks(value, p: ir.TensorParam, what: str) -> np.ndarray:
    """`value` checked as the uint8 blocks of quantized parameter `p`."""
    fmt = p.quant.fmt
    if not isinstance(value, np.ndarray) or value.dtype != np.uint8 or value.ndim != p.rank + 1 \
            or value.shape[-1] != fmt.nbytes:
        got = f"{value.ndim}-d {value.dtype} {value.shape}" if isinstance(value, np.ndarray) else type(value).__name__
        raise TypeError(f"{what} must be {fmt.name} blocks, a {p.rank + 1}-d uint8 array [..., blocks, "
                        f"{fmt.nbytes}], got {got}")
    return value


def logical_shape(blocks: np.ndarray, p: ir.TensorParam) -> tuple[int, ...]:
    """The sizes in values of the quantized tensor held in `blocks`."""
    return blocks.shape[:-2] + (blocks.shape[-2] * p.quant.fmt.block,)


def field_array(blocks: np.ndarray, view: ir.TensorParam) -> np.ndarray:
    """The numpy view of `view`'s field in `blocks`, shaped as `view.dims`.

        >>> field_array(np.zeros((2, 3, 144), np.uint8), q4k_view_of_d).shape   # doctest: +SKIP
        (2, 3)
    """
    fld = view.view.field
    dtype = np.dtype(fld.dtype.numpy_name)
    width = max(fld.count, 1) * dtype.itemsize
    raw = blocks[..., fld.offset: fld.offset + width]
    if raw.shape[-1] != width:  # no blocks at all: an empty view of the right shape
        return np.zeros(blocks.shape[:-1] + tuple(view.dims[len(blocks.shape) - 1:]), dtype)
    values = raw.view(dtype) if raw.size else np.zeros(raw.shape[:-1] + (max(fld.count, 1),), dtype)
    if fld.count == 0:
        return values[..., 0]
    inner = view.dims[blocks.ndim - 1:]
    return values.reshape(values.shape[:-1] + tuple(inner))
