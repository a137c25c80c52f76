"""Arguments for quantized parameters (`w: q4_k[N, K]`): block bytes, checked.

A kernel takes, for a quantized parameter of rank r, any of

- the uint8 array `dsl.ops.quantize` returns: shape [..., K / block * bytes],
  rows a whole number of blocks;
- the same bytes as [..., K / block, bytes] (one block per row of the last axis);
- a 1-D uint8 buffer holding every row, one after the other, when the other
  arguments give the sizes (`x: f32[K]`, `y: f32[N]`);
- a `dsl.gguf` tensor (its `qtype` must be the parameter's, its `shape` gives the sizes).

`blocks_of` turns each into the uint8 block array [..., K / block, bytes] and
the sizes in values, or raises the TypeError / ValueError that names the kernel
and the parameter, before any native code runs.

    >>> blocks, shape = blocks_of("k", spec_of_w, dsl.ops.quantize(w, "q4_k"), ...)  # doctest: +SKIP
"""

from __future__ import annotations

import numpy as np

from dsl.lowering.quant import FORMATS


def blocks_of(kernel: str, p, value, params, args) -> tuple[np.ndarray, tuple[int, ...]]:
    """(uint8 blocks [..., blocks per row, bytes], sizes in values) of argument `value`."""
    fmt = FORMATS[p.quant]
    where = f"{kernel}(): parameter '{p.name}'"
    rank = len(p.dims)
    if hasattr(value, "qtype") and hasattr(value, "data") and hasattr(value, "shape"):  # a dsl.gguf tensor
        if str(value.qtype).lower() != fmt.name:
            raise TypeError(f"{where} expects a {fmt.name} tensor, got a {value.qtype} one")
        shape = tuple(int(d) for d in value.shape)
        data = np.asarray(value.data).reshape(-1)
        return _shaped(where, fmt, _bytes(where, fmt, data), shape, rank), shape
    a = _bytes(where, fmt, value)
    if a.ndim == rank + 1 and a.shape[-1] == fmt.nbytes:
        blocks = a
    elif a.ndim == rank and a.shape[-1] % fmt.nbytes == 0 and (a.shape[-1] == 0 or a.strides[-1] == 1):
        blocks = a.reshape(*a.shape[:-1], a.shape[-1] // fmt.nbytes, fmt.nbytes)
    elif a.ndim == rank:
        raise ValueError(f"{where}: rows of {a.shape[-1]} bytes are not a whole number of {fmt.nbytes}-byte "
                         f"{fmt.name} blocks")
    elif a.ndim == 1:
        shape = _sizes_from_others(where, fmt, p, params, args)
        return _shaped(where, fmt, a, shape, rank), shape
    else:
        raise ValueError(f"{where} expects {fmt.name} blocks as uint8 [{', '.join(map(str, p.dims[:-1] + ('bytes',)))}] "
                         f"(from dsl.ops.quantize), [..., blocks, {fmt.nbytes}] or a 1-D buffer; got shape {a.shape}")
    _check_layout(where, fmt, blocks)
    return blocks, blocks.shape[:-2] + (blocks.shape[-2] * fmt.block,)


def block_strides(blocks: np.ndarray, nbytes: int) -> list[int]:
    """The ABI's strides in blocks: the outer axes', then 1 along the row."""
    return [s // nbytes for s in blocks.strides[:-2]] + [1]


def _bytes(where: str, fmt, value) -> np.ndarray:
    from .call import as_array  # call.py imports this module

    a = as_array(where.split("(")[0], _Named(where), value) if not isinstance(value, np.ndarray) else value
    if a.dtype != np.uint8:
        raise TypeError(f"{where} expects {fmt.name} blocks as a uint8 array, got an array of {a.dtype}")
    return a


class _Named:
    """What `as_array` needs of a parameter for its messages."""

    def __init__(self, where: str):
        self.name = where.split("'")[1]
        self.dtype = "u8"


def _sizes_from_others(where: str, fmt, p, params, args) -> tuple[int, ...]:
    """The sizes of a quantized parameter passed as a 1-D buffer, from the other arguments."""
    sizes = []
    for axis, dim in enumerate(p.dims):
        if isinstance(dim, int):
            sizes.append(dim)
            continue
        found = next((np.shape(v)[k] for q, v in zip(params, args) if q.kind == "tensor" and not q.quant
                      for k, d in enumerate(q.dims) if d == dim and len(np.shape(v)) == len(q.dims)), None)
        if found is None:
            raise ValueError(f"{where}: a 1-D buffer does not say {dim} (axis {axis}), and no other argument does; "
                             f"pass the blocks as uint8 [{', '.join(map(str, p.dims[:-1] + ('bytes',)))}]")
        sizes.append(int(found))
    return tuple(sizes)


def _shaped(where: str, fmt, data: np.ndarray, shape: tuple[int, ...], rank: int) -> np.ndarray:
    """1-D block bytes as [..., blocks per row, bytes] for sizes `shape` (checked)."""
    if len(shape) != rank:
        raise ValueError(f"{where} expects a rank-{rank} {fmt.name} tensor, got shape {shape}")
    if shape[-1] % fmt.block:
        dim = "the last dim"
        raise ValueError(f"{where}: {dim} K = {shape[-1]} is not a multiple of {fmt.block} ({fmt.name} block)")
    count = int(np.prod(shape, dtype=np.int64)) // fmt.block
    if data.ndim != 1 or data.size != count * fmt.nbytes:
        raise ValueError(f"{where}: {data.size} bytes of blocks, but shape {shape} in {fmt.name} takes "
                         f"{count * fmt.nbytes} ({count} blocks of {fmt.nbytes} bytes)")
    if data.size and data.strides[0] != 1:
        raise ValueError(f"{where}: the block bytes must be contiguous")
    blocks = data.reshape(*shape[:-1], shape[-1] // fmt.block, fmt.nbytes)
    _check_layout(where, fmt, blocks)
    return blocks


def _check_layout(where: str, fmt, blocks: np.ndarray) -> None:
    """Blocks contiguous along a row, rows a whole number of blocks apart, fields aligned."""
    if blocks.size == 0:
        return
    if blocks.strides[-1] != 1 or (blocks.shape[-2] > 1 and blocks.strides[-2] != fmt.nbytes):
        raise ValueError(f"{where}: the blocks of a row must be contiguous ({fmt.nbytes} bytes apart)")
    if any(s % fmt.nbytes for s, n in zip(blocks.strides[:-2], blocks.shape[:-2]) if n > 1):
        raise ValueError(f"{where}: rows must start a whole number of {fmt.nbytes}-byte blocks apart "
                         f"(strides {blocks.strides[:-2]} bytes)")
    if blocks.ctypes.data % fmt.align:
        raise ValueError(f"{where}: the block data must be aligned to {fmt.align} bytes")
