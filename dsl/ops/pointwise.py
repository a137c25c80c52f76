"""Elementwise ops and activations on float32 arrays, numpy-style.

    import numpy as np, dsl
    x = np.linspace(-3, 3, 7, dtype=np.float32)
    y = dsl.ops.add(x, 1.0)                   # broadcasting, scalars
    dsl.ops.silu(x, out=y)                    # into preallocated memory

Kernels: `stdlib/pointwise.tk` (math helpers in `stdlib/mathfn.tk`, written
in the language). Operands broadcast as in numpy (through stride-0 views,
never copies); axes that every operand steps through together are merged,
so a contiguous array of any shape is one rank-1 loop. Inputs must be
float32 (Python numbers are fine); `out` may be an input (in place).
Reductions, softmax and the norms live in `reduce.py` and `norm.py` and are
re-exported here.
"""

from __future__ import annotations

import builtins
import functools

import numpy as np

from . import _layout as L
from .call_plans import NOTHING, record, remember
from .fusion import fused
from .library import stdlib_kernel, stdlib_module
from .norm import layer_norm, log_softmax, rms_norm, softmax
from .reduce import argmax, max, mean, min, sum

_BINARY = ("add", "sub", "mul", "div", "maximum", "minimum")
_UNARY = ("relu", "sigmoid", "tanh", "silu", "exp", "log", "erf", "sqrt", "abs", "neg", "square", "copy")

__all__ = [*_BINARY, *_UNARY, "gelu", "sum", "mean", "max", "min", "argmax", "softmax", "log_softmax",
           "layer_norm", "rms_norm", "fused"]


_plans: dict = {}  # (op, shapes of x and y, out is x, out is y) -> (result shape, recorded calls): _broadcast


def _lib():
    return stdlib_module("pointwise")


_kernel = functools.partial(stdlib_kernel, "pointwise")


def _run(op: str, kernel: str, inputs: list[np.ndarray], out: np.ndarray, scalar=None) -> np.ndarray:
    if out.size == 0:
        return out
    flat = L.flat_views(inputs, out)
    if flat is not None:  # the common case, without the ~15 us of the general path
        fn = _kernel(f"{kernel}_1" if scalar is None else f"{kernel}_s1")
        fn(*flat) if scalar is None else fn(flat[0], scalar, flat[1])
        return out
    if inputs[0] is not inputs[-1]:
        inputs = [_unit_steps(kernel, x, out) for x in inputs]
    else:  # x op x: one copy, if any (a second 4 MiB scratch costs ~2 ms of fresh pages)
        inputs = [_unit_steps(kernel, inputs[0], out)] * len(inputs)
    _general(_lib(), kernel, inputs, out, scalar)
    return out


# Kernels cheap enough per element that reading an input along a step other
# than 1 costs less than copying it first (add of x[::2, ::2] of 2048^2: 0.77
# ms in place, numpy 0.68).
_CHEAP = frozenset({"add", "sub", "mul", "div", "maximum", "minimum", "rsub", "rdiv", "copy", "neg", "abs",
                    "relu", "square"})


def _unit_steps(kernel: str, x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """x, or a copy of it laid out as `out` when the kernel would read it
    along `out`'s contiguous axis by another step: backwards (the reversed
    read is a gather: add of a reversed 1024^2 took 3.2 ms, numpy 0.35), or
    by a step of several elements for a kernel with math to do per element
    (silu of x[::2, ::2]: 3.1 ms, numpy's exp 1.05)."""
    if x.shape != out.shape or x.size < 2:
        return x
    # (builtins: this module's own min and abs are the ops)
    inner = builtins.min((k for k in range(out.ndim) if out.shape[k] > 1), key=lambda k: builtins.abs(out.strides[k]))
    step = x.strides[inner] // x.itemsize
    if out.strides[inner] != out.itemsize or step == 1 or (step > 1 and kernel in _CHEAP):
        return x
    copy = np.empty_like(out)
    np.copyto(copy, x)
    return copy


def _general(lib, kernel: str, inputs: list[np.ndarray], out: np.ndarray, scalar=None) -> None:
    """Any layout: inputs broadcast to `out`, axes merged, rank-1 or rank-3
    calls of `lib`'s kernels (or of a recorder's: see `_broadcast`)."""
    inputs = L.broadcast_inputs(inputs, out)
    rank, calls = L.rank_views(out.shape, [*inputs, out])
    fn = getattr(lib, f"{kernel}_{rank}" if scalar is None else f"{kernel}_s{rank}")
    for views in calls:
        if scalar is None:
            fn(*views)
        else:
            fn(views[0], scalar, views[1])


def _broadcast(op: str, a, b, out) -> np.ndarray | None:
    """a op b for C-contiguous float32 arrays of different shapes (a bias
    added to every row): the kernel calls of the first call with these
    shapes, recorded and replayed on the new operands (call_plans.py), where
    broadcasting and merging axes again took ~20 us. None when the operands
    or `out` are anything else, or overlap."""
    if not (type(a) is np.ndarray and type(b) is np.ndarray and a.dtype is L.F32 and b.dtype is L.F32
            and a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    if out is not None:
        if not (type(out) is np.ndarray and out.dtype is L.F32 and out.flags.c_contiguous and out.flags.writeable):
            return None
        if any(x is not out and np.may_share_memory(x, out) for x in (a, b)):
            return None
    # `out` being an input is part of the layout: its views were recorded as that input's.
    key = (op, a.shape, b.shape, out is a, out is b)
    found = _plans.get(key)
    if found is None:
        shape = L.broadcast_shape(op, {"x": a, "y": b})
        target = L.output(op, out, shape)
        calls = record(lambda lib: _general(lib, op, [a, b], target), (a, b, target)) if target.size else NOTHING
        found = (shape, calls)
        remember(_plans, key, found)
    shape, plan = found
    if out is None:
        out = np.empty(shape, L.F32)
    elif out.shape != shape:
        return None
    plan.run(_lib(), (a, b, out))
    return out


def _same_layout(inputs: tuple, out) -> np.ndarray | None:
    """The output of the common call, without the general path's checks
    (~3-6 us a call, against ~0.2 for the kernel's own): inputs that are
    C-contiguous float32 arrays of one non-empty shape, `out` absent (a new
    array) or one more such array, writable, each input either `out` itself or
    apart from it. None for anything else."""
    x = inputs[0]
    if type(x) is not np.ndarray:
        return None
    shape = x.shape
    for a in inputs:
        if type(a) is not np.ndarray or a.dtype is not L.F32 or a.shape != shape or not a.flags.c_contiguous:
            return None
    if not x.size:
        return None
    if out is None:
        return np.empty(shape, L.F32)
    if type(out) is not np.ndarray or out.dtype is not L.F32 or out.shape != shape:
        return None
    flags = out.flags
    if not (flags.c_contiguous and flags.writeable):
        return None
    for a in inputs:
        if a is not out and np.may_share_memory(a, out):
            return None
    return out


def _binary(op: str, x, y, out) -> np.ndarray:
    if type(y) is float and (result := _same_layout((x,), out)) is not None:
        _kernel(f"{op}_s1")(x.ravel(), y, result.ravel())
        return result
    if (result := _same_layout((x, y), out)) is not None:
        _kernel(f"{op}_1")(x.ravel(), y.ravel(), result.ravel())
        return result
    if (result := _broadcast(op, x, y, out)) is not None:
        return result
    if L.is_scalar(y) and not L.is_scalar(x):
        a = L.as_f32_array(op, "x", x)
        return _run(op, op, [a], L.output(op, out, a.shape, (a,)), float(y))
    if L.is_scalar(x) and not L.is_scalar(y):
        b = L.as_f32_array(op, "y", y)
        kernel = {"sub": "rsub", "div": "rdiv"}.get(op, op)
        return _run(op, kernel, [b], L.output(op, out, b.shape, (b,)), float(x))
    a, b = L.as_f32_array(op, "x", x), L.as_f32_array(op, "y", y)
    shape = L.broadcast_shape(op, {"x": a, "y": b})
    return _run(op, op, [a, b], L.output(op, out, shape, (a, b)))


def _unary(op: str, kernel: str, x, out) -> np.ndarray:
    if (result := _same_layout((x,), out)) is not None:
        _kernel(f"{kernel}_1")(x.ravel(), result.ravel())
        return result
    a = L.as_f32_array(op, "x", x)
    return _run(op, kernel, [a], L.output(op, out, a.shape, (a,)))


def add(x, y, out=None):
    """x + y, broadcasting: `dsl.ops.add(a, b[None, :])`, `dsl.ops.add(a, 1.0, out=a)`."""
    return _binary("add", x, y, out)


def sub(x, y, out=None):
    """x - y, broadcasting; either side may be a Python number."""
    return _binary("sub", x, y, out)


def mul(x, y, out=None):
    """x * y, broadcasting: `dsl.ops.mul(a, 0.5)`."""
    return _binary("mul", x, y, out)


def div(x, y, out=None):
    """x / y (IEEE: x / 0 is ±inf or nan), broadcasting."""
    return _binary("div", x, y, out)


def maximum(x, y, out=None):
    """Elementwise maximum, NaN propagating like `np.maximum`."""
    return _binary("maximum", x, y, out)


def minimum(x, y, out=None):
    """Elementwise minimum, NaN propagating like `np.minimum`."""
    return _binary("minimum", x, y, out)


def relu(x, out=None):
    """max(x, 0); NaN stays NaN: `dsl.ops.relu(np.float32([-1, 2]))` -> [0, 2]."""
    return _unary("relu", "relu", x, out)


def sigmoid(x, out=None):
    """1 / (1 + e**-x)."""
    return _unary("sigmoid", "sigmoid", x, out)


def tanh(x, out=None):
    """tanh x, at most 4 ulp from the exact value (docs/stdlib.md)."""
    return _unary("tanh", "tanh", x, out)


def silu(x, out=None):
    """x * sigmoid(x) (torch.nn.functional.silu)."""
    return _unary("silu", "silu", x, out)


def gelu(x, approximate: str = "none", out=None):
    """x Phi(x) (`approximate="none"`, through erfc) or the tanh form
    (`approximate="tanh"`), as torch.nn.functional.gelu."""
    if approximate not in ("none", "tanh"):
        raise ValueError(f"dsl.ops.gelu: 'approximate' must be 'none' or 'tanh', not {approximate!r}")
    return _unary("gelu", "gelu" if approximate == "none" else "gelu_tanh", x, out)


def exp(x, out=None):
    """e**x, at most 2 ulp from the exact value; overflows to inf above 88.72."""
    return _unary("exp", "exp", x, out)


def log(x, out=None):
    """ln x (nan below 0, -inf at 0), at most 2 ulp from the exact value."""
    return _unary("log", "log", x, out)


def erf(x, out=None):
    """The error function, at most 4 ulp from the exact value."""
    return _unary("erf", "erf", x, out)


def sqrt(x, out=None):
    """Square root (nan below 0)."""
    return _unary("sqrt", "sqrt", x, out)


def abs(x, out=None):
    """|x|."""
    return _unary("abs", "abs", x, out)


def neg(x, out=None):
    """-x."""
    return _unary("neg", "neg", x, out)


def square(x, out=None):
    """x * x."""
    return _unary("square", "square", x, out)


def copy(x, out=None):
    """Copy `x` into `out` (broadcast, any strides): `dsl.ops.copy(a.T, out=b)`."""
    a = L.as_f32_array("copy", "x", x)
    shape = a.shape if out is None else np.shape(out)
    if L.broadcast_shape("copy", {"x": a, "out": np.broadcast_to(np.float32(0), shape)}) != tuple(shape):
        raise ValueError(f"dsl.ops.copy: 'x' of shape {a.shape} does not broadcast to 'out' {tuple(shape)}")
    return _run("copy", "copy", [a], L.output("copy", out, shape, (a,)))
