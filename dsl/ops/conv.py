"""2-D convolutions on numpy arrays, with kernels written in the language
(`stdlib/conv.tk`): `conv2d` and `conv_transpose2d`, torch's semantics.

    import numpy as np, dsl
    x = np.ones((1, 8, 32, 32), np.float32); w = np.ones((16, 8, 3, 3), np.float32)
    y = dsl.ops.conv2d(x, w, padding=1)                       # (1, 16, 32, 32), as torch
    y = dsl.ops.conv2d(x.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), layout="NHWC")

layout="NCHW": input (N, C, H, W), weights (C_out, C_in/groups, KH, KW)
(conv_transpose2d: (C_in, C_out/groups, KH, KW)), output NCHW.
layout="NHWC": input (N, H, W, C), weights (KH, KW, C_in/groups, C_out)
(conv_transpose2d: (KH, KW, C_out/groups, C_in)), output NHWC.
A 3-D input is one image without the batch axis.

How: an NHWC input is read where it is; the border outputs are computed
with just the taps that miss the padding (`conv_border`). An NCHW input
goes to NHWC, and the output back, by `permute`'s blocked transposes (2-3x
numpy's strided copy on (8, 64, 56, 56)); an input of another dtype is
copied once into a padded NHWC buffer of the compute dtype. Each kernel reads a window VIEW of the
input, X[g, b, p, q, r, s, ci] = pixel (p*stride + r*dilation, q*stride +
s*dilation), made with strides, so no im2col matrix exists; the compiler
makes that index notation a BRGEMM over the taps. The transposed convolution
is split by output phase (o mod stride): each phase is a plain convolution of
the input with the taps that reach it, flipped, so the zero-dilated input is
never formed either.

The Python that chooses the kernels and builds their views runs once per
layout of the operands and set of arguments: the steps it takes (arrays
made, kernels called on views) are recorded and replayed (`_planned`).
"""

from __future__ import annotations

import math
from functools import partial

import numpy as np

from .arrays import SUFFIX, as_array, check_float_dtype, strided
from .conv_args import (check_channels, check_groups, check_hyper, check_not_empty, check_rank, check_same_dtype,
                        check_size, conv_padding, pair)
from .call_plans import Trace, remember
from .conv_border import convolve_padded
from .library import stdlib_module
from .permutation import permute

__all__ = ["conv2d", "conv_transpose2d"]

LAYOUTS = ("NCHW", "NHWC")
_library: list = []
_plans: dict = {}  # (op, arguments, operands' shapes, strides, dtypes) -> a conv's steps (call_plans.Trace)


def _kernels():
    if not _library:
        _library.append(stdlib_module("conv"))
    return _library[0]


def _planned(arguments: tuple, operands: tuple, body) -> np.ndarray:
    """`body(trace)`, the result of a convolution's steps, or those steps
    replayed when a call with these arguments and operand layouts made them
    before (its checks passed then: they read nothing else). Choosing the
    kernels and building their views cost the ResNet layer (8, 56, 56, 64)
    120 us a call; a replay costs 42."""
    key = (_typed(arguments), tuple(None if a is None else (a.shape, a.strides, a.dtype) for a in operands))
    try:
        plan = _plans.get(key)
    except TypeError:  # an argument of no hashable value
        key = plan = None
    if plan is not None:
        return plan.run(_kernels(), operands)
    trace = Trace(_kernels, operands, record=key is not None)
    y = body(trace)
    plan = trace.plan(y)
    if plan is not None:
        remember(_plans, key, plan)
    return y


def _typed(value):
    """`value` with the type of each part beside it: padding=1.0, which the
    checks refuse, must not find the plan of padding=1 (1.0 == 1)."""
    if type(value) in (tuple, list):
        return type(value), tuple(_typed(v) for v in value)
    return type(value), value


def conv2d(x, w, bias=None, *, stride=1, padding=0, dilation=1, groups=1, layout="NCHW") -> np.ndarray:
    """torch.nn.functional.conv2d (float32/float64; see the module's docstring for layouts).

    >>> dsl.ops.conv2d(np.ones((1, 2, 4, 4), np.float32), np.ones((3, 2, 3, 3), np.float32)).shape
    (1, 3, 2, 2)
    """
    op = "conv2d"
    x, w, bias, dtype, unbatched = _operands(op, x, w, bias, layout)
    y = _planned((op, stride, padding, dilation, groups, layout), (x, w, bias),
                 lambda trace: _conv2d(trace, op, x, w, bias, dtype, stride, padding, dilation, groups, layout))
    return _result(y, layout, unbatched)


def _conv2d(trace: Trace, op, x, w, bias, dtype, stride, padding, dilation, groups, layout) -> np.ndarray:
    groups = check_groups(op, groups)
    stride, dilation = pair(op, "stride", stride), pair(op, "dilation", dilation)
    user_w = w.shape
    kkio = w.transpose(2, 3, 1, 0) if layout == "NCHW" else w  # KH, KW, C_in/g, C_out
    kernel = kkio.shape[:2]
    check_hyper(op, stride, dilation, (0, 0))
    pads = conv_padding(op, padding, stride, dilation, kernel)
    c_out = kkio.shape[3]
    check_not_empty(op, x.shape, user_w, kernel, c_out)
    check_channels(op, groups, user_w, _torch_shape(x, layout), x.shape[3], kkio.shape[2] * groups, c_out,
                   0 if layout == "NCHW" else 3)
    _check_bias(op, bias, c_out)
    extent = [d * (k - 1) + 1 for d, k in zip(dilation, kernel)]
    padded = [x.shape[1 + i] + sum(pads[i]) for i in range(2)]
    check_size(op, tuple(padded), tuple(extent))
    out_hw = [(p - e) // s + 1 for p, e, s in zip(padded, extent, stride)]
    y = trace.make(partial(np.empty, (x.shape[0], *out_hw, c_out), dtype))
    if y.size and kkio.shape[2]:
        wg = trace.make(partial(_grouped_weights, nchw=layout == "NCHW", groups=groups), w)

        def convolve(xp, origin, part, taps, swapped, wrap):
            (r0, r1), (s0, s1) = taps
            if r0 == r1 or s0 == s1:  # every tap in the padding
                trace.call(_fill_bias, part, bias)
            elif swapped:  # H and W exchanged: so are the taps, stride and dilation
                _convolve(trace, xp, trace.make(_swapped_taps, wg[:, r0:r1, s0:s1]), bias, part, groups, origin,
                          stride[::-1], dilation[::-1], (s1 - s0, r1 - r0))
            else:
                _convolve(trace, xp, wg[:, r0:r1, s0:s1], bias, part, groups, origin, stride, dilation,
                          (r1 - r0, s1 - s0), wrap)

        convolve_padded(trace, x, pads, dtype, y, stride, dilation, kernel, convolve)
    elif y.size:
        trace.call(_fill_bias, y, bias)
    return y


def _grouped_weights(w: np.ndarray, nchw: bool, groups: int) -> np.ndarray:
    """Weights OIHW (nchw) or KH, KW, C_in/g, C_out as [g, KH, KW, C_in/g, C_out/g], C-contiguous."""
    if nchw:
        c_out, c_in_g, kh, kw = w.shape
        return np.ascontiguousarray(w.reshape(groups, c_out // groups, c_in_g, kh, kw).transpose(0, 3, 4, 2, 1))
    kh, kw, c_in_g, c_out = w.shape
    return np.ascontiguousarray(w.reshape(kh, kw, c_in_g, groups, c_out // groups).transpose(3, 0, 1, 2, 4))


def _swapped_taps(wg: np.ndarray) -> np.ndarray:
    """[g, KH, KW, ...] weights as [g, KW, KH, ...], C-contiguous."""
    return np.ascontiguousarray(wg.transpose(0, 2, 1, 3, 4))


def conv_transpose2d(x, w, bias=None, *, stride=1, padding=0, output_padding=0, dilation=1, groups=1,
                     layout="NCHW") -> np.ndarray:
    """torch.nn.functional.conv_transpose2d (the adjoint of conv2d in x).

    >>> dsl.ops.conv_transpose2d(np.ones((1, 2, 4, 4), np.float32), np.ones((2, 3, 3, 3), np.float32),
    ...                          stride=2).shape
    (1, 3, 9, 9)
    """
    op = "conv_transpose2d"
    x, w, bias, dtype, unbatched = _operands(op, x, w, bias, layout)
    arguments = (op, stride, padding, output_padding, dilation, groups, layout)
    y = _planned(arguments, (x, w, bias), lambda trace: _conv_transpose2d(trace, op, x, w, bias, dtype, *arguments[1:]))
    return _result(y, layout, unbatched)


def _conv_transpose2d(trace: Trace, op, x, w, bias, dtype, stride, padding, output_padding, dilation, groups,
                      layout) -> np.ndarray:
    groups = check_groups(op, groups)
    stride, dilation = pair(op, "stride", stride), pair(op, "dilation", dilation)
    pad, out_pad = pair(op, "padding", padding), pair(op, "output_padding", output_padding)
    check_hyper(op, stride, dilation, pad)
    user_w = w.shape
    kkoi = w.transpose(2, 3, 1, 0) if layout == "NCHW" else w  # KH, KW, C_out/g, C_in
    kernel, c_in, c_out = kkoi.shape[:2], kkoi.shape[3], kkoi.shape[2] * groups
    check_not_empty(op, x.shape, user_w, kernel, c_out)
    for i in range(2):
        if out_pad[i] < 0 or out_pad[i] >= max(stride[i], dilation[i]):
            raise ValueError(f"{op}: output padding must be smaller than either stride or dilation, but got "
                             f"output_padding_height: {out_pad[0]} output_padding_width: {out_pad[1]} "
                             f"stride_height: {stride[0]} stride_width: {stride[1]} dilation_height: "
                             f"{dilation[0]} dilation_width: {dilation[1]}")
    if c_in % groups:
        raise ValueError(f"{op}: Given groups={groups}, expected weight to be divisible by {groups} at dimension "
                         f"{0 if layout == 'NCHW' else 3}, but got weight of size {list(user_w)} instead")
    check_channels(op, groups, user_w, _torch_shape(x, layout), x.shape[3], c_in, c_in)
    _check_bias(op, bias, c_out)
    out_hw = [(n - 1) * s - 2 * p + d * (k - 1) + o + 1
              for n, s, p, d, k, o in zip(x.shape[1:3], stride, pad, dilation, kernel, out_pad)]
    if min(out_hw) <= 0:
        raise ValueError(f"{op}: Given input size per channel: ({x.shape[1]} x {x.shape[2]}). Calculated output "
                         f"size per channel: ({out_hw[0]} x {out_hw[1]}). Output size is too small")
    y = trace.make(partial(np.empty, (x.shape[0], *out_hw, c_out), dtype))
    if y.size:
        _transposed(trace, x, w, layout == "NCHW", bias, y, groups, stride, pad, dilation)
    return y


def _transposed(trace: Trace, x, w, nchw: bool, bias, y, groups, stride, pad, dilation) -> None:
    """y as one plain convolution per output phase (ph, pw): output rows
    ph, ph + s, ... gather input rows t + offset over the taps kh with
    (ph + pad - kh*d) divisible by s, at offsets spaced d/gcd(s, d) apart.
    `w`: the user's weights (nchw: [C_in, C_out/g, KH, KW], else [KH, KW, C_out/g, C_in])."""
    kernel = w.shape[2:] if nchw else w.shape[:2]
    phases = [[_phase_taps(ph, s, p, d, k, n_out) for ph in range(min(s, n_out))]
              for s, p, d, k, n_out in zip(stride, pad, dilation, kernel, y.shape[1:3])]
    lows, highs = [], []
    for axis in range(2):
        reach = [(t[0], t[0] + (len(t[1]) - 1) * t[2] + count - 1) for t, count in phases[axis] if t[1] and count]
        lows.append(max([0] + [-lo for lo, _ in reach]))
        highs.append(max([0] + [hi - (x.shape[1 + axis] - 1) for _, hi in reach]))
    xp = trace.make(partial(_padded, pads=tuple(zip(lows, highs)), dtype=y.dtype), x)
    c_in_g = (w.shape[0] if nchw else w.shape[3]) // groups
    for ph, ((first_h, taps_h, step_h), count_h) in enumerate(phases[0]):
        for pw, ((first_w, taps_w, step_w), count_w) in enumerate(phases[1]):
            part = y[:, ph::stride[0], pw::stride[1]]
            if not (taps_h and taps_w and c_in_g):
                trace.call(_fill_bias, part, bias)
                continue
            wg = trace.make(partial(_phase_weights, nchw=nchw, taps=(taps_h, taps_w), groups=groups), w)
            origin = (first_h + lows[0], first_w + lows[1])
            _convolve(trace, xp, wg, bias, part, groups, origin, (1, 1), (step_h, step_w), wg.shape[1:3])


def _phase_weights(w: np.ndarray, nchw: bool, taps: tuple, groups: int) -> np.ndarray:
    """The taps (rows, columns) of the user's transposed-convolution weights
    as [g, R, S, C_in/g, C_out/g], C-contiguous (the taps come flipped)."""
    kkoi = w.transpose(2, 3, 1, 0) if nchw else w
    wt = kkoi[np.ix_(*taps)]  # R, S, C_out/g, C_in
    return np.ascontiguousarray(wt.reshape(*wt.shape[:3], groups, wt.shape[3] // groups).transpose(3, 0, 1, 4, 2))


def _phase_taps(phase: int, s: int, p: int, d: int, k: int, n_out: int):
    """((first input offset, taps in the order of ascending offsets, offset step), output count)."""
    taps = [kh for kh in range(k - 1, -1, -1) if (phase + p - kh * d) % s == 0]
    first = (phase + p - taps[0] * d) // s if taps else 0
    count = (n_out - phase + s - 1) // s
    return (first, taps, d // math.gcd(s, d)), count


def _convolve(trace: Trace, xp, wg, bias, y, groups, origin, stride, dilation, kernel, wrap=False) -> None:
    """y[b, p, q, g*COg + co] (+)= the convolution of the padded NHWC xp, its
    pixel (origin + (p, q) * stride + (r, s) * dilation), with wg[g, r, s, ci, co].
    With `wrap` (xp's rows are y's apart, times the stride), each image's
    output is one row, from its first pixel to its last, the pixels of y
    between its rows included (see `conv_border`); not when depthwise, whose
    kernel runs output rows on the threads."""
    depthwise = groups == y.shape[3] and wg.shape[3] == 1  # one output per input channel
    if wrap and not depthwise:
        pixels = (y.shape[1] - 1) * y.strides[1] // y.strides[2] + y.shape[2]
        y = strided(y, (y.shape[0], 1, pixels, y.shape[3]), (y.strides[0], 0, *y.strides[2:]))
    n, out_h, out_w, c_out = y.shape
    c_in_g = wg.shape[3]
    sb, sh, sw, sc = xp.strides
    base = xp[:, origin[0]:, origin[1]:]
    window = strided(base, (n, out_h, groups, out_w, *kernel, c_in_g),
                        (sb, sh * stride[0], c_in_g * sc, sw * stride[1], sh * dilation[0], sw * dilation[1], sc),
                        writeable=False)
    t = SUFFIX[y.dtype]
    bias = bias if bias is not None else trace.make(partial(np.zeros, c_out, y.dtype))
    if depthwise:
        w_taps = trace.make(_depthwise_taps, wg)
        if kernel[1] == 3 and stride[1] == dilation[1] == 1:
            _depthwise3(trace, f"depthwise3_{t}", base, w_taps, bias, y, stride[0], dilation[0])
        else:
            window, y = _more_rows_first(window[..., 0].transpose(0, 1, 3, 4, 5, 2), y)
            trace.call(f"depthwise_{t}", window, w_taps, bias, y)
        return
    yg = strided(y, (n, out_h, groups, out_w, c_out // groups),
                    (y.strides[0], y.strides[1], y.strides[3] * (c_out // groups), y.strides[2], y.strides[3]))
    if n < out_h:  # the longer of the two loops outermost: it runs on all threads
        window, yg = window.swapaxes(0, 1), yg.swapaxes(0, 1)
    trace.call(f"conv_{t}", window, wg, bias.reshape(groups, c_out // groups), yg)


def _depthwise_taps(wg: np.ndarray) -> np.ndarray:
    """Depthwise weights [C, KH, KW, 1, 1] as [KH, KW, C], C-contiguous."""
    return np.ascontiguousarray(wg[:, :, :, 0, 0].transpose(1, 2, 0))


def _depthwise3(trace: Trace, kernel: str, base, w_taps, bias, y, stride: int, dilation: int) -> None:
    """The depthwise convolution three taps wide, with stride 1 along the
    rows (`kernel`: depthwise3_f32 or _f64), on the view X[b, p, r, s, q] =
    pixel (p * stride + r * dilation, q + s) of base."""
    n, out_h, out_w, c = y.shape
    sb, sh, sw, sc = base.strides
    rows = strided(base, (n, out_h, w_taps.shape[0], 3, out_w, c),
                      (sb, sh * stride, sh * dilation, sw, sw, sc), writeable=False)
    rows, y = _more_rows_first(rows, y)
    trace.call(kernel, rows, w_taps, bias, y)


def _more_rows_first(*views):
    """The views with their first two axes (images, output rows) exchanged
    when there are more images: a depthwise kernel runs its rows on the
    threads, and a border row of the output is one row per image."""
    return views if views[-1].shape[1] >= views[-1].shape[0] else tuple(v.swapaxes(0, 1) for v in views)


def _operands(op, x, w, bias, layout):
    x, w = as_array(op, "input", x), as_array(op, "weight", w)
    if bias is not None:
        bias = as_array(op, "bias", bias)
    if layout not in LAYOUTS:
        raise ValueError(f"{op}: layout must be one of {LAYOUTS}, got {layout!r}")
    dtype = check_float_dtype(op, x, w, *([bias] if bias is not None else []))
    check_same_dtype(op, x, w, bias)
    check_rank(op, x, w)
    unbatched = x.ndim == 3
    if unbatched:
        x = x[None]
    if layout == "NCHW":  # NHWC: a blocked copy (numpy's strided one took 3 ms of a 5.5 ms depthwise layer)
        x = permute(x, (0, 2, 3, 1)) if x.dtype == dtype else x.transpose(0, 2, 3, 1)  # (not native byte order)
    w = w.astype(dtype, copy=False)  # native byte order
    if bias is not None:
        bias = np.ascontiguousarray(bias, dtype)
    return x, w, bias, dtype, unbatched


def _torch_shape(x_nhwc: np.ndarray, layout: str) -> tuple:
    n, h, w, c = x_nhwc.shape
    return (n, c, h, w) if layout == "NCHW" else (n, h, w, c)


def _check_bias(op: str, bias, c_out: int) -> None:
    if bias is not None and bias.shape != (c_out,):
        raise ValueError(f"{op}: Given weight of size implying {c_out} output channels, expected bias to be "
                         f"1-dimensional with {c_out} elements, but got bias of size {list(bias.shape)} instead")


def _padded(x: np.ndarray, pads, dtype) -> np.ndarray:
    """x (NHWC) in a C-contiguous buffer of `dtype` with zero borders ((top, bottom), (left, right))."""
    (top, bottom), (left, right) = pads
    if not (top or bottom or left or right) and x.dtype == dtype and x.flags.c_contiguous:
        return x
    n, h, w, c = x.shape
    xp = np.zeros((n, h + top + bottom, w + left + right, c), dtype)
    xp[:, top:top + h, left:left + w] = x
    return xp


def _fill_bias(y: np.ndarray, bias) -> None:
    y[...] = 0 if bias is None else bias


def _result(y: np.ndarray, layout: str, unbatched: bool) -> np.ndarray:
    if layout == "NCHW":
        y = permute(y, (0, 3, 1, 2))
    return y[0] if unbatched else y
