"""GGUF files: named tensors, memory-mapped, ready for `dsl.ops`' quantized ops.

    model = dsl.gguf.load("model.gguf")
    w = model["blk.0.ffn_up.weight"]            # a GGUFTensor
    y = dsl.ops.qmatvec(w.data, x, w.qtype, w.shape)

Reading goes through the `gguf` package (llama.cpp's gguf-py, `pip install
gguf`); tensor data stays in the read-only file mapping (no copy).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["GGUFTensor", "load"]


@dataclass(frozen=True)
class GGUFTensor:
    """One tensor of a GGUF file. `shape` is numpy's order (the row, GGUF's
    ne[0], last); `qtype` is 'q4_k', 'q8_0', ... for block-quantized data (then
    `data` is its uint8 blocks, [..., bytes per row]) or 'f32' / 'f16' / ...
    for plain data (then `data` has that dtype and `shape`)."""

    name: str
    qtype: str
    shape: tuple[int, ...]
    data: np.ndarray

    @property
    def quantized(self) -> bool:
        return self.data.dtype == np.uint8 and self.qtype not in ("u8", "i8")

    def dequantize(self) -> np.ndarray:
        """The values as float32 (dsl.ops.dequantize for quantized tensors)."""
        if not self.quantized:
            return np.asarray(self.data, np.float32).reshape(self.shape)
        from dsl.ops.quant import dequantize

        return dequantize(self.data, self.qtype, self.shape)


def load(path) -> dict[str, GGUFTensor]:
    """The tensors of the GGUF file at `path`, by name, in file order.

    A file that is truncated or malformed, or whose tensor data does not match
    a tensor's type and shape (each tensor must start where the one before it
    ends, padded to the file's alignment, as llama.cpp requires), raises
    ValueError naming the file (and the tensor).

        >>> tensors = dsl.gguf.load("model.gguf")     # doctest: +SKIP
    """
    try:
        import gguf
    except ImportError:  # pragma: no cover - an optional dependency
        raise ImportError("dsl.gguf.load needs the gguf package: pip install gguf") from None
    path = Path(path)
    try:
        reader = gguf.GGUFReader(path, "r")
        _check_layout(path, reader)
        return {t.name: _tensor(gguf, path, t) for t in reader.tensors}
    except (ValueError, IndexError, KeyError, struct.error, EOFError) as exc:
        raise ValueError(f"dsl.gguf.load: {path} is not a readable GGUF file (truncated or malformed): {exc}") from None


def _check_layout(path: Path, reader) -> None:
    """Each tensor's data starts where the one before it ends, padded to the
    file's alignment (as llama.cpp's loader demands): the reader sizes each
    tensor from its own type and shape, so a shape that claims more bytes
    than were written would read into the next tensor, and one that claims
    fewer would leave bytes that belong to nobody."""
    expected = 0
    for t in reader.tensors:
        offset = int(t.data_offset) - int(reader.data_offset)
        if offset != expected:
            raise ValueError(f"{path}: tensor '{t.name}' starts at byte {offset} of the tensor data, expected "
                             f"{expected} (where the tensor before it ends, padded to {reader.alignment} bytes): "
                             f"its offset, or the type or shape of a tensor before it, is wrong")
        expected += -(-int(t.n_bytes) // reader.alignment) * reader.alignment


def _tensor(gguf, path: Path, t) -> GGUFTensor:
    qtype = gguf.GGMLQuantizationType(t.tensor_type).name.lower()
    shape = tuple(int(d) for d in reversed(t.shape.tolist()))
    block, _ = gguf.GGML_QUANT_SIZES[gguf.GGMLQuantizationType(t.tensor_type)]
    if shape and shape[-1] % block:
        raise ValueError(f"{path}: tensor '{t.name}' has rows of {shape[-1]} values, not a whole number of "
                         f"{qtype} blocks ({block} values each)")
    return GGUFTensor(t.name, qtype, shape, t.data)
