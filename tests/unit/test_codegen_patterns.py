"""FileCheck-style checks on generated LLVM IR and assembly (patterns, not whole
files: LLVM's text changes between versions). Every module looked at is verified."""

from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.backends.target import host_target
from dsl.grammar.diagnostics import Source
from dsl.lowering.interpret import run_kernel
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


GUARDED_CONVERSION = """
@schedule(vectorize(i, 8))
def to_i8(x: f32[8], y: i8[8]):
    for i in range(8):
        v = x[i] * 2.0
        y[i] = i8(i32(v)) if abs(v) < 2147483648.0 else i8(-1)
"""


def test_a_conversion_guarded_by_its_range_does_not_saturate(tmp_path):
    """`abs(v) < 2^31` around i32(v): a plain fptosi (the select discards the
    lanes outside), where an unguarded conversion saturates with selects."""
    job = compile_source(Source("g.tk", GUARDED_CONVERSION), CompileOptions(opt_level=0), stop_after="llvm")
    text = str(job.llvm)
    assert "fptosi <8 x float>" in text and "i32 2147483647" not in text
    unguarded = GUARDED_CONVERSION.replace("if abs(v) < 2147483648.0 else i8(-1)", "")
    job = compile_source(Source("g.tk", unguarded), CompileOptions(opt_level=0), stop_after="llvm")
    assert "i32 2147483647" in str(job.llvm)  # the saturation's MAX
    job = compile_source(Source("g.tk", GUARDED_CONVERSION), CompileOptions(), stop_after="obj")
    lib = dsl.load(str(link_shared(job.obj, tmp_path / "g.so", job.target)))
    x = np.array([np.nan, np.inf, -np.inf, 1073741760.0, -1073741824.0, 1.1e9, 3.7, -300.5], np.float32)
    y = np.empty(8, np.int8)
    lib.to_i8(x, y)
    v = x.astype(np.float64) * 2
    want = [np.int8(np.int32(a) & 0xFF) if abs(a) < 2 ** 31 else -1 for a in v]
    np.testing.assert_array_equal(y, np.array(want, np.int8))


@pytest.mark.parametrize("value, guard, saturates", [
    ("(v + 12582912.0) - 12582912.0", "abs(v) < 4194304.0", False),  # ggml's nearest_int
    ("v * 2.0 + 1.0", "abs(v) < 1000.0", False),
    ("v", "abs(v) < 4294967296.0", True),  # 2^32: the guard does not keep v within i32
    ("v + w", "abs(v) < 1000.0", True),  # nothing bounds w
])
def test_a_bound_carries_through_arithmetic_on_the_guarded_value(value, guard, saturates):
    text = f"""
@schedule(vectorize(i, 8))
def k(x: f32[8], z: f32[8], y: i32[8]):
    for i in range(8):
        v = x[i]
        w = z[i]
        y[i] = i32({value}) if {guard} else i32(-7)
"""
    llvm_ir = str(compile_source(Source("b.tk", text), CompileOptions(opt_level=0), stop_after="llvm").llvm)
    assert ("i32 2147483647" in llvm_ir) == saturates


def test_nearest_int_guarded_matches_the_interpreter_at_its_edges(tmp_path):
    text = """
@schedule(vectorize(i, 8))
def k(x: f32[N], y: i32[N]):
    for i in range(N):
        v = x[i]
        if_nan = i32(0) if v != v else i32(-4194304)
        y[i] = i32((v + 12582912.0) - 12582912.0) if abs(v) < 4194304.0 else if_nan
"""
    edges = [np.nan, np.inf, -np.inf, 4194304.0, -4194304.0, 4194303.5, -4194303.5, 4194303.75, 2.5, -2.5,
             0.5, -0.5, 1e-30, -0.0, 3e9, -3e9, 8388607.0, 1.5]
    x = np.array(edges * 2, np.float32)
    job = compile_source(Source("n.tk", text), CompileOptions(), stop_after="obj")
    lib = dsl.load(str(link_shared(job.obj, tmp_path / "n.so", job.target)))
    y = np.empty(x.size, np.int32)
    lib.k(x, y)
    want = np.empty_like(y)
    kernel = compile_source(Source("n.tk", text), CompileOptions(), stop_after="loops").program.kernels[-1]
    run_kernel(kernel, {"x": x, "y": want})
    np.testing.assert_array_equal(y, want)
