"""Reductions over a vectorized loop accumulate in vectors; lanes combine once."""

import itertools

import numpy as np
import pytest

from dsl.grammar.diagnostics import Source
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

DOT = """
@options(reassociate=True)
@schedule(vectorize(i, 8))
def dot(x: f32[N], y: f32[N], out: f32[2]):
    acc = 0.0
    hi = -1e30
    for i in range(N):
        acc += x[i] * y[i]
        hi = max(hi, x[i])
    out[0] = acc
    out[1] = hi
"""


def scheduled():
    return compile_source(Source("dot.tk", DOT), CompileOptions(), stop_after="guard").program.kernels[0]


def test_the_loop_updates_vectors_and_reduces_after_it():
    lines = format_kernel(scheduled()).splitlines()
    loop = next(k for k, line in enumerate(lines) if "for i.outer" in line)
    inside = list(itertools.takewhile(lambda line: line.startswith("    "), lines[loop + 1:]))
    assert any("acc.v = acc.v + " in line for line in inside)
    # A float max keeps integer keys, and the magnitudes to tell NaN apart.
    assert any("hi.keys = max(hi.keys, hi.bits ^ " in line for line in inside)
    assert any("hi.nans = max(hi.nans, hi.bits & 2147483647)" in line for line in inside)
    assert not any("hreduce" in line for line in inside)
    after = lines[loop + 1 + len(inside):]
    assert after[0].strip() == "acc = acc + hreduce_sum(acc.v)"
    assert [line.strip() for line in after[1:3]] == ["hi.best: i32 = hreduce_max(hi.keys)",
                                                     "hi.nan: i32 = hreduce_max(hi.nans)"]
    assert after[3].strip().startswith("hi = max(hi, (from_bits(hi.nan) if hi.nan > 2139095040 else ")


@pytest.mark.parametrize("n", [0, 1, 7, 8, 9, 100])
def test_results(n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out = np.zeros(2, np.float32)
    run_kernel(scheduled(), {"x": x, "y": y, "out": out})
    assert abs(out[0] - float(np.dot(x.astype(np.float64), y))) <= 1e-5 * (1 + n)
    assert out[1] == (x.max() if n else np.float32(-1e30))
