"""The fitted constants of stdlib/mathfn.tk are what their fit scripts (tools/) produce."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _function(name: str) -> str:
    source = (ROOT / "stdlib" / "mathfn.tk").read_text()
    start = source.index(f"def {name}(")
    return source[start:source.index("\ndef ", start + 1)]


def _assert_written_fit(function: str, start: str, end: str, tool: str, bound: float) -> None:
    """The constants of `function` between `start` and `end` are the fit of
    tools/`tool`.py (highest power first), whose error is below `bound`."""
    body = _function(function)
    poly = body[body.index(start):body.index(end)]
    written = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", poly)]
    coef, error = _load(tool).fit()
    assert error < bound
    # one float32 ulp of slack: another BLAS may round the float64 fit differently
    ulps = np.array(written, np.float32).view(np.int32) - coef[::-1].astype(np.float32).view(np.int32)
    assert np.all(np.abs(ulps) <= 1), ulps


def test_gelu_polynomial_is_the_fit():
    _assert_written_fit("gelu_f32", "p = fma(", "* s\n", "fit_gelu", 5e-8)


def test_softmax_exp_polynomial_is_the_fit():
    _assert_written_fit("exp_poly3_f32", "return fma(", "\n\n", "fit_exp", 1.2e-7)
