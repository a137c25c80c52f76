"""dsl.ops.fused (elementwise chains in one pass) against the same chain in
numpy, over shapes, broadcasting, strided views, numbers and out=; and its
messages for mistakes in the expression."""

from __future__ import annotations

import re
import sys

import numpy as np
import pytest

import dsl
import dsl.ops.fusion

fused_module = sys.modules["dsl.ops.fusion"]

RNG = np.random.default_rng(7)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def silu(x):
    return x / (1 + np.exp(-x.astype(np.float64)))


CHAINS = [
    # expression, numpy of the same (float64), operand maker
    ("silu(a) * b + c", lambda a, b, c: silu(a) * b + c),
    ("exp(a - b) / (1 + c * c)", lambda a, b, c: np.exp(a - b.astype(np.float64)) / (1 + c.astype(np.float64) ** 2)),
    ("maximum(a, b) - minimum(b, c) + relu(-a)", lambda a, b, c: np.maximum(a, b) - np.minimum(b, c)
     + np.maximum(-a, 0)),
    ("tanh(a) * sigmoid(b) + abs(c) * 0.5", lambda a, b, c: np.tanh(a.astype(np.float64)) / (1 + np.exp(-b.astype(
        np.float64))) + np.abs(c) * 0.5),
]


@pytest.mark.parametrize("expression, reference", CHAINS, ids=[c[0] for c in CHAINS])
@pytest.mark.parametrize("shapes", [
    ((0,), (0,), (0,)), ((1,), (1,), (1,)), ((17,), (17,), (17,)), ((100_003,), (100_003,), (100_003,)),
    ((5, 7), (7,), (5, 1)), ((2, 3, 4, 5), (3, 1, 5), ()), ((4, 1, 6), (1, 5, 1), (6,)),
], ids=str)
def test_chain_matches_numpy(expression, reference, shapes):
    a, b, c = (rand(*s) for s in shapes)
    got = dsl.ops.fused(expression, a=a, b=b, c=c)
    want = reference(a, b, c)
    assert got.shape == np.broadcast_shapes(*shapes) and got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


def test_strided_and_transposed_views():
    big = rand(40, 30)
    a, b = big[::2, 1::3], rand(10, 20).T  # (20, 10) both, neither contiguous
    out = np.zeros((20, 10, 2), np.float32)[:, :, 0]
    assert dsl.ops.fused("gelu(a) + b * 3", a=a, b=b, out=out) is out
    exact = 0.5 * a * (1 + np.vectorize(__import__("math").erf)(a / np.sqrt(2)))
    np.testing.assert_allclose(out, exact + b * 3, rtol=2e-6, atol=1e-6)


def test_numbers_are_operands():
    a = rand(33)
    # atol: the kernel may fuse a * s + t into one rounding (an FMA), which
    # differs from numpy's two by up to half an ulp of a * s where the sum cancels.
    np.testing.assert_allclose(dsl.ops.fused("a * s + t", a=a, s=2.5, t=-1), a * 2.5 - 1, rtol=1e-6, atol=1e-6)
    # A number and then an array for the same name: another kernel, the right result.
    t = rand(33)
    np.testing.assert_allclose(dsl.ops.fused("a * s + t", a=a, s=2.5, t=t), a * 2.5 + t, rtol=1e-6, atol=1e-6)


def test_out_may_be_an_input_and_overlaps_are_read_first():
    x = rand(1000)
    want = np.log(np.abs(x) + 1.0) * x
    assert dsl.ops.fused("log(abs(x) + 1) * x", x=x, out=x) is x
    np.testing.assert_allclose(x, want, rtol=2e-6, atol=1e-7)
    y = rand(1001)
    want = y[1:] * 2 + y[:-1]
    dsl.ops.fused("a * 2 + b", a=y[1:], b=y[:-1], out=y[:-1])  # shifted by one: numpy's as-if-copied rule
    np.testing.assert_allclose(y[:-1], want, rtol=1e-6)


def test_compiled_once_per_expression_and_operand_kinds():
    a = rand(8)
    dsl.ops.fused("sqrt(abs(a)) + 7", a=a)
    count = len(fused_module._libraries)
    dsl.ops.fused("sqrt(abs(a)) + 7", a=rand(3, 5))
    dsl.ops.fused("sqrt(abs( a ))+7", a=a)  # the same kernel text
    assert len(fused_module._libraries) == count


def test_kernel_text_uses_the_math_helpers():
    from dsl.ops.fused_expr import parse_expression

    text = fused_module.kernel_source(parse_expression("silu(g) * u + relu(g)"), (True, False))
    assert "from mathfn import silu_f32" in text
    assert "def fused_1(v0: f32[N], v1: f32, out: f32[N]):" in text
    assert "out[i] = ((silu_f32(v0[i]) * v1) + relu_f32(v0[i]))" in text
    assert "vectorize(i.inner, 16, tail=peel)" in text


@pytest.mark.parametrize("expression, operands, message", [
    ("silu(a) * sigmod(b)", "ab", re.escape("unknown function 'sigmod' (did you mean 'sigmoid'?)") + "[^\n]*\n"
     + re.escape("    silu(a) * sigmod(b)\n              ^~~~~~") + "$"),
    ("a + q", "a", "'q' is not an operand \\(given: a\\)\n    a \\+ q\n        \\^$"),
    ("a + 1", "ab", "operand 'b' does not appear in the expression 'a \\+ 1'"),
    ("a ** 2", "a", r"operator '\*\*' is not supported"),
    ("a[0] + 1", "a", "subscript is not supported in a fused expression"),
    ("a < 1", "a", "compare is not supported"),
    ("exp(a, a)", "a", r"exp\(\) takes 1 argument, got 2"),
    ("maximum(a)", "a", r"maximum\(\) takes 2 arguments, got 1"),
    ("a +", "a", "invalid syntax"),
    ("exp + a", "a", r"'exp' is a function: call it"),
    ("a * 'x'", "a", "only finite numbers may be constants"),
])
def test_mistakes_point_into_the_expression(expression, operands, message):
    with pytest.raises(ValueError, match=message):
        dsl.ops.fused(expression, **{name: rand(3) for name in operands})


def test_argument_errors_name_the_operand():
    with pytest.raises(TypeError, match="dsl.ops.fused: 'a' must be float32, got float64"):
        dsl.ops.fused("a + 1", a=np.ones(3))
    with pytest.raises(ValueError, match="dsl.ops.fused: shapes do not broadcast"):
        dsl.ops.fused("a + b", a=rand(3), b=rand(4))
    with pytest.raises(ValueError, match="dsl.ops.fused: 'out' has shape"):
        dsl.ops.fused("a + 1", a=rand(3), out=np.empty(4, np.float32))
    with pytest.raises(TypeError, match="dsl.ops.fused: the expression must be a str"):
        dsl.ops.fused(lambda a: a, a=rand(3))


def test_flat_fast_path_copies_partly_overlapping_inputs():
    """The contiguous path of every pointwise op hands shifted views to the
    general path, which reads the inputs first, as numpy does."""
    x = rand(4097)
    want = x[1:] + x[:-1]
    dsl.ops.add(x[1:], x[:-1], out=x[:-1])
    np.testing.assert_array_equal(x[:-1], want)
