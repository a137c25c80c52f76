"""The `guard` pass: where a bounds check stays, where it is proven away, and
that compiled kernels report the failed check instead of touching memory."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.lowering import ir
from dsl.lowering.printer import format_kernel
from dsl.lowering.rewrite import walk_stmts
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

KERNELS = """
def shifted(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = x[i + 1]

def gather(x: f32[N], idx: i32[N], y: f32[N]):
    for i in range(N):
        y[i] = x[idx[i]]

def masked(x: f32[N], y: f32[N]):
    for i in range(N):
        if x[i] > 0.0:
            y[i] = x[i * 2]

def row_sums(A: f32[M, K], out: f32[M]):
    for i in range(M):
        out[i] = 0.0
        for k in range(K):
            out[i] += A[i, k]

def interior(x: f32[N], y: f32[N]):
    for i in range(1, N - 1):
        y[i] = x[i - 1] + x[i + 1]
    for i in range(N - 1, -1, -1):
        y[i] = y[i] + x[N - 1 - i]

def blocks(x: f32[R, C], y: f32[R, C]):
    for b in range((R + 15) // 16):
        for i in range(min(16, R - b * 16)):
            for j in range(min(C, 64)):
                y[b * 16 + i, j] = x[b * 16 + i, j] + 1.0
"""


@pytest.fixture(scope="module")
def guarded() -> dict[str, ir.Kernel]:
    job = compile_source(Source("g.tk", KERNELS), CompileOptions(), stop_after="guard")
    return {k.name: k for k in job.program.kernels}


@pytest.fixture(scope="module")
def library(tmp_path_factory):
    job = compile_source(Source("g.tk", KERNELS), CompileOptions(), stop_after="obj")
    return dsl.load(link_shared(job.obj, tmp_path_factory.mktemp("guard") / "g.so", job.target))


def bounds_checks(kernel: ir.Kernel) -> list[tuple[ir.Check, ir.CheckInfo]]:
    found = []
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.Check) and kernel.checks[s.code].kind == "bounds":
            found.append((s, kernel.checks[s.code]))
    return found


def loops_and_checks(body, depth=0) -> list[str]:
    """An outline of `body`: 'for i', 'if', 'check <tensor>' with nesting depth."""
    out = []
    for s in body:
        match s:
            case ir.For(var, body=inner):
                out.append(f"{depth}:for {var.name}")
                out += loops_and_checks(inner, depth + 1)
            case ir.If(then=then, orelse=orelse):
                out.append(f"{depth}:if")
                out += loops_and_checks(then + orelse, depth + 1)
            case ir.Check():
                out.append(f"{depth}:check")
    return out


def test_offset_index_is_checked_once_before_the_loop(guarded):
    kernel = guarded["shifted"]
    checks = bounds_checks(kernel)
    assert [info.message for _, info in checks] == ["index out of bounds on 'x' axis 0 at line 4"]
    outline = [line for line in loops_and_checks(kernel.body) if line != "0:check"]  # not entry checks
    assert outline == ["0:if", "1:check", "0:for i"]


def test_data_dependent_index_is_checked_in_the_loop(guarded):
    kernel = guarded["gather"]
    (check, info), = bounds_checks(kernel)
    assert info.tensors == ("x",)
    loop = next(s for s in kernel.body if isinstance(s, ir.For))
    assert loop.body[0] is check  # checked where it happens, per element
    assert "check i64(idx[i]) >= 0 and i64(idx[i]) < shape(x, 0)" in format_kernel(kernel)


def test_access_under_if_is_checked_under_the_if(guarded):
    kernel = guarded["masked"]
    (check, info), = bounds_checks(kernel)
    assert info.tensors == ("x",) and "line 13" in info.message
    loop = next(s for s in kernel.body if isinstance(s, ir.For))
    branch = next(s for s in loop.body if isinstance(s, ir.If))
    assert branch.then[0] is check


def test_accesses_within_their_loop_ranges_are_proven(guarded):
    assert bounds_checks(guarded["row_sums"]) == []
    assert bounds_checks(guarded["interior"]) == []


def test_either_side_of_a_min_bound_may_prove_an_access(guarded):
    """Rows b * 16 + i < R need the `R - b * 16` side of i's bound, columns the
    `C` side; b's own bound is not linear, but b starts at 0."""
    assert bounds_checks(guarded["blocks"]) == []


def test_shifted_kernel_returns_the_bounds_status(library):
    x = np.arange(4, dtype=np.float32)
    y = np.full(4, -1, np.float32)
    with pytest.raises(IndexError, match=r"shifted\(\): index out of bounds on 'x' axis 0 at line 4"):
        library.shifted(x, y)
    np.testing.assert_array_equal(y, -1)  # checked before the loop: nothing was written


def test_gather_with_a_wild_index_fails_cleanly(library):
    x = np.arange(4, dtype=np.float32)
    y = np.zeros(4, np.float32)
    for wild in (4, -1, 1 << 30):
        idx = np.array([0, 1, wild, 2], np.int32)
        with pytest.raises(IndexError, match="gather\\(\\): index out of bounds on 'x' axis 0"):
            library.gather(x, idx, y)
    library.gather(x, np.array([3, 2, 1, 0], np.int32), y)
    np.testing.assert_array_equal(y, [3, 2, 1, 0])


def test_masked_access_fails_only_when_taken(library):
    y = np.zeros(4, np.float32)
    library.masked(np.array([1, 1, 0, 0], np.float32), y)  # reads x[0], x[2]
    np.testing.assert_array_equal(y, [1, 0, 0, 0])
    with pytest.raises(IndexError, match="masked"):
        library.masked(np.array([0, 0, 1, 0], np.float32), y)  # reads x[4]


def test_proven_kernels_run(library):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = np.zeros(2, np.float32)
    library.row_sums(a, out)
    np.testing.assert_array_equal(out, a.sum(axis=1))
    x = np.array([1, 2, 3, 4], np.float32)
    y = np.zeros(4, np.float32)
    library.interior(x, y)
    np.testing.assert_array_equal(y, [4, 4 + 3, 6 + 2, 1])
