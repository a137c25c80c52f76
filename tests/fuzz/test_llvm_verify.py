"""Invalid LLVM IR from the back-end never reaches LLVM's optimizer: it
becomes an internal error naming the kernel and its line."""

from __future__ import annotations

import pytest

import dsl.backends.llvm.module as module
from dsl.errors import InternalError
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

BROKEN = """define i32 @scale__unit(i32 %a) {
  %b = fadd i32 %a, %a
  ret i32 %b
}
"""
NO_TERMINATOR = """define i32 @scale__unit(i32 %a) {
entry:
  %b = add i32 %a, %a
}
"""
TEXT = """
def other(x: f32[N]):
    x[0] = 1.0

def scale(x: f32[N]):
    x[0] = 2.0
"""


@pytest.mark.parametrize("broken", [BROKEN, NO_TERMINATOR], ids=["parse", "verify"])
def test_a_module_that_does_not_verify_is_an_internal_error_at_the_kernel(monkeypatch, broken):
    monkeypatch.setattr(module, "build_module", lambda *args, **kwargs: broken)
    with pytest.raises(InternalError) as info:
        compile_source(Source("t.tk", TEXT), CompileOptions(cpu="znver3"), stop_after="llvm")
    message = str(info.value)
    assert message.startswith("internal error at t.tk:5:") and "(kernel scale): the generated LLVM IR does not verify" in message
