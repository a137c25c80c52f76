"""Helpers shared by the schedule tests: compile program text to a stage, or
to a loaded shared library."""

from __future__ import annotations

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source


def compile_to(text: str, stage: str, **options):
    return compile_source(Source("t.tk", text), CompileOptions(**options), stop_after=stage)


def load_library(text: str, tmp_path_factory, name: str = "k", **options):
    """The kernels of `text`, compiled for this machine (or `cpu=...` of its
    architecture) and loaded."""
    job = compile_to(text, "obj", **options)
    path = tmp_path_factory.mktemp(name) / f"{name}.so"
    link_shared(job.obj, path, job.target)
    return dsl.load(path)
