"""Schedules change how a kernel runs, never what it computes: scheduled ==
unscheduled == the reference interpreter, for random sizes and schedules
(split, tile, unroll, reorder, hoist, vectorize, fuse, parallel).

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
    """A random valid schedule for `imm`: split/tile, unroll, reorder, then
    hoist and vectorize of what the first left of the loops, then parallel."""
    parts = []
    kind = draw(st.sampled_from(["none", "split", "tile", "unroll", "reorder"]))
    f1, f2 = draw(st.integers(1, 9)), draw(st.integers(1, 9))
    tail = draw(st.sampled_from(["peel", "mask"]))
    k_loop, n_loop = "k", "n"  # where hoist and vectorize may go (None: nowhere)
    if kind == "split":
        parts.append(f"split(n, {f1}, tail={tail})")
        n_loop = "n.inner"
        if tail == "peel" and draw(st.booleans()):
            parts.append("unroll(n.inner)")  # a masked inner loop has no constant trip count
            n_loop = None  # (k names every copy: k.u0, k.u1, ...)
    elif kind == "tile":
        parts.append(f"tile(m, n, {f1}, {f2}, tail={tail})")
        n_loop = "n.inner"
        if draw(st.booleans()):
            parts.append(f"split(k, {f1}, tail={tail})")
            k_loop = "k.inner"
    elif kind == "unroll":
        parts.append(f"unroll(k, {f1})")
        k_loop = None
    elif kind == "reorder":
        parts.append("reorder(n, m)")
    # hoist keeps C's element in a local across k: the dependence checks of
    # vectorize(n) and parallel then cannot see which element, and refuse.
    hoisted = k_loop is not None and draw(st.booleans())
    if hoisted:
        parts.append(f"hoist({k_loop})")
    width, vtail = draw(st.sampled_from([4, 8, 16])), draw(st.sampled_from(["peel", "mask"]))
    target = draw(st.sampled_from([None, k_loop] + ([] if hoisted else [n_loop])))
    if target:
        parts.append(f"vectorize({target}, {width}, tail={vtail})")
    outermost = {"reorder": "n", "tile": "m.outer"}.get(kind, "m")
    if not hoisted and target != outermost and draw(st.booleans()):
        parts.append(f"parallel({outermost})")
    return f"@schedule({', '.join(parts)})" if parts else ""


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=imm_schedules(), sizes=SIZES)
def test_random_schedules_keep_integer_matmul_exact(schedule, sizes, tmp_path_factory):
    check_imm(IMATMUL.format(schedule=schedule), sizes, tmp_path_factory)


TWO_LOOPS = """
{schedule}
def two(x: i32[N], y: i32[N], u: i32[N], v: i32[N]):
    for i in range(N):
        u[i] = x[i] * 3 + y[i]
    for j in range(N):
        v[j] = u[j] - x[j]
"""


@st.composite
def fused_schedules(draw):
    """fuse(i, j), then one of split, unroll, vectorize or hoist of the fused
    loop, and maybe parallel over what stays outermost."""
    f, tail = draw(st.integers(1, 9)), draw(st.sampled_from(["peel", "mask"]))
    then = draw(st.sampled_from(["", f"split(i, {f}, tail={tail})", f"unroll(i, {f})", "hoist(i)",
                                 f"vectorize(i, {draw(st.sampled_from([4, 8, 16]))}, tail={tail})"]))
    parts = ["fuse(i, j)"] + ([then] if then else [])
    outer = {"": "i", "hoist(i)": "i"}.get(then, "i.outer" if then.startswith("split") else None)
    if outer and draw(st.booleans()):
        parts.append(f"parallel({outer})")
    return f"@schedule({', '.join(parts)})"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(schedule=fused_schedules(), n=st.sampled_from([0, 1, 2, 3, 7, 8, 17, 64, 101]))
def test_random_schedules_of_fused_loops_keep_results_exact(schedule, n, tmp_path_factory):
    lib, loop_ir = build(TWO_LOOPS.format(schedule=schedule), tmp_path_factory)
    rng = np.random.default_rng(n)
    x, y = ints(rng, n), ints(rng, n)
    u, v = np.full(n, 7, np.int32), np.full(n, 7, np.int32)
    lib.two(x, y, u, v)
    np.testing.assert_array_equal(u, x * 3 + y)
    np.testing.assert_array_equal(v, x * 2 + y)
    ref_u, ref_v = np.full(n, 7, np.int32), np.full(n, 7, np.int32)
    run_kernel(loop_ir, {"x": x, "y": y, "u": ref_u, "v": ref_v})
    np.testing.assert_array_equal(ref_v, v)


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
