"""Padding without a padded copy of the input.

A padded convolution reads zeros only near the border, and a zero tap adds
nothing. Along each axis the outputs fall into groups that read the same
taps inside the input: the interior (every tap) and each border output
(the taps that miss the padding). Each pair of a row group and a column
group is one convolution of the input where it is, with just those taps:
a 3x3 layer with padding 1 computes its border rows with 2 x 3 taps and
its corners with 2 x 2. (Copying the whole input into a padded buffer cost
a depthwise 3x3 layer on (8, 56, 56, 64) half of its time; padded copies
of the border bands still cost a ResNet layer (8, 56, 56, 64) 64->64 8% of
its time, the zero taps included.) A small input is copied all the same:
its nine cells are nine calls, each with its views built in Python, and one
padded copy and one call cost less (3x3, padding 1, NHWC, 1 thread: dense
(1, 14, 14, 16) 137 -> 38 us, torch 34; (1, 28, 28, 32) 262 -> 161 us;
depthwise (1, 56, 56, 64) 195 -> 108 us; up to an input of 3 MiB no slower,
at 6 MiB 5% slower on 2 threads: the copy moves the input twice).

When the input's rows are as far apart as the output's (in pixels, times
the stride), the interior is one long row: the pixels from its first to its
last, wrapping from the end of one row to the start of the next. The
wrapped pixels' windows straddle two rows, so they are wrong, but they are
border columns, computed afterwards. An interior row was 54 of the ResNet
layer's 56 pixels: the micro-kernel's 14-row strips did not divide it, and
each row was its own product.
"""

from __future__ import annotations

from functools import partial

import numpy as np

SMALL_INPUT_BYTES = 1 << 20  # inputs up to this size are copied padded: one call instead of nine


def convolve_padded(trace, x: np.ndarray, pads, dtype, y: np.ndarray, stride, dilation, kernel, convolve) -> None:
    """y = the convolution of NHWC `x` zero-padded by pads ((top, bottom), (left, right)).

    `convolve(xp, origin, part, taps, swapped, wrap)` computes output view
    `part` from the NHWC buffer `xp` with the taps ((r0, r1), (s0, s1))
    (half-open ranges; an empty one means no sum, the bias alone), the
    first output pixel's first tap at pixel `origin` of xp (a padded copy of
    x is made by `trace`, a `call_plans.Trace`). With `swapped`,
    xp, part and origin come with H and W exchanged (the caller exchanges
    the taps' axes, stride and dilation). With `wrap`, it may also write the
    pixels between part's rows in y; they are written again later.
    """
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    direct = x.dtype == dtype and x.strides[-1] == x.itemsize
    axes = None
    if direct and x.size * np.dtype(dtype).itemsize > SMALL_INPUT_BYTES:
        axes = [_tap_groups(x.shape[1 + i], pads[i][0], stride[i], dilation[i], kernel[i], y.shape[1 + i])
                for i in range(2)]
        interiors = [next((g for g in groups if g[2:] == (0, k)), None) for groups, k in zip(axes, kernel)]
    if axes is None or None in interiors:
        taps = ((0, kernel[0]), (0, kernel[1]))
        xp = trace.make(partial(_padded, pads=pads, dtype=dtype, count=y.shape[1:3], stride=stride, extent=extent), x)
        convolve(xp, (0, 0), y, taps, False, False)
        return
    interior = tuple(interiors)
    cells = [(rows, cols) for rows in axes[0] for cols in axes[1]]
    cells.sort(key=lambda cell: cell != interior)  # the interior first: the others overwrite its wrap
    wrap = x.strides[1] * stride[0] == x.strides[2] * stride[1] * y.shape[2] and y.flags.c_contiguous
    for cell in cells:
        (p0, p1, r0, r1), (q0, q1, s0, s1) = cell
        origin = (p0 * stride[0] - pads[0][0] + r0 * dilation[0], q0 * stride[1] - pads[1][0] + s0 * dilation[1])
        part, taps = y[:, p0:p1, q0:q1], ((r0, r1), (s0, s1))
        if cell == interior:
            convolve(x, origin, part, taps, False, wrap)
        elif p1 - p0 > q1 - q0:  # a column of the border: its long axis is the product's rows
            convolve(x.swapaxes(1, 2), origin[::-1], part.swapaxes(1, 2), taps, True, False)
        else:
            convolve(x, origin, part, taps, False, False)


def _tap_groups(size: int, pad: int, stride: int, dilation: int, kernel: int, outputs: int) -> list[tuple]:
    """(o0, o1, t0, t1): outputs o0 .. o1 - 1 along one axis read the input
    with taps t0 .. t1 - 1 (the others fall in the padding); consecutive
    outputs with the same taps form one group."""
    extent = dilation * (kernel - 1) + 1
    lo, hi = _interior(size, pad, extent, stride, outputs)
    groups: list[tuple] = []

    def add(o0: int, o1: int, t0: int, t1: int) -> None:
        if groups and groups[-1][1] == o0 and groups[-1][2:] == (t0, t1):
            groups[-1] = (groups[-1][0], o1, t0, t1)
        else:
            groups.append((o0, o1, t0, t1))

    for o in [*range(min(lo, outputs)), None, *range(max(lo, hi), outputs)]:
        if o is None:
            if lo < hi:
                add(lo, hi, 0, kernel)
            continue
        first = o * stride - pad  # the input index of tap 0
        t0 = min(kernel, max(0, -(first // dilation)))
        t1 = max(t0, min(kernel, (size - 1 - first) // dilation + 1))
        add(o, o + 1, t0, t1)
    return groups


def _interior(size: int, pad: int, extent: int, stride: int, outputs: int) -> tuple[int, int]:
    """[lo, hi): the outputs along one axis whose windows lie inside the input."""
    lo = -(-pad // stride)
    hi = min(outputs, (size + pad - extent) // stride + 1)
    return lo, max(lo, hi)


def _padded(x: np.ndarray, pads, dtype, count, stride, extent) -> np.ndarray:
    """The zero-padded input that the outputs read (`count` of them per axis),
    as a C-contiguous NHWC buffer of `dtype`."""
    n, h, w, c = x.shape
    size = [(count[i] - 1) * stride[i] + extent[i] for i in range(2)]
    if [pads[0][0], pads[1][0]] == [0, 0] and size == [h, w] and x.dtype == dtype and x.flags.c_contiguous:
        return x
    xp = np.zeros((n, size[0], size[1], c), dtype)
    top, left = pads[0][0], pads[1][0]
    rows, cols = min(h, size[0] - top), min(w, size[1] - left)
    if rows > 0 and cols > 0:
        xp[:, top:top + rows, left:left + cols] = x[:, :rows, :cols]
    return xp
