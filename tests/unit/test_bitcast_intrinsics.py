"""`bits(x)` and `from_bits(i)`: the same bits read as the other type
(f32 <-> i32, f64 <-> i64), in the type checker, the interpreter (scalar and
vector) and compiled code."""

from __future__ import annotations

import numpy as np
import pytest
from tk_program import compile_tk, errors, run, typed

import dsl
from dsl.options import CompileOptions

ROUND_TRIP = """
@options(reassociate=True)
def k(x: {f}[N], b: {i}[N], y: {f}[N]):
    for i in range(N):
        b[i] = bits(x[i])
        y[i] = from_bits((bits(x[i]) & ~{exp_mask}) | {one_bits})
"""
F32_PROGRAM = ROUND_TRIP.format(f="f32", i="i32", exp_mask="0x7f800000", one_bits="0x3f800000")
F64_PROGRAM = ROUND_TRIP.format(f="f64", i="i64", exp_mask="0x7ff0000000000000", one_bits="0x3ff0000000000000")
SPECIALS = [1.0, 3.0, -5.5, np.inf, -np.inf, np.nan, 1e-40, -0.0, 0.3, 6.5e4, 1e-45]


def _expected(x: np.ndarray, int_type, exp_mask: int, one_bits: int):
    b = x.view(int_type)
    mantissa = (b & ~int_type(exp_mask)) | int_type(one_bits)
    return b, mantissa.view(x.dtype)


@pytest.mark.parametrize("program, ftype, itype, exp_mask, one_bits", [
    (F32_PROGRAM, np.float32, np.int32, 0x7f800000, 0x3f800000),
    (F64_PROGRAM, np.float64, np.int64, 0x7ff0000000000000, 0x3ff0000000000000),
])
@pytest.mark.parametrize("interpret", [False, True])
def test_bits_round_trip_matches_numpy_views(program, ftype, itype, exp_mask, one_bits, interpret, tmp_path):
    x = np.array(SPECIALS * 3, ftype)  # 33 elements: vector body and tail
    want_b, want_y = _expected(x, itype, exp_mask, one_bits)
    b, y = np.zeros_like(want_b), np.zeros_like(x)
    if interpret:
        run(program, x=x, b=b, y=y)
    else:
        path = tmp_path / "bits.tk"
        path.write_text(program)
        from dsl.backends.link import link_shared
        from dsl.pipeline import compile_file

        job = compile_file(path, CompileOptions(cpu="znver3"), stop_after="obj")
        dsl.load(link_shared(job.obj, tmp_path / "bits.so", job.target)).k(x, b, y)
    np.testing.assert_array_equal(b, want_b)
    np.testing.assert_array_equal(y.view(itype), want_y.view(itype))


def test_vectorized_bits_in_the_interpreter():
    program = F32_PROGRAM.replace("@options(reassociate=True)", "@schedule(vectorize(i, 8, tail=mask))")
    x = np.array(SPECIALS, np.float32)
    b, y = np.zeros(len(x), np.int32), np.zeros_like(x)
    run(program, x=x, b=b, y=y)
    np.testing.assert_array_equal(b, x.view(np.int32))


def test_types_and_printing():
    text = typed("def k(x: f64[N], y: f32[N], b: i64[N]):\n"
                 "    for i in range(N):\n"
                 "        b[i] = bits(x[i])\n"
                 "        y[i] = from_bits(u32(b[i]) >> 9)\n")
    assert "bits(x[i])" in text and "from_bits(" in text
    assert compile_tk("def k(y: f32[N]):\n    for i in range(N):\n        y[i] = from_bits(i32(1))\n", "llvm")


@pytest.mark.parametrize("expr, message", [
    ("bits(1.5)", "bits() of a literal has no width"),
    ("from_bits(7)", "from_bits() of a literal has no width"),
    ("bits(n[i])", "bits() needs an f32 or f64 argument, not i16"),
    ("from_bits(x[i])", "from_bits() needs a 32- or 64-bit int argument, not f32"),
    ("bits(x[i], x[i])", "bits() takes exactly one argument (2 given)"),
])
def test_bad_arguments_are_located_errors(expr, message):
    text = errors(f"def k(x: f32[N], n: i16[N], y: f32[N]):\n    for i in range(N):\n        y[i] = f32({expr})\n")
    assert message in text
    assert "t.tk:3:" in text
