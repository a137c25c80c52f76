"""quant_common's c_int8_roundf against C's (int8_t)roundf(v), compiled
(vectorized) and interpreted, over every kind of value near a half."""

import numpy as np

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.lowering.interpret import run_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

TEXT = """
from quant_common import c_int8_roundf

@options(contract=False)
@schedule(vectorize(i, 16))
def k(x: f32[N], y: i8[N]):
    for i in range(N):
        y[i] = c_int8_roundf(x[i])
"""


def _c_roundf_int8(x: np.ndarray) -> np.ndarray:
    """roundf in float64 (exact for a float32 input), then C's conversion on
    x86-64: the low byte of cvttss2si's i32, 0 for NaN and out of range."""
    v = x.astype(np.float64)
    with np.errstate(invalid="ignore"):
        r = np.sign(v) * np.floor(np.abs(v) + 0.5)
        inside = np.abs(r) < 2.0 ** 31
    low = (np.where(inside, r, 0).astype(np.int64) & 0xFF).astype(np.uint8).view(np.int8)
    return np.where(inside, low, np.int8(0))


def _values() -> np.ndarray:
    halves = np.arange(-300, 301, dtype=np.float32) + np.float32(0.5)
    near = [np.nextafter(halves, np.float32(np.inf)), np.nextafter(halves, np.float32(-np.inf)), halves]
    special = np.array([0.49999997, -0.49999997, 0.5, -0.5, 0.0, -0.0, 1e-30, 8388607.5, 8388608.0, 16777217.0,
                        2147483520.0, -2147483648.0, 3e9, np.inf, -np.inf, np.nan, 127.49999, -127.5], np.float32)
    dense = np.random.default_rng(0).uniform(-140, 140, 20000).astype(np.float32)
    return np.concatenate([*near, special, dense])


def test_c_int8_roundf_is_c_s_conversion_of_roundf(tmp_path):
    x = _values()
    job = compile_source(Source("r.tk", TEXT), CompileOptions(), stop_after="obj")
    lib = dsl.load(str(link_shared(job.obj, tmp_path / "r.so", job.target)))
    y = np.empty(x.size, np.int8)
    lib.k(x, y)
    want = _c_roundf_int8(x)
    np.testing.assert_array_equal(y, want)
    kernel = compile_source(Source("r.tk", TEXT), CompileOptions(), stop_after="loops").program.kernels[-1]
    interpreted = np.empty_like(y)
    run_kernel(kernel, {"x": x, "y": interpreted})
    np.testing.assert_array_equal(interpreted, want)
