"""What vector code compiles to: patterns in the LLVM IR and the assembly
(not whole files: LLVM's text changes between versions). Every module looked
at is verified."""

from __future__ import annotations

import re

import llvmlite.binding as llvm
import pytest

from dsl.backends.target import host_target
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

from asm_loops import single_block_loops
from vector_kernels import KERNELS, float_kernels, int_kernels

AVX2 = "+avx2" in host_target().features and "+fma" in host_target().features



def _compile(text: str, stage: str, opt_level: int = 0):
    job = compile_source(Source("p.tk", text), CompileOptions(opt_level=opt_level), stop_after=stage)
    if stage == "llvm":
        ir_text = str(job.llvm)
        llvm.parse_assembly(ir_text).verify()
        return ir_text
    return job.asm


def _function(ir_text: str, name: str) -> str:
    """The text of `define ... @name(...) { ... }` in a module."""
    start = re.search(rf"^define [^\n]*@{re.escape(name)}\(", ir_text, re.MULTILINE).start()
    return ir_text[start: ir_text.index("\n}\n", start)]


SAXPY = """@schedule(vectorize(i, 8))
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
"""


def test_saxpy_unit_body_is_contiguous_and_general_body_gathers():
    text = _compile(SAXPY, "llvm")
    unit, general = _function(text, "saxpy__unit"), _function(text, "saxpy__any")
    assert "load <8 x float>" in unit and "store <8 x float>" in unit
    assert "llvm.fma.v8f32" in unit or ("fmul contract <8 x float>" in unit and "fadd contract <8 x float>" in unit)
    assert "align 4" in unit and "align 32" not in unit  # numpy promises the element size only
    assert "masked" not in unit
    assert "@llvm.masked.gather.v8f32.v8p0" in general and "@llvm.masked.scatter.v8f32.v8p0" in general
    optimized = _compile(SAXPY, "llvm", opt_level=3)  # still valid after the optimizer
    assert "<8 x float>" in optimized


def test_masked_tail_dot_uses_masked_loads_and_a_reassociating_reduction():
    text = _compile(KERNELS[KERNELS.index("@options(reassociate=True)\n@schedule(vectorize(i, 8, tail=mask))\ndef dot"):]
                    .split("\n\n@schedule")[0], "llvm")
    unit = _function(text, "dot__unit")
    assert re.search(r"call <8 x float> @llvm\.masked\.load\.v8f32\.p0\(ptr align 4 ", unit)
    assert re.search(r"call reassoc contract float @llvm\.vector\.reduce\.fadd\.v8f32\(float -0\.0", unit)
    assert "@llvm.masked.gather.v8f32.v8p0" in _function(text, "dot__any")


def test_reductions_use_nan_propagating_and_integer_intrinsics():
    source = float_kernels("f32", 8) + int_kernels("u8", 16)
    text = _compile(source, "llvm")
    for name in ("fminimum.v8f32", "fmaximum.v8f32", "fmul.v8f32", "add.v16i8", "mul.v16i8",
                 "umin.v16i8", "umax.v16i8"):
        assert f"@llvm.vector.reduce.{name}(" in text
    math = _function(text, "math_f32__unit")
    for name in ("exp", "log", "sqrt", "floor", "ceil", "fabs", "tanh"):
        assert f"@llvm.{name}.v8f32(" in math
    # saturating casts as selects around plain conversions (see test_vector_float_to_int_casts_stay_vectors)
    assert "fptosi <8 x float>" in text and "fptoui <8 x float>" in text and "sat.v8" not in text
    assert "@llvm.minimum.v8f32(" in text and "fcmp une <8 x float>" in text


@pytest.mark.skipif(not AVX2, reason="needs an AVX2+FMA host")
def test_vectorized_saxpy_loop_is_vfmadd_on_ymm_without_spills():
    """The contiguous loop: packed loads/stores and FMAs on ymm, nothing on the stack.
    (The general body's gather loop is scalarized by LLVM on this CPU; not checked.)"""
    asm = _compile(SAXPY, "asm", opt_level=3)
    contiguous = [body for body in single_block_loops(asm) if re.search(r"vfmadd\w+\s.*%ymm", body)
                  and re.search(r"vmovups\s.*%ymm", body) and "vinsertps" not in body]
    assert contiguous, "no loop of packed loads and vfmadd on ymm registers"
    for body in contiguous:
        assert "(%rsp)" not in body, f"a loop spills to the stack:\n{body}"


def test_vector_float_to_int_casts_stay_vectors():
    # LLVM scalarizes llvm.fptosi.sat on x86 vectors (a branchy conversion per lane);
    # the back-end writes the saturation as selects around one vector conversion.
    text = """@schedule(vectorize(i, 8))
def to_int(x: f32[N], n: i32[N], u: u8[N]):
    for i in range(N):
        n[i] = i32(x[i])
        u[i] = u8(x[i])
"""
    ir_text = _compile(text, "llvm")
    assert "fptosi <8 x float>" in ir_text and "fptoui <8 x float>" in ir_text
    assert "sat.v8" not in ir_text and "llvm.fptosi.sat.i32.f32" in ir_text  # the scalar tail keeps the intrinsic
