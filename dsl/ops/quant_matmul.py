"""Fused quantized products: y = x @ dequantize(wq).T without dequantizing.

    y = dsl.ops.qmatvec(wq, x, "q4_k", (N, K))      # x: [K] -> y: [N]
    y = dsl.ops.qmatmul(x, wq, "q4_k", (N, K))      # x: [M, K] -> y: [M, N]

As ggml does it: x is quantized to q8_K (q8_0 for q8_0 weights; q8_K by the
product's own kernel before its thread team starts, q8_0 by a call of its
own), and the kernels of `stdlib/quant_dot.tk` take integer dot products
block by block (maddubs/madd, AVX2's vpmaddubsw/vpmaddwd); on AArch64 those of
`stdlib/quant_dot_arm.tk` (sdot, with the dot-product extension).
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from .arrays import as_view
from .quant_formats import FORMATS, QuantFormat, aligned, block_rows, check_shape, quant_format, quant_library
from .quant_q8 import quantize_blocks

ACTIVATIONS = {"q4_k": "q8_k", "q5_k": "q8_k", "q6_k": "q8_k", "q8_0": "q8_0"}
_U8, _F32 = np.dtype(np.uint8), np.dtype(np.float32)


@functools.cache  # ~1.5 us a call otherwise (the import), per product
def dot_module() -> str:
    """The stdlib module whose kernels suit this machine's instructions."""
    from dsl.backends.target import host_target

    return "quant_dot_arm" if host_target().arch in ("aarch64", "arm64") else "quant_dot"


def _weight_views(raw: np.ndarray, qtype: str) -> tuple[np.ndarray, ...]:
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


def quantize_activations(x: np.ndarray) -> np.ndarray:
    """x [M, K] (float32) as q8_0 blocks, [M, K / 32 * 34] uint8:
    dsl.ops.quantize's bytes, on the calling thread (a row of activations is
    a few blocks: not worth waking a thread team). The k-quants' products
    quantize theirs to q8_K in their own kernel."""
    rows = np.ascontiguousarray(x).reshape(-1, FORMATS["q8_0"].block)
    return quantize_blocks(rows, "q8_0", "activations").reshape(x.shape[0], -1)


class _Plan(NamedTuple):
    """A product's constants, from its qtype and shape alone: checked once."""

    fmt: QuantFormat
    act: QuantFormat
    n: int
    k: int
    blocks: int  # per row

    @property
    def weight_bytes(self) -> int:
        return self.n * self.blocks * self.fmt.nbytes


def _plan(op: str, qtype, shape) -> _Plan:
    fmt = quant_format(op, qtype)
    if fmt.name not in ACTIVATIONS:
        raise ValueError(f"{op}: no fused product for {fmt.name} weights (have: {', '.join(ACTIVATIONS)})")
    dims = check_shape(op, fmt, shape)
    if len(dims) != 2:
        raise ValueError(f"{op}: shape must be (N, K) of the weights, not {dims}")
    n, k = dims
    return _Plan(fmt, FORMATS[ACTIVATIONS[fmt.name]], n, k, k // fmt.block)


_known_plan = functools.lru_cache(maxsize=256)(_plan)


def _product(op: str, x, wq, qtype, shape, matrix: bool) -> np.ndarray:
    """y = x @ W.T. Each product is one pass over the weights, so the Python
    around it is kept short: with the weights just streamed through the
    caches, every step of it misses them (measured on 4096 x 4096 q4_K after
    an L3-resident matvec: ~45 us of checks, views and calls, against ~10 us
    in a hot loop)."""
    try:
        plan = _known_plan(op, qtype, shape)
    except TypeError:  # an unhashable shape (a list): checked the long way, with its own message
        plan = _plan(op, qtype, shape)
    rank = 2 if matrix else 1
    if not (type(wq) is np.ndarray and wq.dtype is _U8 and wq.flags.c_contiguous and wq.size == plan.weight_bytes):
        wq = block_rows(op, plan.fmt, wq, (plan.n, plan.k))
    if not (type(x) is np.ndarray and x.dtype is _F32 and x.ndim == rank and x.shape[-1] == plan.k):
        x = as_view(op, "x", x)
        if not isinstance(x, np.ndarray) or x.dtype != np.float32:
            raise TypeError(f"{op}: x must be a numpy float32 array")
        if x.ndim != rank or x.shape[-1] != plan.k:
            raise ValueError(f"{op}: x has shape {x.shape}, expected {'[M, K]' if matrix else '[K]'} "
                             f"with K = {plan.k}")
    xm = x.reshape(x.shape[0] if matrix else 1, plan.k)
    try:
        y = _run(plan, wq, xm)
    except ValueError:  # the kernel's entry checks refused wq's address (block_rows' copy was skipped)
        copy = aligned(wq)
        if copy is wq:
            raise
        y = _run(plan, copy, xm)
    return y if matrix else y[0]


def _run(plan: _Plan, wq: np.ndarray, xm: np.ndarray) -> np.ndarray:
    m, n, blocks = xm.shape[0], plan.n, plan.blocks
    y = np.empty((m, n), np.float32)
    if not (y.size and blocks):
        y[:] = 0.0
        return y
    kernel = getattr(quant_library(dot_module()), f"qdot_{plan.fmt.name}")
    weights = _weight_views(wq.reshape(n, blocks, plan.fmt.nbytes), plan.fmt.name)
    if plan.act.name == "q8_k":  # quantized by the kernel, into q8_K's fields (one array each)
        kernel(*weights, np.ascontiguousarray(xm).reshape(m, blocks, plan.act.block), np.empty((m, blocks, 292), np.int8),
               np.empty((m, blocks, 73), np.float32), np.empty((m, blocks, 146), np.int16), y)
    else:
        xq = quantize_activations(xm).reshape(m, blocks, plan.act.nbytes)
        kernel(*weights, xq.view(np.int8), xq.view(np.float16), y)
    return y
