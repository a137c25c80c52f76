"""unroll(i, f) gives a reduction one accumulator per copy where that is exact
(integers, min/max) or allowed (reassociate), and leaves it alone otherwise."""

import numpy as np
import pytest
from tk_library import compile_to, load_library

from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel

REDUCE = """
{options}
@schedule(unroll(i, 4))
def red(x: {t}[N], out: {t}[1]):
    acc = {init}
    for i in range(N):
        acc = {update}
    out[0] = acc
"""

PREFIX = """
@options(reassociate=True)
@schedule(unroll(i, 4))
def prefix(x: i64[N], out: i64[N]):
    acc = 0
    for i in range(N):
        acc += x[i]
        out[i] = acc
"""


def _text(options="", t="f32", init="0.0", update="acc + x[i]"):
    return REDUCE.format(options=options, t=t, init=init, update=update)


def _ir(text):
    return format_kernel(compile_to(text, "schedule").program.kernels[0])


@pytest.mark.parametrize("text, parts", [
    (_text(), 0),                                          # float +, no reassociate: one chain
    (_text("@options(reassociate=True)"), 3),
    (_text(t="i32", init="0"), 3),                         # integer +: exact in any order
    (_text(init="-1e30", update="max(acc, x[i])"), 3),     # max: exact in any order
])
def test_which_reductions_are_split(text, parts):
    ir = _ir(text)
    assert sum(f"acc.r{k}:" in ir for k in range(1, 4)) == parts


def test_read_elsewhere_is_not_split():
    assert "acc.r1" not in _ir(PREFIX)


@pytest.mark.parametrize("n", [0, 1, 3, 4, 5, 17, 1000])
def test_results(n):
    rng = np.random.default_rng(n)
    xf = rng.standard_normal(n).astype(np.float32)
    xi = rng.integers(-1000, 1000, n).astype(np.int32)
    cases = [
        (_text(), xf, None),
        (_text("@options(reassociate=True)"), xf, None),
        (_text(t="i32", init="0"), xi, lambda x: np.int32(x.sum())),
        (_text(init="-1e30", update="max(acc, x[i])"), xf, lambda x: np.float32(max([-1e30] + x.tolist()))),
    ]
    for k, (text, x, exact) in enumerate(cases):
        lib = load_library(text)
        out = np.zeros(1, x.dtype)
        lib.red(x, out)
        ref = np.zeros(1, x.dtype)
        run_kernel(compile_to(text, "guard").program.kernels[0], {"x": x, "out": ref})
        if exact is not None:
            assert out[0] == exact(x) and ref[0] == out[0]
        else:
            np.testing.assert_allclose(out[0], x.astype(np.float64).sum(), rtol=1e-5, atol=1e-4)
            np.testing.assert_allclose(ref[0], out[0], rtol=1e-5, atol=1e-4)


def test_unsplit_float_sum_is_bit_identical_to_as_written():
    x = np.random.default_rng(5).standard_normal(1001).astype(np.float32)
    outs = []
    for k, text in enumerate((_text(), _text().replace("@schedule(unroll(i, 4))", "@schedule()"))):
        out = np.zeros(1, np.float32)
        load_library(text).red(x, out)
        outs.append(out[0])
    assert outs[0] == outs[1]
