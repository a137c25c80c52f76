"""`prefetch(x[...])`: a statement that asks for a cache line and changes no
result, with an element that may lie outside the tensor."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import CompileError, Source
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_program
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

from tk_program import errors, typed

AHEAD = """
{schedule}
def copy_ahead(x: f32[N], y: f32[N]):
    for i in range(N):
        prefetch(x[i + 64])
        y[i] = x[i]
"""


def compile_to(text: str, stage: str, **options):
    return compile_source(Source("t.tk", text), CompileOptions(**options), stop_after=stage)


def load_library(text: str, tmp_path_factory, name: str):
    job = compile_to(text, "obj")
    path = tmp_path_factory.mktemp(name) / f"{name}.so"
    link_shared(job.obj, path, job.target)
    return dsl.load(path)


def test_prefetch_is_a_statement_of_the_kernel_ir():
    text = typed(AHEAD.format(schedule=""))
    assert "prefetch x[i + 64]" in text


@pytest.mark.parametrize("line, words", [
    ("prefetch(x)", "takes one tensor element"),
    ("prefetch(x[i], x[i])", "takes one tensor element"),
    ("prefetch(x[i, i])", "'x' has rank 1 but is indexed with 2 indices"),
    ("prefetch(s[i])", "'s' is a scalar and cannot be indexed"),
    ("y[i] = prefetch(x[i])", "prefetch(...) is a statement of its own; it has no value"),
    ("prefetch(x[i], level=4)", "prefetch's level is the cache level the line goes to: 1, 2 or 3"),
    ("prefetch(x[i], level=i)", "prefetch's level is the cache level the line goes to: 1, 2 or 3"),
    ("prefetch(x[i], into=2)", "prefetch() takes one keyword, level=1, 2 or 3, not 'into'"),
])
def test_prefetch_errors(line, words):
    text = f"def k(s: f32, x: f32[N], y: f32[N]):\n    for i in range(N):\n        {line}\n        y[i] = x[i]\n"
    assert words in errors(text)


@pytest.mark.parametrize("n", [0, 5, 64, 100])
def test_prefetch_past_the_end_reads_nothing_and_changes_nothing(n, tmp_path_factory):
    """The last 64 elements ask for lines beyond x; the copy is exact, vectorized
    or not, compiled or interpreted."""
    x = np.arange(n, dtype=np.float32)
    for schedule in ("", "@schedule(vectorize(i))"):
        lib = load_library(AHEAD.format(schedule=schedule), tmp_path_factory, "ahead")
        y = np.full(n, -1.0, np.float32)
        lib.copy_ahead(x, y)
        np.testing.assert_array_equal(y, x)
    kernel = compile_to(AHEAD.format(schedule="@schedule(vectorize(i))"), "guard").program.kernels[0]
    y = np.full(n, -1.0, np.float32)
    run_kernel(kernel, {"x": x, "y": y})
    np.testing.assert_array_equal(y, x)


def test_vectorized_prefetch_asks_for_the_first_lane():
    job = compile_to(AHEAD.format(schedule="@schedule(vectorize(i, 16))"), "asm", cpu="znver4")
    scheduled = format_program(compile_to(AHEAD.format(schedule="@schedule(vectorize(i, 16))"), "schedule").program)
    assert "prefetch x[i.outer * 16 + 0 + 64]" in scheduled
    assert "prefetcht0" in job.asm


@pytest.mark.parametrize("level, instruction", [(1, "prefetcht0"), (2, "prefetcht1"), (3, "prefetcht2")])
def test_prefetch_level_picks_the_cache(level, instruction):
    text = AHEAD.replace("prefetch(x[i + 64])", f"prefetch(x[i + 64], level={level})").format(schedule="")
    assert ("prefetch x[i + 64]" + (f" to L{level}" if level > 1 else "")) in typed(text)
    asm = compile_to(text, "asm", cpu="znver4").asm
    assert instruction in asm and all(p not in asm for p in ("prefetcht0", "prefetcht1", "prefetcht2")
                                      if p != instruction)


def test_prefetch_at_a_vector_value_is_a_schedule_error():
    text = """
@schedule(vectorize(i, 8))
def gather_ahead(idx: i64[N], x: f32[M], y: f32[N]):
    for i in range(N):
        j = idx[i]
        prefetch(x[j])
        y[i] = f32(j)
"""
    with pytest.raises(CompileError) as info:
        compile_to(text, "schedule")
    assert "the prefetch at line 6 indexes with a value computed in the loop" in info.value.render()
