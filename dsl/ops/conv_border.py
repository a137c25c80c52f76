"""Padding without a padded copy of the whole input.

A padded convolution reads zeros only near the border. The output pixels
whose windows lie inside the input (the interior) are computed straight from
the input; only the border bands, the output rows above and below the
interior and the columns left and right of it, get small zero-padded copies
of the input they read. A depthwise 3x3 layer on (8, 56, 56, 64) spent half
of its time copying the whole input into a padded buffer.
"""

from __future__ import annotations

import numpy as np


def convolve_padded(x: np.ndarray, pads, dtype, y: np.ndarray, stride, dilation, kernel, convolve) -> None:
    """y = the convolution of NHWC `x` zero-padded by pads ((top, bottom), (left, right)).

    `convolve(xp, origin, part, swapped)` computes output view `part` from
    the NHWC buffer `xp`, its first output pixel's window starting at pixel
    `origin`; with `swapped`, xp and part come with H and W exchanged (so do
    origin, and the caller swaps the weights' taps, stride and dilation).
    The left and right bands are computed that way: their output rows are
    one or two pixels long, a column of the band is long, and the
    convolution's inner product runs along an output row.
    """
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    inner = [_interior(x.shape[1 + i], pads[i][0], extent[i], stride[i], y.shape[1 + i]) for i in range(2)]
    direct = x.dtype == dtype and x.strides[-1] == x.itemsize
    if not direct or any(lo >= hi for lo, hi in inner):
        convolve(_padded_region(x, pads, dtype, y.shape[1:3], stride, extent, (0, 0)), (0, 0), y, False)
        return
    (p_lo, p_hi), (q_lo, q_hi) = inner
    origin = (p_lo * stride[0] - pads[0][0], q_lo * stride[1] - pads[1][0])
    convolve(x, origin, y[:, p_lo:p_hi, q_lo:q_hi], False)
    bands = [((0, p_lo), (0, y.shape[2])), ((p_hi, y.shape[1]), (0, y.shape[2])),
             ((p_lo, p_hi), (0, q_lo)), ((p_lo, p_hi), (q_hi, y.shape[2]))]
    for index, (rows, cols) in enumerate(bands):
        if rows[0] < rows[1] and cols[0] < cols[1]:
            count = (rows[1] - rows[0], cols[1] - cols[0])
            xp = _padded_region(x, pads, dtype, count, stride, extent, (rows[0], cols[0]))
            part = y[:, rows[0]:rows[1], cols[0]:cols[1]]
            if index < 2:
                convolve(xp, (0, 0), part, False)
            else:
                convolve(xp.swapaxes(1, 2), (0, 0), part.swapaxes(1, 2), True)


def _interior(size: int, pad: int, extent: int, stride: int, outputs: int) -> tuple[int, int]:
    """[lo, hi): the outputs along one axis whose windows lie inside the input."""
    lo = -(-pad // stride)
    hi = min(outputs, (size + pad - extent) // stride + 1)
    return lo, max(lo, hi)


def _padded_region(x: np.ndarray, pads, dtype, count, stride, extent, first) -> np.ndarray:
    """The zero-padded input that outputs first .. first + count - 1 read (per
    axis), as a C-contiguous NHWC buffer of `dtype` whose pixel (0, 0) is the
    first output's window corner."""
    n, h, w, c = x.shape
    start = [first[i] * stride[i] - pads[i][0] for i in range(2)]
    size = [(count[i] - 1) * stride[i] + extent[i] for i in range(2)]
    if start == [0, 0] and size == [h, w] and x.dtype == dtype and x.flags.c_contiguous:
        return x
    xp = np.zeros((n, size[0], size[1], c), dtype)
    src = [(max(0, start[i]), min((h, w)[i], start[i] + size[i])) for i in range(2)]
    if src[0][0] < src[0][1] and src[1][0] < src[1][1]:
        xp[:, src[0][0] - start[0]:src[0][1] - start[0], src[1][0] - start[1]:src[1][1] - start[1]] = \
            x[:, src[0][0]:src[0][1], src[1][0]:src[1][1]]
    return xp
