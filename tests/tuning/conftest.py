"""Fixtures of the autotuning tests: small libraries built from kernel text."""

from pathlib import Path

import pytest

from dsl.backends.link import link_shared
from dsl.pipeline import compile_file


@pytest.fixture
def build_lib(tmp_path):
    """`build_lib(text, name)`: the path of a .so compiled from kernel `text`."""

    def build(text: str, name: str) -> Path:
        src = tmp_path / f"{name}.tk"
        src.write_text(text)
        job = compile_file(src, stop_after="obj")
        return link_shared(job.obj, tmp_path / f"{name}.so", job.target)

    return build
