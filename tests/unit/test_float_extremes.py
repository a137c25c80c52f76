"""A vectorized float max/min reduction keeps integer keys per lane
(lowering/transforms/vector_accumulators.py): the result must still be the
IEEE maximum / minimum of the values, lane order aside: NaN wins (either
sign of NaN, at any position), -0 < +0, infinities and denormals order as
floats, and an empty loop gives the identity. Checked natively on both x86
widths and in the reference interpreter on arrays drawn from those values."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.backends.target import host_target
from dsl.grammar.diagnostics import Source
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

SOURCE = """
@options(reassociate=True)
@schedule(vectorize(i, {w}, tail=mask), vectorize(j, {w}, tail=mask))
def extremes(x: {t}[N], out: {t}[2]):
    hi = {t}(-1e30)
    lo = {t}(1e30)
    for i in range(N):
        hi = max(hi, x[i])
    for j in range(N):
        lo = min(lo, x[j])
    out[0] = hi
    out[1] = lo
"""

SPECIAL = {np.float32: [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 1e-45, -1e-45, 3.4e38, -3.4e38, 1e31, -1e31],
           np.float64: [0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, 5e-324, -5e-324, 1.7e308, -1.7e308, 1e31, -1e31]}


def _source(dtype, width: int) -> str:
    return SOURCE.format(t="f32" if dtype == np.float32 else "f64", w=width)


def _native(tmp_path, dtype, width: int, cpu: str):
    job = compile_source(Source("t.tk", _source(dtype, width)), CompileOptions(cpu=cpu), stop_after="obj")
    return dsl.load(str(link_shared(job.obj, tmp_path / f"x{width}{cpu}{np.dtype(dtype).char}.so", job.target)))


def _expect(x: np.ndarray, start: float, pick) -> np.ndarray:
    """IEEE maximum (pick=max) or minimum over [start, *x], one value at a time."""
    best = x.dtype.type(start)
    for v in x:
        if np.isnan(best) or np.isnan(v):
            best = x.dtype.type(np.nan)
        elif v == best:  # only the sign of a zero can differ
            best = v if (np.signbit(best) if pick is max else not np.signbit(best)) else best
        else:
            best = pick(best, v)
    return best


def _cases(dtype, rng):
    values = np.array(SPECIAL[dtype], dtype)
    negative_nan = np.array([-np.nan], dtype)
    assert np.signbit(negative_nan[0])
    for n in (0, 1, 3, 8, 17, 33, 64, 100):
        yield values[rng.integers(0, len(values), n)]
    for n in (5, 16, 41):  # a NaN of either sign at each position
        for at in range(n):
            x = rng.standard_normal(n).astype(dtype)
            x[at] = negative_nan[0] if at % 2 else np.nan
            yield x
    for zeros in ([0.0, -0.0], [-0.0, 0.0], [-0.0] * 3):  # signed zeros, whatever their lanes
        for n in (2, 9, 40):
            yield np.resize(np.array(zeros, dtype), n) - (np.arange(n) % 3 == 2).astype(dtype) * 0


def _same(got, want) -> bool:
    return (np.isnan(got) and np.isnan(want)) or (got == want and np.signbit(got) == np.signbit(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cpu", ["znver3", "znver4"])
def test_vector_max_and_min_are_the_ieee_extremes(tmp_path, dtype, cpu):
    if cpu == "znver4" and host_target().vector_bits < 512:
        pytest.skip("no AVX-512 on this machine")
    rng = np.random.default_rng(7)
    lib = _native(tmp_path, dtype, 8 if cpu == "znver3" else 16, cpu)
    for x in _cases(dtype, rng):
        out = np.zeros(2, dtype)
        lib.extremes(x, out)
        want = (_expect(x, -1e30, max), _expect(x, 1e30, min))
        assert _same(out[0], want[0]) and _same(out[1], want[1]), (x, out, want)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_interpreter_runs_the_keyed_form_to_the_same_answers(dtype):
    job = compile_source(Source("t.tk", _source(dtype, 4)), CompileOptions(), stop_after="schedule")
    kernel = job.program.kernels[-1]
    assert "hi.keys" in format_kernel(kernel)
    for x in _cases(dtype, np.random.default_rng(8)):
        args = {"x": x, "out": np.zeros(2, dtype)}
        run_kernel(kernel, args)
        want = (_expect(x, -1e30, max), _expect(x, 1e30, min))
        assert _same(args["out"][0], want[0]) and _same(args["out"][1], want[1]), (x, args["out"], want)
