"""The examples in the docs run: ```tk blocks compile, ```tk-error blocks give
a located diagnostic (and no traceback), ```python blocks run to the end."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from dsl.grammar.diagnostics import CompileError, Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "docs" / "language.md", ROOT / "docs" / "internals.md", ROOT / "docs" / "semantics.md",
        ROOT / "docs" / "tutorial.md"]
FENCE = re.compile(r"^```(tk|tk-error|python)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks(kind: str) -> list:
    return list(_blocks(kind))


def _blocks(kind: str):
    for doc in DOCS:
        if not doc.exists():
            continue
        text = doc.read_text()
        for match in FENCE.finditer(text):
            if match.group(1) == kind:
                line = text[: match.start()].count("\n") + 2
                yield pytest.param(doc, line, match.group(2), id=f"{doc.name}:{line}")


def _source(doc: Path, line: int, code: str) -> Source:
    return Source(f"docs/{doc.name}", code, first_line=line)


@pytest.mark.parametrize("doc, line, code", blocks("tk"))
def test_tk_blocks_compile(doc, line, code):
    compile_source(_source(doc, line, code), CompileOptions(cpu="znver3"), stop_after="obj")


@pytest.mark.parametrize("doc, line, code", blocks("tk-error"))
def test_tk_error_blocks_are_located_diagnostics(doc, line, code):
    with pytest.raises(CompileError) as info:
        compile_source(_source(doc, line, code), CompileOptions(cpu="znver3"), stop_after="guard")
    text = info.value.render()
    assert f"docs/{doc.name}:" in text and "error:" in text and "Traceback" not in text


@pytest.mark.parametrize("doc, line, code", blocks("python"))
def test_python_blocks_run(doc, line, code, tmp_path):
    script = tmp_path / "example.py"
    script.write_text(code)
    run = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True)
    assert run.returncode == 0, f"{doc.name}:{line}\n{run.stderr}"


def test_docs_have_examples():
    assert len(list(blocks("tk"))) >= 8 and len(list(blocks("python"))) >= 1
