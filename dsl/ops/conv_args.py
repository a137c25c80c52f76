"""Argument checks for `dsl.ops.conv2d` and `conv_transpose2d`, in torch's words.

Every check runs before any native code and raises a `ValueError` (or a
`TypeError` for a wrong type) whose message follows
`torch.nn.functional.conv2d`'s, prefixed with the op's name:

    >>> pair("conv2d", "stride", 2)
    (2, 2)
"""

from __future__ import annotations

import numbers

import numpy as np


def pair(op: str, name: str, value) -> tuple[int, int]:
    """An int or a pair of ints as a pair (torch's `_pair`)."""
    if type(value) is int:  # the usual case, without the abstract-class checks (~1 us each)
        return value, value
    items = (value, value) if isinstance(value, (numbers.Integral, np.integer)) else value
    try:
        items = tuple(items)
    except TypeError:
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {type(value).__name__}") from None
    if len(items) != 2 or any(isinstance(v, bool) or not isinstance(v, (numbers.Integral, np.integer))
                              for v in items):
        raise TypeError(f"{op}: {name} must be an int or a pair of ints, got {value!r}")
    return int(items[0]), int(items[1])


def check_rank(op: str, x: np.ndarray, w: np.ndarray) -> None:
    if x.ndim not in (3, 4):
        raise ValueError(f"{op}: Expected 3D (unbatched) or 4D (batched) input to {op}, but got input of size: "
                         f"{list(x.shape)}")
    if w.ndim != 4:
        raise ValueError(f"{op}: weight should have 4 dimensions, but got weight of size {list(w.shape)}")


def check_hyper(op: str, stride, dilation, padding) -> None:
    """torch's checks of stride, dilation and padding (pairs)."""
    if min(stride) <= 0:
        raise ValueError(f"{op}: non-positive stride is not supported")
    if min(dilation) <= 0:
        raise ValueError(f"{op}: dilation should be greater than zero")
    if min(padding) < 0:
        raise ValueError(f"{op}: negative padding is not supported")


def check_groups(op: str, groups) -> int:
    if isinstance(groups, bool) or not isinstance(groups, (numbers.Integral, np.integer)):
        raise TypeError(f"{op}: groups must be an int, got {type(groups).__name__}")
    if groups <= 0:
        raise ValueError(f"{op}: non-positive groups is not supported")
    return int(groups)


def conv_padding(op: str, padding, stride, dilation, kernel) -> tuple[tuple[int, int], tuple[int, int]]:
    """(top, bottom) and (left, right) zero padding; "same" pads as torch does,
    the odd element at the end."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding != "same":
            raise ValueError(f"{op}: Invalid padding string '{padding}', should be one of {{'valid', 'same'}}")
        if max(stride) != 1:
            raise ValueError(f"{op}: padding='same' is not supported for strided convolutions")
        totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
        return tuple((t // 2, t - t // 2) for t in totals)
    ph, pw = pair(op, "padding", padding)
    check_hyper(op, stride, dilation, (ph, pw))
    return (ph, ph), (pw, pw)


def check_channels(op: str, groups: int, w_shape: tuple, x_shape: tuple, x_channels: int, expected: int,
                   out_axis_size: int, out_axis: int = 0) -> None:
    """torch's messages for weights and inputs whose channels do not fit
    `groups`; `w_shape` and `x_shape` as the user passed them, `out_axis`
    the weight's axis of output channels in that layout."""
    if out_axis_size % groups and op == "conv2d":
        raise ValueError(f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at "
                         f"dimension {out_axis}, but got weight of size {list(w_shape)} instead")
    if x_channels != expected:
        raise ValueError(f"{op}: Given groups={groups}, weight of size {list(w_shape)}, expected input"
                         f"{list(x_shape)} to have {expected} channels, but got {x_channels} channels instead")


def check_size(op: str, padded: tuple, kernel: tuple) -> None:
    """The (dilated) kernel must fit in the padded input."""
    if any(p < k for p, k in zip(padded, kernel)):
        raise ValueError(f"{op}: Calculated padded input size per channel: ({padded[0]} x {padded[1]}). "
                         f"Kernel size: ({kernel[0]} x {kernel[1]}). Kernel size can't be greater than actual "
                         "input size")


def check_not_empty(op: str, x_shape: tuple, w_shape: tuple, kernel: tuple, c_out: int) -> None:
    """torch refuses a kernel or an output channel count of 0, and an input
    empty in H or W unless its batch or channels are (x_shape: NHWC)."""
    if min(kernel) <= 0 or c_out <= 0:
        raise ValueError(f"{op}: weight of size {list(w_shape)} has no kernel taps or no output channels: "
                         "expected every dimension to be at least 1")
    n, h, w, c = x_shape
    if (h == 0 or w == 0) and n and c:
        raise ValueError(f"{op}: Only zero batch or zero channel inputs are supported, but got input height "
                         f"{h} and width {w}")


def check_same_dtype(op: str, x: np.ndarray, w: np.ndarray, bias) -> None:
    """torch computes in one dtype and refuses a mix (no silent promotion)."""
    for name, other in (("weight", w), ("bias", bias)):
        if other is not None and other.dtype.char != x.dtype.char:  # byte order aside
            raise TypeError(f"{op}: Input type ({x.dtype}) and {name} type ({other.dtype}) should be the same")
