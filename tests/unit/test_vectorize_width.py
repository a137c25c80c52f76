"""`vectorize(i)` without a width: a loop of constant trip count is one
vector of that many lanes; any other loop takes the target's width for the
widest element it touches (a kernel that keeps several vectors in registers
then fits each target's register file)."""

import pytest

import dsl
from dsl.grammar.diagnostics import Source
from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts
from dsl.lowering.vector import lanes_of
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

SOURCE = """
@schedule(vectorize(i, tail=mask))
def widen(x: {a}[N], y: {b}[N]):
    for i in range(N):
        y[i] = {b}(x[i]) * 2
"""

CONSTANT = """
@schedule(vectorize(i))
def six(x: f32[6], y: f32[6]):
    for i in range(6):
        y[i] = x[i] + 1.0
"""


def _lanes(text: str, cpu: str, triple: str | None = None) -> set[int]:
    options = CompileOptions(cpu=cpu, triple=triple)
    job = compile_source(Source("width.tk", text), options, stop_after="schedule")
    lanes = {lanes_of(e) for k in job.program.kernels for s in walk_stmts(k.body) for top in stmt_exprs(s)
             for e in walk_expr(top)}
    return lanes - {1}


@pytest.mark.parametrize("cpu, triple, f32_lanes", [("znver3", "x86_64-unknown-linux-gnu", 8),
                                                     ("znver4", "x86_64-unknown-linux-gnu", 16),
                                                     ("generic", "aarch64-unknown-linux-gnu", 4)])
def test_the_width_is_the_targets_for_the_widest_element(cpu, triple, f32_lanes):
    assert _lanes(SOURCE.format(a="f32", b="f32"), cpu, triple) == {f32_lanes}
    assert _lanes(SOURCE.format(a="f32", b="f64"), cpu, triple) == {f32_lanes // 2}


def test_a_constant_trip_count_is_one_vector_whatever_the_target():
    assert _lanes(CONSTANT, "znver3") == {6}


def test_a_loop_that_touches_no_tensor_needs_a_width():
    text = "@schedule(vectorize(i, tail=mask))\ndef count(n: i64, y: i64[1]):\n    s = 0\n" \
           "    for i in range(n):\n        s += i\n    y[0] = s\n"
    with pytest.raises(dsl.CompileError, match="it touches no tensor"):
        compile_source(Source("width.tk", text), CompileOptions(), stop_after="schedule")


VECTORS = """
@schedule(vectorize(i, vectors={n}, tail=mask))
def widen(x: {a}[N], y: {b}[N]):
    for i in range(N):
        y[i] = {b}(x[i]) * 2
"""


@pytest.mark.parametrize("cpu, triple, f32_lanes", [("znver3", "x86_64-unknown-linux-gnu", 8),
                                                     ("znver4", "x86_64-unknown-linux-gnu", 16),
                                                     ("generic", "aarch64-unknown-linux-gnu", 4)])
def test_vectors_counts_the_targets_vectors_of_the_widest_element(cpu, triple, f32_lanes):
    assert _lanes(VECTORS.format(n=4, a="f32", b="f32"), cpu, triple) == {4 * f32_lanes}
    assert _lanes(VECTORS.format(n=2, a="f32", b="f64"), cpu, triple) == {f32_lanes}


def test_vectors_and_a_width_together_are_refused():
    text = VECTORS.replace("vectors={n}", "8, vectors=2").format(a="f32", b="f32")
    with pytest.raises(dsl.CompileError, match=r"give a width or vectors=, not both"):
        compile_source(Source("width.tk", text), CompileOptions(), stop_after="schedule")


def test_vectors_past_the_widest_vector_is_an_error_naming_the_lanes():
    with pytest.raises(dsl.CompileError, match=r"with 8 vectors: 128 lanes \(at most 64\)"):
        compile_source(Source("width.tk", VECTORS.format(n=8, a="f32", b="f32")), CompileOptions(cpu="znver4"),
                       stop_after="schedule")


def test_vectors_must_be_a_positive_integer():
    with pytest.raises(dsl.CompileError, match=r"vectors= takes a positive integer"):
        compile_source(Source("width.tk", VECTORS.format(n=0, a="f32", b="f32")), CompileOptions(),
                       stop_after="schedule")
