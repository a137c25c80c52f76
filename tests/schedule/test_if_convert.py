"""If-conversion: value-picking branches over proven loads become selects (so
the loop vectorizes); a load that is only valid under its condition stays
behind the branch."""

import numpy as np
import pytest

from tk_library import compile_to, load_library

from dsl.lowering import ir
from dsl.lowering.rewrite import walk_stmts

KERNELS = """
@schedule(vectorize(i, 8))
def pick(x: f32[N], y: f32[N], out: f32[N], both: bool[N], either: bool[N]):
    for i in range(N):
        out[i] = x[i] if x[i] > 0.0 else y[i]
        both[i] = x[i] > 0.0 and y[i] > 0.0
        either[i] = x[i] > 0.5 or y[i] < -0.5

def guarded(x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[i + 1] if i + 1 < N else -1.0
"""


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def test_only_the_guarded_branch_stays():
    kernels = {k.name: k for k in compile_to(KERNELS, "schedule").program.kernels}
    assert not any(isinstance(s, ir.If) for s in walk_stmts(kernels["pick"].body))
    assert any(isinstance(s, ir.If) for s in walk_stmts(kernels["guarded"].body))


@pytest.mark.parametrize("n", [0, 1, 8, 13, 100])
def test_results(lib, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    out, both, either = np.empty(n, np.float32), np.empty(n, bool), np.empty(n, bool)
    lib.pick(x, y, out, both, either)
    assert np.array_equal(out, np.where(x > 0, x, y))
    assert np.array_equal(both, (x > 0) & (y > 0))
    assert np.array_equal(either, (x > 0.5) | (y < -0.5))
    shifted = np.empty(n, np.float32)
    lib.guarded(x, shifted)
    assert np.array_equal(shifted, np.append(x[1:], np.float32(-1.0))[:n])
