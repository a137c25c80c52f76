"""Messages about `@dsl.kernel(schedule="...")` point at what the user wrote:
the place inside the string literal, with the file's real line echoed; a
schedule that is not a literal in the decorator is blamed on its argument and
quoted in a note. Never the compiler's own `@schedule(...)` line."""

import inspect
import re
from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl import N, f32

LINES = Path(__file__).read_text().splitlines()
SCHED = "split(q, 64)"


def place_of(kernel, text: str, word: str) -> tuple[int, int]:
    """(line, column), 1-based, of `word` on the first line of `kernel`'s
    source (decorators included) holding `text`."""
    lines, first = inspect.getsourcelines(kernel.fn)
    k = next(k for k, line in enumerate(lines) if text in line)
    return first + k, lines[k].index(word) + 1


def error_of(kernel) -> str:
    with pytest.raises(dsl.CompileError) as info:
        kernel(np.ones(8, np.float32), np.ones(8, np.float32))
    return str(info.value)


def assert_echoes_only_the_file(text: str) -> None:
    """Every echoed source line (4-space indented, not a caret) is a line of this file."""
    assert "@schedule(" not in text
    for shown in re.findall(r"^    (.*)$", text, re.MULTILINE):
        if not set(shown) <= set(" ^~"):
            assert any(line.expandtabs(1) == shown for line in LINES), shown


def test_column_inside_a_one_line_literal():
    @dsl.kernel(schedule="split(q, 64)")  # the loop is i
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    text = error_of(scale)
    line, col = place_of(scale, 'schedule="split(q, 64)")  # the loop is i', "q")
    assert text.startswith(f"{__file__}:{line}:{col}: error: no loop named 'q'"), text
    assert f"    {LINES[line - 1]}\n    {' ' * (col - 1)}^\n" in text
    assert_echoes_only_the_file(text)


def test_column_in_a_literal_split_over_lines():
    @dsl.kernel(
        schedule=("split(i, 8), "  # pieces of one literal
                  "vectorize(q.inner)"),
    )
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    text = error_of(scale)
    line, col = place_of(scale, '"vectorize(q.inner)"),', "q.inner")
    assert text.startswith(f"{__file__}:{line}:{col}: error: no loop named 'q.inner'"), text
    assert_echoes_only_the_file(text)


def test_column_in_a_triple_quoted_literal():
    @dsl.kernel(schedule="""
        split(i, 8),
        vectorize(i.innr)
    """)
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    text = error_of(scale)
    line, col = place_of(scale, "vectorize(i.innr)", "i.innr")
    assert text.startswith(f"{__file__}:{line}:{col}: error: no loop named 'i.innr'"), text
    assert_echoes_only_the_file(text)


def test_syntax_error_in_a_literal():
    @dsl.kernel(schedule="split(i, 8) vectorize(i.inner)")
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    text = error_of(scale)
    line, col = place_of(scale, 'schedule="split(i, 8) vectorize(i.inner)")', "vectorize")
    assert text.startswith(f"{__file__}:{line}:{col}: error:"), text
    assert_echoes_only_the_file(text)


def test_schedule_in_a_variable_is_blamed_on_the_argument_and_quoted():
    @dsl.kernel(schedule=SCHED)
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    text = error_of(scale)
    line, col = place_of(scale, "@dsl.kernel(schedule=SCHED)", "SCHED")
    assert text.startswith(f"{__file__}:{line}:{col}: error: no loop named 'q'"), text
    assert f"    {LINES[line - 1].expandtabs(1)}\n    {' ' * (col - 1)}^~~~~\n" in text
    lead = "note: in the schedule (not a string literal in the decorator): "
    assert f"\n{lead}{SCHED}\n{' ' * (len(lead) + SCHED.index('q'))}^" in text, text
    assert_echoes_only_the_file(text)


def plain(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = x[i] * 2.0


def test_schedule_of_an_undecorated_function_is_blamed_on_its_def():
    text = error_of(dsl.kernel(plain, schedule="split(i, 4), tile(q, 2)"))
    line, col = place_of(dsl.kernel(plain), "def plain(", "def")
    assert text.startswith(f"{__file__}:{line}:{col}: error: tile()"), text
    assert "split(i, 4), tile(q, 2)" in text
    assert_echoes_only_the_file(text)


def test_literal_schedules_still_compile():
    @dsl.kernel(
        schedule="""split(i, 8),
                    vectorize(i.inner)""",
    )
    def scale(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    loops = scale.ir("schedule")
    assert "ramp(0, 1, 8)" in loops, loops
    x = np.arange(37, dtype=np.float32)
    y = np.zeros_like(x)
    scale(x, y)
    np.testing.assert_array_equal(y, 2 * x)
