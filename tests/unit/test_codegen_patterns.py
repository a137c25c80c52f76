"""FileCheck-style checks on generated LLVM IR and assembly (patterns, not whole
files: LLVM's text changes between versions). Every module looked at is verified."""

from pathlib import Path

import llvmlite.binding as llvm
import pytest

from dsl.backends.target import host_target
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

ROOT = Path(__file__).resolve().parents[2]
AVX2 = "+avx2" in host_target().features and "+fma" in host_target().features


def _job(path: str, stage: str, **opts):
    text = (ROOT / path).read_text()
    return compile_source(Source(path, text), CompileOptions(**opts), stop_after=stage)


def test_llvm_module_verifies_and_exports_every_entry():
    job = _job("examples/saxpy.tk", "llvm")
    text = str(job.llvm)
    llvm.parse_assembly(text).verify()
    for symbol in ("@saxpy(", "@saxpy__packed(", "@saxpy__numpy(", "@__dsl_metadata("):
        assert symbol in text


def test_contiguous_and_general_versions_are_dispatched():
    text = str(_job("examples/saxpy.tk", "llvm", opt_level=0).llvm)
    assert "@saxpy__unit(" in text and "@saxpy__any(" in text
    assert "fast" not in text.split("define")[1]  # no fast-math flags by default
    assert "fmul contract" in text


@pytest.mark.skipif(not AVX2, reason="needs an AVX2+FMA host")
def test_saxpy_uses_vector_fma_on_avx2():
    asm = _job("examples/saxpy.tk", "asm").asm
    assert "vfmadd" in asm and "ymm" in asm


def test_out_of_bounds_guard_is_a_branch_to_a_status_return():
    source = Source("shift.tk", "def shift(x: f32[N], y: f32[N]):\n    for i in range(N):\n        y[i] = x[i + 1]\n")
    text = str(compile_source(source, CompileOptions(opt_level=0), stop_after="llvm").llvm)
    llvm.parse_assembly(text).verify()
    assert "check" in text and "ret i32" in text
