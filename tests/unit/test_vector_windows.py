"""Vector loads whose innermost index moves by constants per lane (`s[2 + l // 4]`,
`s[l % 4]`, `s[3 * l]`): proven in bounds by the loop's constant range, read as
one window load (the whole row when the window is most of a row of constant
length) and a shuffle, and equal to numpy on every layout."""

from __future__ import annotations

import re

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

PATTERNS = {  # index into s[n, :24] -> the numpy expression of lane l's element
    "2 + l // 4": lambda l: 2 + l // 4,
    "l % 4 + 16": lambda l: l % 4 + 16,
    "3 * l": lambda l: 3 * l,
    "(l >> 1) * 5 + 1": lambda l: (l >> 1) * 5 + 1,
    "23 - l // 2": lambda l: 23 - l // 2,
}


def _source(index: str) -> str:
    return f"""@schedule(vectorize(l))
def window(s: i16[N, 24], x: i32[N, 8], y: i32[N, 8]):
    for n in range(N):
        for l in range(8):
            y[n, l] = x[n, l] * i32(s[n, {index}])
"""


def _layouts(s: np.ndarray) -> list[np.ndarray]:
    """`s` contiguous (the window path), with inner stride 2 (the gather path),
    and with its rows in reverse order in memory (the window, at a negative row stride)."""
    wide = np.zeros((s.shape[0], 2 * s.shape[1]), s.dtype)
    wide[:, ::2] = s
    return [s, wide[:, ::2], s[::-1].copy()[::-1]]


@pytest.mark.parametrize("index", PATTERNS)
def test_window_loads_equal_numpy_on_every_layout(index, tmp_path):
    job = compile_source(Source("window.tk", _source(index)), CompileOptions())
    kernel = dsl.load(link_shared(job.obj, tmp_path / "window.so", job.target)).window
    rng = np.random.default_rng(0)
    lanes = np.array([PATTERNS[index](l) for l in range(8)])
    for rows in (1, 5):
        s = rng.integers(-300, 300, (rows, 24)).astype(np.int16)
        x = rng.integers(-50, 50, (rows, 8)).astype(np.int32)
        for layout in _layouts(s):
            y = np.empty_like(x)
            kernel(layout, x, y)
            np.testing.assert_array_equal(y, x * s[:, lanes].astype(np.int32))


@pytest.mark.parametrize("index", PATTERNS)
def test_window_loads_are_one_load_and_a_shuffle(index):
    job = compile_source(Source("window.tk", _source(index)), CompileOptions(opt_level=0), stop_after="llvm")
    text = str(job.llvm)
    start = re.search(r"^define [^\n]*@window__unit\(", text, re.MULTILINE).start()
    unit = text[start: text.index("\n}\n", start)]
    span = max(PATTERNS[index](l) for l in range(8)) - min(PATTERNS[index](l) for l in range(8)) + 1
    span = 24 if 2 * span >= 24 else span  # most of a row of constant length: the whole row
    assert f"load <{span} x i16>" in unit and "shufflevector" in unit
    assert "masked.gather" not in unit


def test_a_lane_pattern_past_the_axis_is_refused():
    """l // 4 reaches 1: index 23 + 1 is past the axis of 24, so the loop is not vectorized."""
    with pytest.raises(dsl.CompileError, match=r"cannot vectorize 'l': the access to 's' \(line 5\) is not proven"):
        compile_source(Source("window.tk", _source("23 + l // 4")), CompileOptions(), stop_after="schedule")
