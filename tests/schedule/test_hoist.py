"""hoist(i): invariant loads and arithmetic computed once before the loop,
never speculated where the loop body might not have run them."""

import numpy as np
import pytest
from tk_library import compile_to, load_library

from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel

BRANCHY = """
{schedule}
def branchy(x: f32[N], a: f32[M], y: f32[N], j: i64):
    for i in range(N):
        t = a[j] * 2.0
        if x[i] > 0.0:
            y[i] = x[i] * t + a[j + 1]
        else:
            y[i] = x[i] + f32(j * 3 + 1)
"""

ROWSCALE = """
{schedule}
def rowscale(x: f32[M, N], s: f32[M], y: f32[M, N]):
    for i in range(M):
        for j in range(N):
            y[i, j] = x[i, j] * s[i] + s[(i + 1) % M]
"""


def test_what_is_hoisted_and_what_is_not():
    text = format_kernel(compile_to(BRANCHY.format(schedule="@schedule(hoist(i))"), "schedule").program.kernels[0])
    assert "if 0 < N:" in text
    assert "i.inv0: f32 = a[j] * 2.0" in text  # always runs in an iteration: hoisted
    assert "a[i.inv1]" in text  # under the if: only its index arithmetic moves
    before_loop = text.split("for i in range")[0]
    assert "a[j + 1]" not in before_loop


@pytest.fixture(scope="module")
def libs():
    return {s: load_library(BRANCHY.format(schedule=s))
            for i, s in enumerate(("@schedule(hoist(i))", "@schedule()"))}


@pytest.mark.parametrize("n, m, j", [(0, 0, 0), (1, 2, 0), (7, 5, 3), (100, 9, 7)])
def test_branchy_same_as_written(libs, n, m, j):
    rng = np.random.default_rng(n)
    x = rng.standard_normal(n).astype(np.float32)
    a = rng.standard_normal(m).astype(np.float32)
    outs = []
    for lib in libs.values():
        y = np.full(n, np.nan, np.float32)
        lib.branchy(x, a, y, j)
        outs.append(y)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_branchy_out_of_bounds_is_still_caught(libs):
    x = np.ones(3, np.float32)
    with pytest.raises(IndexError):
        libs["@schedule(hoist(i))"].branchy(x, np.ones(2, np.float32), np.empty(3, np.float32), 5)


@pytest.mark.parametrize("m, n", [(1, 1), (3, 5), (17, 33)])
def test_rowscale_after_split(m, n):
    text = ROWSCALE.format(schedule="@schedule(split(j, 4, tail=peel), hoist(j.inner), hoist(j.outer))")
    lib = load_library(text)
    rng = np.random.default_rng(m * n)
    x = rng.standard_normal((m, n)).astype(np.float32)
    s = rng.standard_normal(m).astype(np.float32)
    y = np.empty_like(x)
    lib.rowscale(x, s, y)
    want = x * s[:, None] + np.roll(s, -1)[:, None]
    np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    ref = np.empty_like(x)
    run_kernel(compile_to(text, "guard").program.kernels[0], {"x": x, "s": s, "y": ref})
    np.testing.assert_allclose(ref, want, rtol=1e-6, atol=1e-6)
