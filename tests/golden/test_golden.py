"""Golden tests: the printed output of each stage, and the diagnostics of bad
programs, compared exactly with files under tests/golden/."""

from pathlib import Path

import pytest

from dsl.grammar.diagnostics import CompileError, Source
from dsl.options import CompileOptions
from dsl.pipeline import STAGES, compile_source

HERE = Path(__file__).resolve().parent
PROGRAMS = sorted((HERE / "programs").glob("*.tk"))
ERRORS = sorted((HERE / "errors").glob("*.tk"))
GOLDEN_STAGES = ("ast", "typed", "loops", "guard")
COMPILER_FILES = ("grammar/", "lowering/", "backends/", "dsl/", ".py:", "Traceback")
# Goldens must not depend on the machine running the tests (an AVX-512 host
# would pick other vector widths and micro-tiles): pin an AVX2+FMA target.
OPTIONS = CompileOptions(cpu="znver3")


def _source(path: Path) -> Source:
    # Relative name: goldens must not depend on where the repository lives.
    return Source(f"{path.parent.name}/{path.name}", path.read_text())


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: p.stem)
@pytest.mark.parametrize("stage", GOLDEN_STAGES)
def test_stage_output(path, stage, golden):
    job = compile_source(_source(path), OPTIONS, stop_after=stage, base_dir=path.parent)
    text = next(s for s in STAGES if s.name == stage).show(job)
    golden.check(HERE / "expected" / f"{path.stem}.{stage}.txt", text)


@pytest.mark.parametrize("path", ERRORS, ids=lambda p: p.stem)
def test_diagnostics(path, golden):
    with pytest.raises(CompileError) as info:
        compile_source(_source(path), OPTIONS, stop_after="guard", base_dir=path.parent)
    text = info.value.render()
    for marker in COMPILER_FILES:
        assert marker not in text, f"diagnostic mentions compiler internals ({marker!r})"
    assert f"{path.parent.name}/{path.name}:" in text, "diagnostic has no file:line:col location"
    golden.check(HERE / "errors" / f"{path.stem}.err", text)


def test_enough_error_cases():
    assert len(ERRORS) >= 30
