"""Schedules change how a kernel runs, never what it computes: scheduled ==
unscheduled == the reference interpreter, for random sizes and schedules.

Integer kernels are compared exactly (integer arithmetic wraps identically in
every order); the float matmul allows 1e-5 relative error, since `reassociate`
lets a schedule reorder its sums.
"""

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.lowering.interpret import run_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

IMATMUL = """
{schedule}
def imm(A: i32[M, K], B: i32[K, N], C: i32[M, N]):
    for m in range(M):
        for n in range(N):
            C[m, n] = 0
            for k in range(K):
                C[m, n] += A[m, k] * B[k, n]
"""

AXPBY = """
{schedule}
def axpby(a: i64, x: i64[N], b: i64, y: i64[N], out: i64[N]):
    for i in range(N):
        out[i] = a * x[i] + b * y[i]
"""

_cache: dict = {}


def build(text: str, tmp_path_factory):
    if text not in _cache:
        job = compile_source(Source("t.tk", text), CompileOptions(), stop_after="obj")
        path = tmp_path_factory.mktemp("sched") / "k.so"
        link_shared(job.obj, path, job.target)
        scheduled = compile_source(Source("t.tk", text), CompileOptions(), stop_after="schedule")
        _cache[text] = (dsl.load(path), scheduled.program.kernels[0])
    return _cache[text]


def ints(rng, *shape):
    return rng.integers(-50, 50, size=shape, dtype=np.int32)


def check_imm(text, sizes, tmp_path_factory):
    lib, loop_ir = build(text, tmp_path_factory)
    m, k, n = sizes
    rng = np.random.default_rng(m * 100 + k * 10 + n)
    a, b = ints(rng, m, k), ints(rng, k, n)
    got = np.full((m, n), 7, np.int32)
    lib.imm(a, b, got)
    want = (a.astype(np.int64) @ b.astype(np.int64)).astype(np.int32)
    np.testing.assert_array_equal(got, want)
    if m * k * n <= 4000:
        ref = np.full((m, n), 7, np.int32)
        run_kernel(loop_ir, {"A": a, "B": b, "C": ref})
        np.testing.assert_array_equal(ref, want)


SIZES = st.tuples(st.sampled_from([0, 1, 2, 3, 5, 7, 13, 17]), st.sampled_from([0, 1, 3, 8, 11]),
                  st.sampled_from([0, 1, 4, 9, 16, 23]))


@st.composite
def imm_schedules(draw):
    """A random valid schedule for `imm`: split/tile, unroll, reorder, parallel."""
    parts = []
    kind = draw(st.sampled_from(["none", "split", "tile", "unroll", "reorder"]))
    f1, f2 = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    tail = draw(st.sampled_from(["peel", "mask"]))
    if kind == "split":
        parts.append(f"split(n, {f1}, tail={tail})")
        if tail == "peel" and draw(st.booleans()):
            parts.append("unroll(n.inner)")  # a masked inner loop has no constant trip count
    elif kind == "tile":
        parts.append(f"tile(m, n, {f1}, {f2})")
        if draw(st.booleans()):
            parts.append(f"split(k, {f1}, tail={tail})")
    elif kind == "unroll":
        parts.append(f"unroll(k, {f1})")
    elif kind == "reorder":
        parts.append("reorder(n, m)")
    if draw(st.booleans()):
        outermost = {"reorder": "n", "tile": "m.outer"}.get(kind, "m")
        parts.append(f"parallel({outermost})")
    return f"@schedule({', '.join(parts)})" if parts else ""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=imm_schedules(), sizes=SIZES)
def test_random_schedules_keep_integer_matmul_exact(schedule, sizes, tmp_path_factory):
    check_imm(IMATMUL.format(schedule=schedule), sizes, tmp_path_factory)


@pytest.mark.parametrize("schedule", [
    "@schedule(split(i, 8))",
    "@schedule(split(i, 3, tail=mask))",
    "@schedule(split(i, 4), unroll(i.inner))",
    "@schedule(unroll(i, 5))",
    "@schedule(split(i, 16), split(i.inner, 4), parallel(i.outer))",
])
@pytest.mark.parametrize("n", [0, 1, 2, 7, 64, 1001])
def test_axpby_schedules(schedule, n, tmp_path_factory):
    lib, loop_ir = build(AXPBY.format(schedule=schedule), tmp_path_factory)
    rng = np.random.default_rng(n)
    x, y = rng.integers(-9, 9, n), rng.integers(-9, 9, n)
    out = np.zeros(n, np.int64)
    lib.axpby(3, x, -2, y, out)
    np.testing.assert_array_equal(out, 3 * x - 2 * y)
    ref = np.zeros(n, np.int64)
    run_kernel(loop_ir, {"a": 3, "x": x, "b": -2, "y": y, "out": ref})
    np.testing.assert_array_equal(ref, out)


FMATMUL = """
@options(reassociate=True)
@schedule(tile(m, n, 4, 8), reorder(m.outer, n.outer, k, m.inner, n.inner), parallel(m.outer))
def fmm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    for m0 in range(M):
        for n0 in range(N):
            C[m0, n0] = 0.0
    for m in range(M):
        for n in range(N):
            for k in range(K):
                C[m, n] += A[m, k] * B[k, n]
"""


@pytest.mark.parametrize("shape", [(1, 1, 1), (5, 7, 9), (33, 17, 40), (64, 64, 64)])
def test_tiled_float_matmul(shape, tmp_path_factory):
    lib, _ = build(FMATMUL, tmp_path_factory)
    m, k, n = shape
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    c = np.empty((m, n), np.float32)
    lib.fmm(a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5, atol=1e-5 * np.sqrt(k))


def test_scheduled_loop_ir_is_printed_with_names():
    job = compile_source(Source("t.tk", IMATMUL.format(schedule="@schedule(split(n, 4))")),
                         CompileOptions(), stop_after="schedule")
    from dsl.lowering.printer import format_kernel

    text = format_kernel(job.program.kernels[0])
    assert re.search(r"for n\.outer in range", text) and "n.inner" in text and "n.tail" in text
