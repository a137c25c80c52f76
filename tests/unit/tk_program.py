"""Helpers shared by the type-checker tests: compile program text to a stage,
collect its diagnostics, run its last kernel in the reference interpreter."""

from __future__ import annotations

import pytest

from dsl.grammar.diagnostics import CompileError, Source
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_source


def compile_tk(text: str, stage: str = "typed"):
    return compile_source(Source("t.tk", text), CompileOptions(), stop_after=stage)


def typed(text: str) -> str:
    """The kernel IR of the program's last kernel."""
    return format_kernel(compile_tk(text, "typed").typed.kernels[-1])


def errors(text: str) -> str:
    with pytest.raises(CompileError) as info:
        compile_tk(text, "loops")
    return info.value.render()


def run(text: str, **args) -> None:
    """Run the last kernel, bounds checks included, in the reference interpreter."""
    run_kernel(compile_tk(text, "guard").program.kernels[-1], args)
