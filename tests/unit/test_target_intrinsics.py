"""Target intrinsics (`x86.maddubs`, `x86.madd`, `x86.sign`, `arm.sdot`): the type checker
refuses them where the target lacks the instruction, the portable forms fall
back to plain arithmetic, the interpreter and compiled code agree with numpy
(saturation included), and the asm has the instructions."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl.lowering.interpret import run_kernel
from dsl.grammar.diagnostics import CompileError, Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

PAIRS = """
@schedule(vectorize(l))
def k(a: u8[32], b: i8[32], c: i16[32], y: i16[16], z: i32[16]):
    for l in range(16):
        y[l] = {maddubs}(a[2 * l], b[2 * l], a[2 * l + 1], b[2 * l + 1])
        z[l] = {madd}(c[2 * l], c[2 * l + 1], c[2 * l + 1], 3)
"""
QUADS = """
@schedule(vectorize(l))
def k(a: i8[32], b: i8[32], acc: i32[8], z: i32[8]):
    for l in range(8):
        z[l] = {sdot}(acc[l], a[4 * l], b[4 * l], a[4 * l + 1], b[4 * l + 1],
                      a[4 * l + 2], b[4 * l + 2], a[4 * l + 3], b[4 * l + 3])
"""
SIGNS = """
@schedule(vectorize(l))
def k(a: i8[64], b: i8[64], y: i8[64]):
    for l in range(64):
        y[l] = {sign}(a[l], b[l])
"""
STRICT = {"maddubs": "x86.maddubs", "madd": "x86.madd", "sign": "x86.sign", "sdot": "arm.sdot"}
PORTABLE = {"maddubs": "maddubs", "madd": "madd", "sign": "sign", "sdot": "sdot"}
ARM = "aarch64-unknown-linux-gnu"


def _job(text: str, stage: str, **options):
    return compile_source(Source("t.tk", text), CompileOptions(**options), stop_after=stage)


def _pair_data(seed: int = 0):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, 32).astype(np.uint8)
    b = rng.integers(-128, 128, 32).astype(np.int8)
    a[:4], b[:4] = 255, [127, 127, -128, -128]  # saturates both ways
    c = rng.integers(-32768, 32768, 32).astype(np.int16)
    c[:2] = -32768
    return a, b, c


def _pair_expected(a, b, c):
    wide = a.astype(np.int32) * b.astype(np.int32)
    y = np.clip(wide[0::2] + wide[1::2], -32768, 32767).astype(np.int16)
    z = (c[0::2].astype(np.int64) * c[1::2] + c[1::2].astype(np.int64) * 3).astype(np.int32)
    return y, z


def _sign_data(seed: int = 2):
    """a and b with every edge: a = -128 (whose negation wraps), 0, 127; b < 0, 0, > 0."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, 64).astype(np.int8)
    b = rng.integers(-128, 128, 64).astype(np.int8)
    a[:9] = np.repeat(np.array([-128, 0, 127], np.int8), 3)
    b[:9] = np.tile(np.array([-1, 0, 5], np.int8), 3)
    b[9:12] = 0
    want = np.where(b > 0, a, np.where(b < 0, (-a.astype(np.int16)).astype(np.int8), 0)).astype(np.int8)
    return a, b, want


def _quad_data(seed: int = 1):
    rng = np.random.default_rng(seed)
    a = rng.integers(-128, 128, 32).astype(np.int8)
    b = rng.integers(-128, 128, 32).astype(np.int8)
    acc = rng.integers(-2**31, 2**31, 8).astype(np.int32)
    acc[0] = 2**31 - 1  # wraps
    prod = (a.astype(np.int64) * b).reshape(8, 4).sum(1)
    return a, b, acc, (acc + prod).astype(np.int32)


@pytest.mark.parametrize("names", [STRICT, PORTABLE])
def test_pairs_in_the_interpreter_match_numpy(names):
    a, b, c = _pair_data()
    y, z = np.zeros(16, np.int16), np.zeros(16, np.int32)
    run_kernel(_job(PAIRS.format(**names), "guard", cpu="znver3").program.kernels[0],
               {"a": a, "b": b, "c": c, "y": y, "z": z})
    want_y, want_z = _pair_expected(a, b, c)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


@pytest.mark.parametrize("names", [STRICT, PORTABLE])
def test_signs_in_the_interpreter_match_numpy(names):
    a, b, want = _sign_data()
    y = np.zeros(64, np.int8)
    run_kernel(_job(SIGNS.format(**names), "guard", cpu="znver3").program.kernels[0], {"a": a, "b": b, "y": y})
    np.testing.assert_array_equal(y, want)


@pytest.mark.parametrize("cpu", ["znver3", "x86-64"])
def test_compiled_signs_match_numpy(cpu, tmp_path):
    from dsl.backends.link import link_shared

    job = _job(SIGNS.format(**PORTABLE), "obj", cpu=cpu)
    assert ("llvm.x86.avx2.psign.b" in str(job.llvm)) == (cpu == "znver3")  # the fallback elsewhere
    lib = dsl.load(link_shared(job.obj, tmp_path / "signs.so", job.target))
    a, b, want = _sign_data(5)
    y = np.zeros(64, np.int8)
    lib.k(a, b, y)
    np.testing.assert_array_equal(y, want)


def test_quads_in_the_interpreter_match_numpy():
    a, b, acc, want = _quad_data()
    z = np.zeros(8, np.int32)
    run_kernel(_job(QUADS.format(**STRICT), "guard", triple=ARM).program.kernels[0],
               {"a": a, "b": b, "acc": acc, "z": z})
    np.testing.assert_array_equal(z, want)


@pytest.mark.parametrize("cpu", ["znver3", "x86-64"])
def test_compiled_pairs_match_numpy(cpu, tmp_path):
    from dsl.backends.link import link_shared

    job = _job(PAIRS.format(**PORTABLE), "obj", cpu=cpu)
    lib = dsl.load(link_shared(job.obj, tmp_path / "pairs.so", job.target))
    a, b, c = _pair_data(3)
    y, z = np.zeros(16, np.int16), np.zeros(16, np.int32)
    lib.k(a, b, c, y, z)
    want_y, want_z = _pair_expected(a, b, c)
    np.testing.assert_array_equal(y, want_y)
    np.testing.assert_array_equal(z, want_z)


def test_x86_asm_has_the_instructions():
    job = _job(PAIRS.format(**STRICT), "asm", cpu="znver3")
    assert "vpmaddubsw" in job.asm and "vpmaddwd" in job.asm
    llvm = str(job.llvm)
    # unit strides: the pairs a[2l], a[2l + 1] are one contiguous 32-byte load, as are c's
    assert llvm.count("load <32 x i8>") == 2 and "load <32 x i16>" in llvm
    assert "llvm.x86.avx2.pmadd.ub.sw" in llvm and "llvm.x86.avx2.pmadd.wd" in llvm


def test_portable_pairs_without_avx2_are_plain_arithmetic():
    job = _job(PAIRS.format(**PORTABLE), "llvm", cpu="x86-64")
    assert "pmadd" not in str(job.llvm)


def test_arm_asm_has_sdot_with_dotprod_and_not_without():
    strict = _job(QUADS.format(**STRICT), "asm", triple=ARM, cpu="neoverse-n1")
    assert "sdot" in strict.asm and "llvm.aarch64.neon.sdot" in str(strict.llvm)
    portable = _job(QUADS.format(**PORTABLE), "asm", triple=ARM, cpu="generic", features="+neon")
    assert "sdot" not in portable.asm


@pytest.mark.parametrize("options, name, needs", [
    ({"cpu": "x86-64"}, "x86.maddubs", "AVX2"),
    ({"cpu": "x86-64"}, "x86.sign", "AVX2"),
    ({"triple": ARM, "cpu": "neoverse-n1"}, "x86.maddubs", "AVX2"),
    ({"triple": ARM, "cpu": "generic", "features": "+neon"}, "arm.sdot", "+dotprod"),
])
def test_strict_form_is_refused_without_the_feature(options, name, needs):
    text = {"x86.maddubs": PAIRS, "x86.sign": SIGNS, "arm.sdot": QUADS}[name].format(**STRICT)
    with pytest.raises(CompileError) as info:
        _job(text, "typed", **options)
    message = info.value.render()
    assert f"t.tk:5:16: error: {name} needs" in message and needs in message
    assert f"target is {'aarch64' if 'triple' in options else 'x86_64'}" in message
    assert "portable form" in message


@pytest.mark.parametrize("call, message", [
    ("x86.maddubs(a[0], b[0], a[1])", "x86.maddubs() takes exactly 4 arguments (3 given)"),
    ("x86.maddubs(b[0], b[0], a[1], b[1])", "argument 1 of x86.maddubs() must be u8, not i8"),
    ("x86.maddub(a[0], b[0], a[1], b[1])", "unknown target intrinsic 'x86.maddub'"),
    ("x86.sign(a[0], b[0])", "argument 1 of x86.sign() must be i8, not u8"),
])
def test_bad_calls_are_located(call, message):
    text = f"def k(a: u8[4], b: i8[4], y: i16[1]):\n    y[0] = {call}\n"
    with pytest.raises(CompileError) as info:
        _job(text, "typed", cpu="znver3")
    assert message in info.value.render()
    assert "t.tk:2:" in info.value.render()


def test_printed_ir_names_the_intrinsic():
    job = _job(PAIRS.format(**STRICT), "typed", cpu="znver3")
    from dsl.lowering.printer import format_kernel

    assert "x86.maddubs(a[2 * l], b[2 * l], a[2 * l + 1], b[2 * l + 1])" in format_kernel(job.typed.kernels[0])


def _function_bodies(asm: str) -> dict[str, str]:
    """Each function's asm text, by its label."""
    import re

    parts = re.split(r"^([A-Za-z_][\w.]*):\n", asm, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


@pytest.mark.parametrize("module, options, wanted", [
    ("quant_dot", {"cpu": "znver3"}, ("vpmaddubsw", "vpmaddwd")),  # and vpsignb in q8_0's
    ("quant_dot_arm", {"triple": ARM, "cpu": "neoverse-n1"}, ("sdot",)),
    ("quant_dot_arm", {"triple": ARM, "cpu": "cortex-a72", "features": "+neon"}, ()),
])
def test_stdlib_quant_dots_use_the_instructions(module, options, wanted):
    from dsl.pipeline import compile_file

    path = Path(__file__).resolve().parents[2] / "stdlib" / f"{module}.tk"
    bodies = _function_bodies(compile_file(path, CompileOptions(**options), stop_after="asm").asm)
    for qtype in ("q4_k", "q5_k", "q6_k", "q8_0"):
        body = bodies[f"qdot_{qtype}__unit__par0__body"]  # the loop nest of unit-stride calls
        for instruction in wanted:
            assert instruction in body, f"{module}.qdot_{qtype}: no {instruction}"
        if not wanted:
            assert "sdot" not in body
    if module == "quant_dot":
        assert "vpsignb" in bodies["qdot_q8_0__unit__par0__body"]


def _ramp_index(base: int, stride: int, lanes: int):
    from dsl.lowering import ir
    from dsl.lowering.types import I64

    return ir.Binary("+", ir.Const(base, I64), ir.Ramp(ir.Const(0, I64), stride, lanes), I64)


def test_interleave_joins_adjacent_loads_into_one_contiguous_load():
    from dsl.lowering import ir
    from dsl.lowering.interleave import interleave
    from dsl.lowering.types import BY_NAME
    from dsl.lowering.vector import lanes_of

    u8 = BY_NAME["u8"]
    w = ir.TensorParam("w", u8, (64,), is_output=False)
    mask = ir.Const(15, u8)
    parts = [ir.Binary("&", ir.Load(w, (_ramp_index(16 + j, 2, 8),), u8, safe=True), mask, u8) for j in (0, 1)]
    wide = interleave(parts)
    assert wide is not None and lanes_of(wide) == 16
    load = wide.lhs
    assert load.safe and load.indices[0].rhs.stride == 1 and load.indices[0].lhs.value == 16
    # offsets 0 and 2 on a stride of 4: a stride-2 ramp of twice the lanes
    quads = [ir.Load(w, (_ramp_index(3 + j, 4, 8),), u8) for j in (0, 2)]
    assert interleave(quads).indices[0].rhs.stride == 2
    # not adjacent (offsets 0 and 3 on a stride of 2), or a vector local: no wide form
    assert interleave([ir.Load(w, (_ramp_index(j, 2, 8),), u8) for j in (0, 3)]) is None
    local = ir.Var(ir.Sym("v", u8, "local", lanes=8))
    assert interleave([local, local]) is None
