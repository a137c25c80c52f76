"""The automatic schedule's threads: legal loops run on a team when the call
brings enough work, illegal ones stay serial and say why (`--remarks`)."""

import numpy as np
import pytest

from tk_library import load_library
from tk_library import compile_to as compile_text

from dsl.lowering import ir
from dsl.lowering.rewrite import walk_stmts
from dsl.lowering.transforms.auto_parallel import MIN_WORK
from dsl.lowering.verify import VerifyError, verify

KERNELS = """
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]

@schedule()
def saxpy_serial(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]

def prefix(x: f64[N], out: f64[N]):
    acc = 0.0
    for i in range(N):
        acc += x[i]
        out[i] = acc

def shifted(x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[i + 1] if i + 1 < N else 0.0

def column_sums(x: f32[T, N], out: f32[N]):
    for t in range(T):
        for n in range(N):
            out[n] = (0.0 if t == 0 else out[n]) + x[t, n]
"""


def compile_to(stage: str, remarks: bool = False):
    return compile_text(KERNELS, stage, remarks=remarks)


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def loops(kernel_name: str) -> list[ir.For]:
    kernel = next(k for k in compile_to("schedule").program.kernels if k.name == kernel_name)
    return [s for s in walk_stmts(kernel.body) if isinstance(s, ir.For)]


def test_which_loops_get_threads():
    assert [(x.name, x.kind, x.when is not None) for x in loops("saxpy")] == [("i", "parallel", True)]
    assert [x.kind for x in loops("saxpy_serial")] == ["serial"]
    assert [x.kind for x in loops("prefix")] == ["serial"]  # acc carries from one i to the next
    assert [x.kind for x in loops("shifted")] == ["serial"]  # x[i + 1] is checked on each iteration
    # t revisits every out[n]; the n loop inside it is the one that splits.
    assert [(x.name, x.kind) for x in loops("column_sums")] == [("t", "serial"), ("n", "parallel")]


def test_remarks_give_the_reason(capsys):
    compile_to("schedule", remarks=True)
    err = capsys.readouterr().err
    assert "remark: loop 'i' runs on one thread:" in err  # prefix
    assert "the access to 'x' is not proven in bounds" in err  # shifted
    assert f"is at least {MIN_WORK}" in err


@pytest.mark.parametrize("n", [0, 1, 1000, 3 * MIN_WORK + 7])
def test_same_bits_with_and_without_threads(lib, n):
    rng = np.random.default_rng(n)
    x, y = rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)
    got, want = np.empty_like(x), np.empty_like(x)
    lib.saxpy(1.5, x, y, got)
    lib.saxpy_serial(1.5, x, y, want)
    assert np.array_equal(got, want)


def test_inner_loop_parallel_results(lib):
    x = np.random.default_rng(0).standard_normal((5, 3 * MIN_WORK)).astype(np.float32)
    out = np.full(3 * MIN_WORK, np.nan, np.float32)
    lib.column_sums(x, out)
    np.testing.assert_allclose(out, x.sum(axis=0), rtol=1e-5, atol=1e-5)
    p = np.empty(10)
    lib.prefix(np.arange(10.0), p)
    assert np.array_equal(p, np.cumsum(np.arange(10.0)))


def test_verifier_rejects_a_condition_on_a_serial_loop():
    kernel = next(k for k in compile_to("schedule").program.kernels if k.name == "saxpy")
    loop = next(s for s in kernel.body if isinstance(s, ir.For))
    from dataclasses import replace
    from dsl.lowering.transforms.nest import replace_loop

    bad = replace(kernel, body=replace_loop(kernel.body, loop, [replace(loop, kind="serial")]))
    with pytest.raises(VerifyError, match="only a parallel loop has a `when` condition"):
        verify(bad, "loops")


BLOCKED = """
@options(reassociate=True)
def block_sums(x: f32[O, R], out: f32[O]):
    for o in range(O):
        total = f64(0.0)
        for b in range(0, R, 1024):
            part = 0.0
            for r in range(b, min(b + 1024, R)):
                part += x[o, r]
            total += f64(part)
        out[o] = f32(total)
"""


def test_a_block_loop_counts_its_block(capsys):
    """range(b, min(b + 1024, R)) weighs 1024 iterations, not 1: 64 rows of
    2^18 elements are enough work for threads (they were estimated at 16K
    accesses, below MIN_WORK, and a 16M-element sum ran on one thread)."""
    compile_text(BLOCKED, "schedule", remarks=True)
    err = capsys.readouterr().err
    assert "loop 'o': parallel on all threads when its work (~max(O, 0) * max(max(R, 0) // 1024 * 1024" in err
