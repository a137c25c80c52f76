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


def test_gelu_polynomial_is_the_fit():
    body = _function("gelu_f32")
    poly = body[body.index("p = fma("):body.index("* s\n")]
    written = [float(v) for v in re.findall(r"-?\d+\.\d+(?:e-?\d+)?", poly)]
    coef, error = _load("fit_gelu").fit()
    assert error < 5e-8
    # one float32 ulp of slack: another BLAS may round the float64 fit differently
    ulps = np.array(written, np.float32).view(np.int32) - coef[::-1].astype(np.float32).view(np.int32)
    assert np.all(np.abs(ulps) <= 1), ulps
