"""q8_0 and q8_K blocks, by the kernels of `stdlib/quant_q8.tk`: the whole
quantizer of those two formats, and the activations of the fused products."""

from __future__ import annotations

import numpy as np

from .quant_formats import FORMATS, quant_library
from .quant_lanes import LANES, whole_groups


def quantize_blocks(rows: np.ndarray, qtype: str, kernel: str, out: np.ndarray | None = None) -> np.ndarray:
    """q8_0 or q8_K blocks of `rows` (float32 [count, block], C-contiguous) by
    `stdlib/quant_q8.tk`'s `<kernel>_<qtype>` ('quantize': all cores;
    'activations', q8_0 only: one), into `out` (uint8 [count, bytes]) if given."""
    count, nbytes = rows.shape[0], FORMATS[qtype].nbytes
    run = getattr(quant_library("quant_q8"), f"{kernel}_{qtype}")
    out = np.empty((count, nbytes), np.uint8) if out is None else out
    if qtype == "q8_k":
        if count:  # [rows, blocks of a row, ...]: one block a row here
            run(rows[:, None], out.view(np.int8)[:, None], out.view(np.float32)[:, None], out.view(np.int16)[:, None])
        return out

    def q8_0(blocks: np.ndarray, into: np.ndarray) -> None:
        groups = blocks.shape[0] // LANES
        run(blocks.reshape(groups, LANES, -1), into.view(np.int8).reshape(groups, LANES, -1),
            into.view(np.float16).reshape(groups, LANES, -1))

    whole_groups(rows, out, q8_0)
    return out
