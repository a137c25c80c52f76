"""The IR printer: stable text, minimal parentheses, unambiguous names and constants."""

from __future__ import annotations

import math

import pytest

from dsl.lowering.ir import (Assign, Binary, Cast, Check, CheckInfo, Const, Fma, For, If, IndexStore, Kernel,
                             KernelOptions, Load, Overlaps, Program, Reduce, ScalarParam, Select, Shape, Store,
                             Sym, TensorParam, Unary, Var)
from dsl.lowering.printer import Namer, format_expr, format_float, format_kernel, format_node, format_program
from dsl.lowering.types import BOOL, F16, F32, F64, I8, I32, I64, U8


def i64(v: int) -> Const:
    return Const(v, I64)


def saxpy_kernel():
    n, i, alpha = Sym("N", I64, "dim"), Sym("i", I64, "loop"), Sym("alpha", F32, "scalar")
    x = TensorParam("x", F32, (n,), False)
    y = TensorParam("y", F32, (n,), False)
    out = TensorParam("out", F32, (n,), True)
    value = Binary("+", Binary("*", Var(alpha), Load(x, (Var(i),), F32), F32), Load(y, (Var(i),), F32), F32)
    body = (Assign(n, Shape(x, 0)),
            Check(Binary("==", Shape(y, 0), Var(n), BOOL), 0),
            For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), value),), "i"))
    checks = (CheckInfo("shape", "'y' axis 0 must equal N ('x' axis 0)"),)
    return Kernel("saxpy", (ScalarParam(alpha), x, y, out), (n,), body, checks=checks)


SAXPY = """\
kernel saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N] out)
  N = shape(x, 0)
  check shape(y, 0) == N else #0
  for i in range(0, N):
    out[i] = alpha * x[i] + y[i]
  checks:
    #0 shape: 'y' axis 0 must equal N ('x' axis 0)
"""


def test_saxpy():
    assert format_kernel(saxpy_kernel()) == SAXPY


def test_output_does_not_depend_on_symbol_ids():
    first, second = saxpy_kernel(), saxpy_kernel()
    assert first.dims[0].id != second.dims[0].id
    assert format_kernel(first) == format_kernel(second)


def two_loops_named_i():
    """Two different loop symbols named `i`, one nested in the other, plus a local `i`."""
    n = Sym("N", I64, "dim")
    outer, inner, local = Sym("i", I64, "loop"), Sym("i", I64, "loop"), Sym("i", I32, "local")
    a = TensorParam("A", I32, (n, n), True)
    store = Store(a, (Var(outer), Var(inner)), Var(local))
    body = (Assign(n, Shape(a, 0)),
            Assign(local, Const(7, I32)),
            For(outer, i64(0), Var(n), 1, (For(inner, Var(outer), Var(n), 2, (store,), "i", "vector"),), "i"))
    return Kernel("tri", (a,), (n,), body)


def test_symbols_with_one_name_print_differently_in_order_of_appearance():
    assert format_kernel(two_loops_named_i()) == """\
kernel tri(A: i32[N, N] out)
  N = shape(A, 0)
  i: i32 = 7
  for i.1 in range(0, N):
    for i.2 in range(i.1, N, 2) vector:
      A[i.1, i.2] = i
"""


def test_a_symbol_named_like_a_tensor_is_renamed():
    n, x = Sym("N", I64, "dim"), Sym("x", F32, "local")
    t = TensorParam("x", F32, (n,), True)
    body = (Assign(n, Shape(t, 0)), Assign(x, Const(1.0, F32)), Store(t, (i64(0),), Var(x)))
    assert "x[0] = x.1" in format_kernel(Kernel("k", (t,), (n,), body))


def test_loop_kind_and_schedule_name_show_when_not_default():
    n, io = Sym("N", I64, "dim"), Sym("io", I64, "loop")
    t = TensorParam("t", F32, (n,), True)
    loop = For(io, i64(0), Var(n), 4, (), "i.outer", "parallel")
    text = format_kernel(Kernel("k", (t,), (n,), (loop,), KernelOptions(reassociate=True)))
    assert text == "@options(reassociate=True)\nkernel k(t: f32[N] out)\n" \
                   "  for io in range(0, N, 4) parallel name=i.outer:\n    pass\n"


def test_if_elif_else():
    n, x = Sym("N", I64, "dim"), Sym("x", I32, "local")
    lt = Binary("<", Var(n), i64(3), BOOL)
    eq = Binary("==", Var(n), i64(3), BOOL)
    stmt = If(lt, (Assign(x, Const(1, I32)),), (If(eq, (Assign(x, Const(2, I32)),), (Assign(x, Const(3, I32)),)),))
    t = TensorParam("t", I32, (n,), True)
    text = format_kernel(Kernel("k", (t,), (n,), (Assign(n, Shape(t, 0)), stmt)))
    assert text.splitlines()[2:] == ["  if N < 3:", "    x: i32 = 1", "  elif N == 3:", "    x = 2",
                                     "  else:", "    x = 3"]


def test_index_notation_and_reductions():
    dm, dk = Sym("M", I64, "dim"), Sym("K", I64, "dim")
    m, k = Sym("m", I64, "index"), Sym("k", I64, "index")
    a = TensorParam("A", F16, (dm, dk), False)
    out = TensorParam("out", F16, (dm,), True)
    body = Reduce("max", ((k, Var(dk)),), Load(a, (Var(m), Var(k)), F32), F32)
    stmt = IndexStore(((m, Var(dm)),), Store(out, (Var(m),), body))
    assert format_kernel(Kernel("rowmax", (a, out), (dm, dk), (stmt,))) == """\
kernel rowmax(A: f16[M, K], out: f16[M] out)
  out[m] = max[k < K](A[m, k]) for m < M
"""


# ------------------------------------------------------------------ expressions

a, b, c = (Var(Sym(s, I32, "local")) for s in "abc")
p, q = (Var(Sym(s, BOOL, "local")) for s in "pq")
x, y = (Var(Sym(s, F32, "local")) for s in "xy")


def bi(op, lhs, rhs, t=I32):
    return Binary(op, lhs, rhs, t)


@pytest.mark.parametrize("expr,text", [
    (bi("*", bi("+", a, b), c), "(a + b) * c"),
    (bi("+", bi("*", a, b), c), "a * b + c"),
    (bi("-", bi("-", a, b), c), "a - b - c"),
    (bi("-", a, bi("-", b, c)), "a - (b - c)"),
    (bi("<<", a, bi("+", b, c)), "a << b + c"),
    (bi("+", bi("<<", a, b), c), "(a << b) + c"),
    (bi("&", bi("|", a, b), c), "(a | b) & c"),
    (bi("==", bi("<", a, b, BOOL), p, BOOL), "(a < b) == p"),
    (bi("and", bi("or", p, q, BOOL), p, BOOL), "(p or q) and p"),
    (bi("or", p, bi("and", q, p, BOOL), BOOL), "p or q and p"),
    (Unary("not", bi("and", p, q, BOOL), BOOL), "not (p and q)"),
    (Unary("not", bi("<", a, b, BOOL), BOOL), "not a < b"),
    (Unary("neg", bi("+", a, b), I32), "-(a + b)"),
    (Unary("neg", Unary("neg", a, I32), I32), "-(-a)"),
    (Unary("invert", a, I32), "~a"),
    (bi("*", Unary("neg", a, I32), b), "-a * b"),
    (bi("min", a, bi("max", b, c)), "min(a, max(b, c))"),
    (Unary("exp", bi("+", x, y, F32), F32), "exp(x + y)"),
    (Fma(x, y, x, F32), "fma(x, y, x)"),
    (Cast(bi("+", a, b), F32), "f32(a + b)"),
    (bi("+", Select(p, x, y, F32), x, F32), "(x if p else y) + x"),
    (bi("*", a, Const(-2, I32)), "a * -2"),
    (Unary("neg", Const(-2, I32), I32), "-(-2)"),
])
def test_expression_text(expr, text):
    assert format_expr(expr) == text


@pytest.mark.parametrize("expr,text", [
    (Const(1.5, F32), "1.5"),
    (Const(1.5, F64), "1.5_f64"),
    (bi("*", Var(Sym("d", F64, "local")), Const(1.5, F64), F64), "d * 1.5"),
    (bi("*", Var(Sym("d", F64, "local")), Const(1.5, F32), F64), "d * 1.5_f32"),  # ill-typed, so visible
    (Const(3, I64), "3"),
    (Const(3, I32), "3_i32"),
    (bi("+", a, Const(3, I32)), "a + 3"),
    (bi("+", Const(2, I32), Const(3, I32)), "2_i32 + 3_i32"),
    (Const(255, U8), "255_u8"),
    (Const(True, BOOL), "True"),
    (Const(0.1, F32), "0.1"),
    (Const(0.1, F64), "0.1_f64"),
    (Const(1e-5, F32), "1e-05"),
    (Const(1e30, F32), "1e+30"),
    (Const(123456789.0, F32), "123456790.0"),
    (Const(-0.0, F32), "-0.0"),
    (Const(math.inf, F32), "inf"),
    (Const(-math.inf, F64), "-inf_f64"),
    (Const(math.nan, F32), "nan"),
    (Shape(TensorParam("t", F32, (4,), False), 0), "shape(t, 0)"),
    (Overlaps(TensorParam("s", F32, (4,), True), TensorParam("t", F32, (4,), False)), "overlaps(s, t)"),
])
def test_constants_and_leaves(expr, text):
    assert format_expr(expr) == text


def test_cast_operand_constants_carry_their_type():
    assert format_expr(Cast(Const(300, I32), I8)) == "i8(300_i32)"


def test_format_float_round_trips_in_its_type():
    import numpy as np

    rng = np.random.default_rng(0)
    for v in (rng.standard_normal(200) * 10.0 ** rng.integers(-30, 30, 200)).astype(np.float32):
        assert np.float32(format_float(v, F32)) == v
    for v in rng.standard_normal(200) * 10.0 ** rng.integers(-300, 300, 200):
        assert float(format_float(v, F64)) == v


def test_format_node_gives_one_line_for_statements():
    kernel = saxpy_kernel()
    assert format_node(kernel.body[2]) == "for i in range(0, N):"
    assert format_node(kernel.body[1]) == "check shape(y, 0) == N else #0"


def test_shared_namer_keeps_names_consistent():
    names = Namer()
    s1, s2 = Sym("i", I64, "loop"), Sym("i", I64, "loop")
    assert format_expr(Binary("+", Var(s1), Var(s2), I64), names) == "i + i.1"
    assert format_expr(Var(s2), names) == "i.1"


def test_program_separates_kernels_with_a_blank_line():
    text = format_program(Program((saxpy_kernel(), saxpy_kernel())))
    assert text == SAXPY + "\n" + SAXPY
