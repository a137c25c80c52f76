"""Open schedule parameters: choice(...) and one_of(...), read and expanded."""

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import CompileError, Source
from dsl.lowering.schedule_space import candidates, describe, is_open
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

OPEN = """
@schedule(split(i, choice(4, 16), tail=choice(peel, mask)), one_of(parallel(i.outer), unroll(i.inner, 2)))
def axpb(alpha: f32, x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i]
"""


def _loops(text: str):
    return compile_source(Source("t.tk", text), CompileOptions(), stop_after="loops").program.kernels[-1]


def test_every_combination_in_order():
    kernel = _loops(OPEN)
    assert is_open(kernel.schedule)
    names = [describe(c) for c in candidates(kernel.schedule)]
    assert len(names) == 8
    assert names[0] == "split(i, 4, tail=peel), parallel(i.outer)"
    assert names[-1] == "split(i, 16, tail=mask), unroll(i.inner, 2)"
    assert len(set(names)) == 8


def test_closed_schedule_has_one_candidate():
    kernel = _loops(OPEN.replace("choice(4, 16)", "8").replace("choice(peel, mask)", "peel")
                    .replace("one_of(parallel(i.outer), unroll(i.inner, 2))", "parallel(i.outer)"))
    assert not is_open(kernel.schedule)
    assert [describe(c) for c in candidates(kernel.schedule)] == ["split(i, 8, tail=peel), parallel(i.outer)"]


@pytest.mark.parametrize("bad, message", [
    ("choice()", "choice() takes one or more positive integers"),
    ("choice(4, 0)", "the factor must be a positive integer, not 0"),
    ("choice(4, j)", "expected a loop name or an integer"),
])
def test_bad_choice_is_located(bad, message):
    with pytest.raises(CompileError) as info:
        _loops(OPEN.replace("choice(4, 16)", bad))
    text = info.value.render()
    assert message in text and "t.tk:2:" in text


def test_one_of_needs_two_directives():
    with pytest.raises(CompileError) as info:
        _loops(OPEN.replace("one_of(parallel(i.outer), unroll(i.inner, 2))", "one_of(parallel(i.outer))"))
    assert "one_of() takes two or more directives" in info.value.render()


def test_every_candidate_computes_the_same(tmp_path):
    x = np.random.default_rng(1).standard_normal(1001).astype(np.float32)
    for pick in range(8):
        opts = CompileOptions(schedule_picks=(("axpb", pick),))
        job = compile_source(Source("t.tk", OPEN), opts, stop_after="obj")
        lib = dsl.load(link_shared(job.obj, tmp_path / f"c{pick}.so", job.target))
        out = np.empty_like(x)
        lib.axpb(np.float32(3.0), x, out)
        np.testing.assert_array_equal(out, np.float32(3.0) * x)
