"""Inputs for the quant tests: the kinds of rows quantizers get wrong, and an
interpreter runner for the stdlib quant kernels."""

from __future__ import annotations

import numpy as np

from dsl.lowering.interpret import run_kernel
from dsl.ops.library import stdlib_path
from dsl.pipeline import compile_file

QTYPES = ("q8_0", "q4_k", "q5_k", "q6_k", "q8_k")


def rows(kind: str, n_rows: int, n: int, seed: int = 0) -> np.ndarray:
    """float32 [n_rows, n] of one kind of data."""
    rng = np.random.default_rng(seed)
    shape = (n_rows, n)
    match kind:
        case "gaussian":
            x = rng.standard_normal(shape)
        case "uniform":
            x = rng.uniform(-1.0, 3.0, shape)
        case "heavy":  # heavy-tailed: a few values dominate their block
            x = rng.standard_t(1.5, shape)
        case "zero":
            x = np.zeros(shape)
        case "constant":  # one value per 32-value group, positive and negative
            x = np.repeat(rng.standard_normal((n_rows, n // 32)), 32, axis=1)
        case "tiny":
            x = rng.standard_normal(shape) * 1e-30
        case "huge":
            x = rng.uniform(-6e4, 6e4, shape)
        case "positive":
            x = rng.uniform(0.5, 2.0, shape)
        case "mixed":  # zero, constant and gaussian blocks side by side
            x = rng.standard_normal(shape)
            x[:, : n // 4] = 0.0
            x[:, n // 4: n // 2] = 0.75
        case _:
            raise ValueError(kind)
    return x.astype(np.float32)


KINDS = ("gaussian", "uniform", "heavy", "zero", "constant", "tiny", "huge", "positive", "mixed")

_kernels: dict[str, dict] = {}


def interpret(module: str, name: str, *arrays: np.ndarray) -> None:
    """Run kernel `name` of `stdlib/<module>.tk` in the reference interpreter."""
    if module not in _kernels:
        program = compile_file(stdlib_path(module), stop_after="loops").program
        _kernels[module] = {k.name: k for k in program.kernels}
    kernel = _kernels[module][name]
    run_kernel(kernel, {p.name: a for p, a in zip(kernel.params, arrays, strict=True)})
