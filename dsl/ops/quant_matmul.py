"""Fused quantized products: y = x @ dequantize(wq).T without dequantizing.

    y = dsl.ops.qmatvec(wq, x, "q4_k", (N, K))      # x: [K] -> y: [N]
    y = dsl.ops.qmatmul(x, wq, "q4_k", (N, K))      # x: [M, K] -> y: [M, N]

As ggml does it: x is quantized to q8_K (q8_0 for q8_0 weights), and the
kernels of `stdlib/quant_dot.tk` take integer dot products block by block
(maddubs/madd, AVX2's vpmaddubsw/vpmaddwd); on AArch64 those of
`stdlib/quant_dot_arm.tk` (sdot, with the dot-product extension).
"""

from __future__ import annotations

import functools

import numpy as np

from .arrays import as_view
from .quant_formats import FORMATS, block_rows, check_shape, quant_format, quant_library

ACTIVATIONS = {"q4_k": "q8_k", "q5_k": "q8_k", "q6_k": "q8_k", "q8_0": "q8_0"}


@functools.cache  # ~1.5 us a call otherwise (the import), per product
def dot_module() -> str:
    """The stdlib module whose kernels suit this machine's instructions."""
    from dsl.backends.target import host_target

    return "quant_dot_arm" if host_target().arch in ("aarch64", "arm64") else "quant_dot"


def _activation_views(xq: np.ndarray, fmt_name: str, m: int, blocks: int) -> tuple[np.ndarray, ...]:
    raw = xq.reshape(m, blocks, FORMATS[fmt_name].nbytes)
    if fmt_name == "q8_k":
        return raw.view(np.int8), raw.view(np.float32), raw.view(np.int16)
    return raw.view(np.int8), raw.view(np.float16)


def _weight_views(wq: np.ndarray, qtype: str, n: int, blocks: int) -> tuple[np.ndarray, ...]:
    raw = wq.reshape(n, blocks, FORMATS[qtype].nbytes)
    if qtype == "q6_k":
        return raw, raw.view(np.int8), raw.view(np.float16)
    if qtype == "q8_0":
        return raw.view(np.int8), raw.view(np.float16)
    return raw, raw.view(np.float16)


def qmatmul(x: np.ndarray, wq: np.ndarray, qtype: str, shape) -> np.ndarray:
    """x [M, K] (float32) times the quantized weights wq ([N, K] in `qtype`
    blocks, GGUF's row layout) transposed: y [M, N] = x @ W.T, float32.

        >>> wq = dsl.ops.quantize(w, "q4_k")                 # w: [N, K] float32
        >>> y = dsl.ops.qmatmul(x, wq, "q4_k", w.shape)      # ~ x @ w.T
    """
    return _product("qmatmul", x, wq, qtype, shape, matrix=True)


def qmatvec(wq: np.ndarray, x: np.ndarray, qtype: str, shape) -> np.ndarray:
    """The quantized weights wq ([N, K] in `qtype` blocks) times the float32
    vector x [K]: y [N] = W @ x.

        >>> y = dsl.ops.qmatvec(dsl.ops.quantize(w, "q6_k"), x, "q6_k", w.shape)
    """
    return _product("qmatvec", x, wq, qtype, shape, matrix=False)


def quantize_activations(x: np.ndarray, act: str) -> np.ndarray:
    """x [M, K] (float32) as `act` (q8_K or q8_0) blocks, [M, K / block * bytes]
    uint8: dsl.ops.quantize's bytes, on the calling thread (a row of
    activations is a few blocks: not worth waking a thread team)."""
    from .quant import quantize_blocks

    rows = np.ascontiguousarray(x).reshape(-1, FORMATS[act].block)
    return quantize_blocks(rows, act, "activations").reshape(x.shape[0], -1)


def _product(op: str, x, wq, qtype, shape, matrix: bool) -> np.ndarray:
    fmt = quant_format(op, qtype)
    if fmt.name not in ACTIVATIONS:
        raise ValueError(f"{op}: no fused product for {fmt.name} weights (have: {', '.join(ACTIVATIONS)})")
    dims = check_shape(op, fmt, shape)
    if len(dims) != 2:
        raise ValueError(f"{op}: shape must be (N, K) of the weights, not {dims}")
    n, k = dims
    rows = block_rows(op, fmt, wq, dims)
    x = as_view(op, "x", x)
    if not isinstance(x, np.ndarray) or x.dtype != np.float32:
        raise TypeError(f"{op}: x must be a numpy float32 array")
    if x.ndim != (2 if matrix else 1) or x.shape[-1] != k:
        want = "[M, K]" if matrix else "[K]"
        raise ValueError(f"{op}: x has shape {x.shape}, expected {want} with K = {k}")
    xm = x.reshape(-1, k)
    act = ACTIVATIONS[fmt.name]
    blocks = k // fmt.block
    y = np.empty((xm.shape[0], n), np.float32)
    if y.size and blocks:
        xq = quantize_activations(xm, act)
        kernel = getattr(quant_library(dot_module()), f"qdot_{fmt.name}")
        kernel(*_weight_views(rows, fmt.name, n, blocks), *_activation_views(xq, act, xm.shape[0], blocks), y)
    elif y.size:
        y[:] = 0.0
    return y if matrix else y[0]
