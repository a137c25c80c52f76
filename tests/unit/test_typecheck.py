"""The type checker's rules for values: local inference, weak literals, implicit
widening, conditions, casts, intrinsics and operators. Checked on the printed
kernel IR (`dsl.lowering.printer`) and, where a value matters, by running the
loop IR in the reference interpreter."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.options import CompileOptions
from dsl.pipeline import compile_file


from tk_program import errors, run, typed






def body(*lines: str) -> str:
    """A kernel over a few typed vectors whose body is `lines` inside `for i in range(N)`."""
    params = ("x32: f32[N], x64: f64[N], a8: i8[N], a16: i16[N], a32: i32[N], a64: i64[N], "
              "u8: u8[N], u32: u32[N], flags: bool[N], o32: f32[N], o64: f64[N], oi32: i32[N], "
              "oi64: i64[N], oi16: i16[N], ou8: u8[N], ob: bool[N]")
    inner = "".join(f"        {line}\n" for line in lines)
    return f"def k({params}):\n    for i in range(N):\n{inner}"


# ------------------------------------------------------------ local inference


def test_local_takes_the_type_of_its_first_real_value():
    text = typed("""
def k(x: f64[N], y: f64[N]):
    acc = 0.0
    s = acc + 1.0
    for i in range(N):
        acc = acc * 0.5 + x[i]
    y[0] = acc + s
""")
    assert "acc: f64 = 0.0" in text and "s: f64 = acc + 1.0" in text
    assert "f32" not in text  # nothing computed in f32 on the way


def test_local_inference_follows_chains_of_literal_locals():
    text = typed("""
def k(x: f64[N], y: f64[N]):
    a = 0.0
    b = 0.0
    for i in range(N):
        b += a
        a += x[i]
    y[0] = b
""")
    assert "a: f64 = 0.0" in text and "b: f64 = 0.0" in text


def test_literal_first_local_keeps_f64_precision_numerically():
    text = """
def k(x: f64[N], y: f64[N]):
    acc = 0.0
    for i in range(N):
        acc = acc * 0.5 + x[i]
    y[0] = acc
"""
    x = np.array([1e-9, 1.0, 1e8 + 1], np.float64)
    y = np.zeros(3, np.float64)
    run(text, x=x, y=y)
    expected = 0.0
    for v in x:
        expected = expected * 0.5 + v
    assert y[0] == expected


def test_local_given_float_literal_then_int_value_is_an_error():
    message = errors(body("t = 0.0", "t = a32[i]", "o32[i] = t"))
    assert "t.tk:4:9: error: local 't' was first given a float literal, now a value of type i32" in message
    assert "note: initialise it with i32(...)" in message


def test_counter_from_int_literal_is_i64():
    message = errors(body("t = 0", "t += 1", "o32[i] = t"))
    assert "store to 'o32': cannot convert i64 to f32 implicitly" in message


def test_named_constant_is_the_literal_itself():
    text = typed(body("scale = 0.1", "o64[i] = x64[i] * scale", "o32[i] = x32[i] * scale"))
    assert "o64[i] = x64[i] * 0.1" in text and "o32[i] = x32[i] * 0.1" in text
    assert "scale" not in text


def test_named_constant_is_checked_where_it_is_used():
    message = errors(body("t = 0.5", "big = 300", "oi32[i] = t", "a8[i] = big"))
    assert "t.tk:5:19: error: float literal 0.5 cannot be used as i32" in message
    assert "t.tk:6:17: error: integer literal 300 does not fit in i8" in message


# ------------------------------------------------------------- weak literals


def test_weak_literals_take_the_other_operand_type():
    text = typed(body("o32[i] = x32[i] * 2", "oi16[i] = a16[i] + 1", "o64[i] = x64[i] / 3"))
    assert "o32[i] = x32[i] * 2.0" in text
    assert "oi16[i] = a16[i] + 1" in text
    assert "o64[i] = x64[i] / 3.0" in text
    assert "f64(" not in text and "i64(" not in text


def test_literal_that_does_not_fit_is_an_error():
    message = errors(body("oi32[i] = a32[i] + 3000000000"))
    assert "integer literal 3000000000 does not fit in i32" in message


@pytest.mark.parametrize("literal", ["3.4028235e38", "-3.4028235e38", "3.4028234663852886e38"])
def test_f32_max_literal_is_accepted_and_rounds_to_the_f32_max(literal, tmp_path):
    """3.4028235e38, the shortest decimal of f32's max, lies above the max
    itself but rounds to it; only values that round to infinity are refused."""
    program = f"def k(out: f32[N]):\n    for i in range(N):\n        out[i] = {literal}\n"
    out = np.zeros(3, np.float32)
    run(program, out=out)
    assert (out == np.float32(literal)).all() and np.isfinite(out).all()
    (tmp_path / "lit.tk").write_text(program)
    job = compile_file(tmp_path / "lit.tk", CompileOptions(), stop_after="obj")
    native = np.zeros(3, np.float32)
    dsl.load(link_shared(job.obj, tmp_path / "lit.so", job.target)).k(native)
    assert (native == out).all()


@pytest.mark.parametrize("literal, column", [("-1e39", 18), ("3.4028236e38", 18), ("-3.40282357e38", 18)])
def test_f32_literal_that_rounds_to_infinity_is_a_located_error(literal, column):
    message = errors(f"def k(out: f32[N]):\n    for i in range(N):\n        out[i] = {literal}\n")
    assert f"t.tk:3:{column}: error: literal" in message and "is too large for f32" in message
    assert "^" in message


@pytest.mark.parametrize("expr, expected", [
    ("oi64[i] = a32[i] + a64[i]", "oi64[i] = i64(a32[i]) + a64[i]"),
    ("oi16[i] = u8[i] + a8[i]", "oi16[i] = i16(u8[i]) + i16(a8[i])"),
    ("o64[i] = x32[i] + x64[i]", "o64[i] = f64(x32[i]) + x64[i]"),
    ("o32[i] = u8[i] + x32[i]", "o32[i] = f32(u8[i]) + x32[i]"),
    ("o64[i] = a32[i] * x64[i]", "o64[i] = f64(a32[i]) * x64[i]"),
])
def test_mixed_operands_widen_to_the_common_type(expr, expected):
    assert expected in typed(body(expr))


@pytest.mark.parametrize("store", [
    "o64[i] = x32[i]", "oi32[i] = a16[i]", "oi64[i] = u32[i]", "o32[i] = a16[i]",
    "o64[i] = a32[i]", "oi32[i] = flags[i]", "o32[i] = u8[i]",
])
def test_lossless_widening_is_implicit(store):
    typed(body(store))


@pytest.mark.parametrize("store, source, target", [
    ("o32[i] = x64[i]", "f64", "f32"),
    ("o32[i] = a32[i]", "i32", "f32"),
    ("o64[i] = a64[i]", "i64", "f64"),
    ("oi32[i] = u32[i]", "u32", "i32"),
    ("ou8[i] = a8[i]", "i8", "u8"),
    ("oi32[i] = x32[i]", "f32", "i32"),
    ("ob[i] = a32[i]", "i32", "bool"),
])
def test_lossy_conversion_needs_a_cast(store, source, target):
    message = errors(body(store))
    assert f"cannot convert {source} to {target} implicitly (it could lose precision)" in message
    assert f"note: cast explicitly, e.g. {target}(...)" in message


def test_no_common_type_is_an_error():
    message = errors(body("o64[i] = x32[i] * a64[i]", "o64[i] = i * 0.5"))
    assert "operands of '*' have types f32 and i64 with no lossless common type" in message
    assert "operands of '*' have types i64 and a float literal with no lossless common type" in message
    assert "note: cast one side explicitly" in message


# ------------------------------------------------------- conditions and logic


def test_conditions_must_be_bool():
    message = errors(body("if x32[i]:", "    o32[i] = 0.0", "if i:", "    o32[i] = 1.0",
                          "ob[i] = not a32[i]"))
    assert "condition of 'if' must be a bool, not f32" in message
    assert "condition of 'if' must be a bool, not i64" in message
    assert "operand of 'not' must be a bool, not i32" in message
    assert message.count("note: compare explicitly, e.g. x != 0") >= 2


def test_and_or_not_build_bool_expressions():
    text = typed(body("ob[i] = x32[i] > 0.0 and not (a32[i] == 0) or flags[i]"))
    assert "ob[i] = x32[i] > 0.0 and not a32[i] == 0 or flags[i]" in text


def test_conditional_expression_unifies_its_branches():
    text = typed(body("o64[i] = x32[i] if flags[i] else x64[i]"))
    assert "o64[i] = (f64(x32[i]) if flags[i] else x64[i])" in text
    message = errors(body("o32[i] = x32[i] if flags[i] else a64[i]"))
    assert "operands of 'if-else' have types f32 and i64 with no lossless common type" in message


# ------------------------------------------------------------ casts, intrinsics


def test_casts():
    text = typed(body("o32[i] = f32(i)", "oi32[i] = i32(x32[i])", "ob[i] = bool(a32[i])"))
    assert "o32[i] = f32(i)" in text and "oi32[i] = i32(x32[i])" in text
    message = errors(body("o32[i] = f16(x32[i])", "o32[i] = f32(x32[i], 1.0)"))
    assert "f16 is a storage type" in message
    assert "f32(...) takes exactly one argument" in message


def test_float_intrinsics():
    names = ("exp", "log", "sqrt", "rsqrt", "tanh", "erf", "floor", "ceil", "rint", "abs")
    text = typed(body(*(f"o32[i] = {n}(x32[i])" for n in names), "o32[i] = fma(x32[i], 2.0, 1)",
                      "o32[i] = max(x32[i], 0) + min(x32[i], 1, 2)", "oi32[i] = abs(a32[i])"))
    for n in names:
        assert f"o32[i] = {n}(x32[i])" in text
    assert "fma(x32[i], 2.0, 1.0)" in text and "max(x32[i], 0.0) + min(min(x32[i], 1.0), 2.0)" in text


def test_intrinsic_arity_and_type_errors():
    message = errors(body("o32[i] = exp(x32[i], 1.0)", "o32[i] = sqrt()", "o32[i] = fma(x32[i], 1.0)",
                          "o32[i] = exp(a32[i])", "o32[i] = max(x32[i])", "o32[i] = expp(x32[i])"))
    assert "exp() takes exactly one argument (2 given)" in message
    assert "sqrt() takes exactly one argument (0 given)" in message
    assert "fma() takes exactly three arguments (2 given)" in message
    assert "exp() needs a float argument, not i32" in message
    assert "max(...) has no index to reduce over" in message
    assert "unknown function 'expp'" in message and "did you mean 'exp'?" in message


def test_intrinsics_of_literals_are_literals():
    text = typed(body("o32[i] = x32[i] * abs(-2) + sqrt(4) + max(1, 2.5)", "o64[i] = x64[i] * sqrt(2.0)",
                      "a8[i] = a8[i] + min(4, 7)"))
    assert "o32[i] = x32[i] * 2.0 + 2.0 + 2.5" in text
    assert "o64[i] = x64[i] * 1.4142135623730951" in text  # folded in f64, not through f32
    assert "a8[i] = a8[i] + 4" in text


def test_rounding_of_literals_is_the_hardware_s():
    text = typed(body("o64[i] = x64[i] * rint(2.5) + rint(3.5) + floor(-0.5) + ceil(0.5)",
                      "o64[i] = x64[i] + rint(-0.4)"))
    assert "o64[i] = x64[i] * 2.0 + 4.0 + -1.0 + 1.0" in text  # ties to even
    assert "o64[i] = x64[i] + -0.0" in text  # the sign of a zero kept


def test_power_with_small_constant_exponent():
    text = typed(body("o32[i] = x32[i] ** 3", "o32[i] = x32[i] ** 0", "oi32[i] = a32[i] ** 2"))
    assert "o32[i] = x32[i] * x32[i] * x32[i]" in text
    assert "o32[i] = 1.0" in text and "oi32[i] = a32[i] * a32[i]" in text
    message = errors(body("o32[i] = x32[i] ** 2.5", "o32[i] = x32[i] ** 17", "o32[i] = x32[i] ** i"))
    assert message.count("'**' needs a constant integer exponent from 0 to 16") == 3


def test_power_numerically():
    x = np.array([1.5, -2.0, 3.0], np.float32)
    out = np.zeros(3, np.float32)
    run(body("o32[i] = x32[i] ** 3"), **vectors(x32=x, o32=out))
    np.testing.assert_array_equal(out, x * x * x)


def test_bitwise_and_shifts_on_integers():
    text = typed(body("oi32[i] = (a32[i] << 2) | (a32[i] >> 1) ^ ~a32[i] & 3", "oi32[i] = a32[i] << a8[i]"))
    assert "a32[i] << 2 | a32[i] >> 1 ^ ~a32[i] & 3" in text
    assert "a32[i] << i32(a8[i])" in text


def test_bitwise_and_shifts_on_floats_are_rejected():
    message = errors(body("o32[i] = x32[i] & x32[i]", "o32[i] = x32[i] << 2", "o32[i] = ~x32[i]",
                          "oi32[i] = a32[i] << -1"))
    assert "'&' needs integer operands, got f32" in message
    assert "'<<' needs integer operands" in message
    assert "'~' needs an integer operand, not f32" in message
    assert "negative shift count" in message


def vectors(**given) -> dict:
    """Arguments for `body()` kernels: the given arrays, zeros of length 3 elsewhere."""
    dtypes = {"x32": np.float32, "x64": np.float64, "a8": np.int8, "a16": np.int16, "a32": np.int32,
              "a64": np.int64, "u8": np.uint8, "u32": np.uint32, "flags": np.bool_, "o32": np.float32,
              "o64": np.float64, "oi32": np.int32, "oi64": np.int64, "oi16": np.int16, "ou8": np.uint8,
              "ob": np.bool_}
    return {name: given.get(name, np.zeros(3, dtype)) for name, dtype in dtypes.items()}


def test_mixed_integer_arithmetic_numerically():
    u = np.array([200, 255, 0], np.uint8)
    a = np.array([-128, 127, -1], np.int8)
    out = np.zeros(3, np.int16)
    run(body("oi16[i] = u8[i] + a8[i]"), **vectors(u8=u, a8=a, oi16=out))
    np.testing.assert_array_equal(out, u.astype(np.int16) + a.astype(np.int16))
