"""The IR verifier: valid kernels pass at their level; each kind of bad IR is
rejected with a message naming the kernel, the node and its location."""

from __future__ import annotations

import pytest

from dsl.grammar.diagnostics import Source, Span
from dsl.lowering.ir import (Assign, Binary, Cast, Check, CheckInfo, Const, Fma, For, If, IndexStore, Kernel,
                             Load, Overlaps, Program, Realign, Reduce, ScalarParam, Select, Shape, Store, Sym,
                             TensorParam, Unary, Var)
from dsl.lowering.loops import lower_kernel
from dsl.lowering.types import BOOL, F16, F32, F64, I8, I32, I64, U8
from dsl.lowering.verify import VerifyError, verify, verify_program

SRC = Source("bad.tk", "\n" * 20)
N = Sym("N", I64, "dim")
I = Sym("i", I64, "loop")
ALPHA = Sym("alpha", F32, "scalar")
X = TensorParam("x", F32, (N,), False)
H = TensorParam("h", F16, (N,), False)
OUT = TensorParam("out", F32, (N,), True)
M2 = TensorParam("m", I32, (N, 4), True)
CHECKS = (CheckInfo("shape", "'h' axis 0 must equal N"),)


def at(line: int, col: int) -> Span:
    return Span(SRC, line, col, line, col + 3)


def i64(v: int) -> Const:
    return Const(v, I64)


def xi() -> Load:
    return Load(X, (Var(I),), F32)


def kernel(*loop_body, prologue=None, dims=(N,)):
    """`N = shape(x, 0); for i in range(0, N): <loop_body>` over x, h, out, m."""
    head = (Assign(N, Shape(X, 0)),) if prologue is None else prologue
    body = (*head, For(I, i64(0), Var(N), 1, tuple(loop_body), "i"))
    return Kernel("k", (ScalarParam(ALPHA), X, H, OUT, M2), dims, body, checks=CHECKS)


def store(value, span=None):
    return Store(OUT, (Var(I),), value, span)


def test_valid_kernels_pass():
    k = kernel(store(Binary("+", Binary("*", Var(ALPHA), xi(), F32), Load(H, (Var(I),), F32), F32)),
               Check(Binary("==", Shape(H, 0), Var(N), BOOL), 0))
    verify(k, "loops")
    verify(k, "kernel")
    verify_program(Program((k, k)), "loops")
    verify(kernel(store(Load(X, (Unary("opaque", Var(I), I64),), F32))), "loops")


def test_lowered_kernel_ir_passes_at_both_levels():
    m, n = Sym("m", I64, "index"), Sym("n", I64, "index")
    total = Reduce("sum", ((n, i64(4)),), Cast(Load(M2, (Var(m), Var(n)), I32), F32), F32)
    k = Kernel("rowsum", (M2, OUT), (N,), (IndexStore(((m, Var(N)),), Store(OUT, (Var(m),), total)),))
    verify(k, "kernel")
    with pytest.raises(VerifyError, match="index notation left in loop IR"):
        verify(k, "loops")
    verify(lower_kernel(k), "loops")


def test_message_names_kernel_node_and_location():
    bad = store(Binary("+", xi(), Const(1.0, F64), F32, at(4, 18)))
    with pytest.raises(VerifyError) as info:
        verify(kernel(bad), "loops")
    assert str(info.value) == "kernel 'k': operands of '+' differ: f32 and f64: `x[i] + 1.0_f64` at bad.tk:4:18"


def test_location_falls_back_to_the_enclosing_statement():
    bad = store(Binary("+", xi(), Const(1.0, F64), F32), span=at(7, 5))
    with pytest.raises(VerifyError, match=r"at bad.tk:7:5$"):
        verify(kernel(bad), "loops")


def test_printed_names_in_messages_are_disambiguated():
    other = Sym("i", I64, "loop")
    bad = store(Load(X, (Var(other),), F32))
    with pytest.raises(VerifyError, match=r"used outside its scope: `i.1`"):
        verify(kernel(bad), "loops")


LOCAL = Sym("t", F32, "local")
IDX = Sym("j", I64, "index")

BAD_LOOP_BODIES = {
    "local never assigned": [store(Var(LOCAL))],
    "used outside its scope": [store(Load(X, (Var(IDX),), F32))],
    "not a scalar parameter": [store(Var(Sym("beta", F32, "scalar")))],
    "operands of '\\*' differ": [store(Binary("*", xi(), Cast(xi(), F64), F32))],
    "comparison '<' has type bool": [store(Binary("<", xi(), xi(), F32))],
    "'/' needs floats": [Store(M2, (Var(I), i64(0)), Binary("/", Const(1, I32), Const(2, I32), I32))],
    "'<<' needs ints": [store(Binary("<<", xi(), xi(), F32))],
    "'and' needs bool": [If(Binary("and", xi(), xi(), BOOL), ())],
    "has rank 1 but is indexed with 2": [store(Load(X, (Var(I), Var(I)), F32))],
    "an index must be i64": [store(Load(X, (Const(0, I32),), F32))],
    "a load from f16 'h' has type f32, not f64": [store(Cast(Load(H, (Var(I),), F64), F32))],
    "f16 is a storage type": [store(Load(H, (Var(I),), F16))],
    "stored to f32 'out' must be f32": [store(Cast(xi(), F64))],
    "stores to input tensor 'x'": [Store(X, (Var(I),), xi())],
    "check code 5": [Check(Const(True, BOOL), 5)],
    "a check condition must be bool": [Check(xi(), 0)],
    "an if condition must be bool": [If(Var(I), ())],
    "assigned to a f32 variable must be f32": [Assign(LOCAL, Var(I))],
    "assigns to a loop symbol": [Assign(I, i64(0))],
    "loop step must be a nonzero integer": [For(Sym("j", I64, "loop"), i64(0), i64(3), 0, (), "j")],
    "a loop variable needs role 'loop' and type i64": [For(Sym("j", I32, "loop"), i64(0), i64(3), 1, (), "j")],
    "a loop stop must be i64": [For(Sym("j", I64, "loop"), i64(0), Const(3, I32), 1, (), "j")],
    "already bound by an enclosing loop": [For(I, i64(0), i64(3), 1, (), "i")],
    "unknown loop kind": [For(Sym("j", I64, "loop"), i64(0), i64(3), 1, (), "j", "gpu")],
    "an unroll hint is a count >= 0": [For(Sym("j", I64, "loop"), i64(0), i64(3), 1, (), "j", unroll=-2)],
    "only a serial loop takes an unroll hint": [For(Sym("j", I64, "loop"), i64(0), i64(3), 1, (), "j", "parallel",
                                                    unroll=2)],
    "no value may have it": [store(Cast(Cast(xi(), F16), F32))],
    "an fma operand must be f32": [store(Fma(xi(), xi(), Const(1.0, F64), F32))],
    "the second select value must be f32": [store(Select(Const(True, BOOL), xi(), Const(1, I32), F32))],
    "a select condition must be bool": [store(Select(xi(), xi(), xi(), F32))],
    "unknown binary operator '\\*\\*'": [store(Binary("**", xi(), xi(), F32))],
    "'not' needs a bool": [store(Unary("not", xi(), F32))],
    "'~' needs an int or bool": [store(Unary("invert", xi(), F32))],
    "exp\\(\\) needs a float": [Store(M2, (Var(I), i64(0)), Unary("exp", Const(1, I32), I32))],
    "opaque\\(\\) needs a scalar int": [store(Unary("opaque", xi(), F32))],
    "constant 300 does not fit in i8": [Store(M2, (Var(I), i64(0)), Cast(Const(300, I8), I32))],
    "a u8 constant holds 1.5": [Store(M2, (Var(I), i64(0)), Cast(Const(1.5, U8), I32))],
    "a reduction left in loop IR": [store(Reduce("sum", ((IDX, i64(3)),), xi(), F32))],
    "overlaps\\(\\) of a foreign tensor": [If(Overlaps(X, TensorParam("z", F32, (N,), False)), ())],
    "axis 1 out of range for rank 1": [store(Cast(Shape(X, 1), F32))],
    "is not a parameter of this kernel": [store(Load(TensorParam("x", F32, (N,), False), (Var(I),), F32))],
    "realign of 'x', which is not an input at the kernel's top level": [Realign(X, Const(True, BOOL), 0)],
    "realign of 'out', which is not an input": [Realign(OUT, Const(True, BOOL), 0)],
}


@pytest.mark.parametrize("problem", BAD_LOOP_BODIES)
def test_bad_ir_is_rejected(problem):
    with pytest.raises(VerifyError, match=problem) as info:
        verify(kernel(*BAD_LOOP_BODIES[problem]), "loops")
    assert str(info.value).startswith("kernel 'k': ")


def test_realign_at_the_top_level_passes():
    def with_realign(cond):
        return Kernel("k", (X, OUT), (N,), (Assign(N, Shape(X, 0)), Realign(X, cond, 0)), checks=CHECKS)

    verify(with_realign(Binary(">=", Var(N), i64(256), BOOL)), "loops")
    with pytest.raises(VerifyError, match="a realign condition must be bool"):
        verify(with_realign(Var(N)), "loops")


def test_dims_must_be_assigned_in_loop_ir_only():
    k = kernel(store(xi()), prologue=())
    verify(k, "kernel")
    with pytest.raises(VerifyError, match="dim never assigned"):
        verify(k, "loops")


def test_dims_must_belong_to_the_kernel():
    with pytest.raises(VerifyError, match="bad dim"):
        verify(kernel(store(xi()), dims=()), "loops")


def test_kernel_ir_index_scopes():
    m = Sym("m", I64, "index")
    inner = Reduce("sum", ((m, Var(m)),), xi(), F32)  # extent uses its own index
    k = Kernel("k", (X, OUT), (N,), (IndexStore(((m, Var(N)),), Store(OUT, (Var(m),), Load(X, (Var(m),), F32))),))
    verify(k, "kernel")
    bad = Kernel("k", (X, OUT), (N,), (IndexStore(((m, Var(N)),), Store(OUT, (Var(m),), inner)),))
    with pytest.raises(VerifyError, match="already bound"):
        verify(bad, "kernel")


def test_unknown_level_is_a_value_error():
    with pytest.raises(ValueError):
        verify(kernel(), "llvm")


def test_the_verifiers_remembered_lane_counts_are_lanes_of():
    """`lanes_counter` (each subtree counted once) against `lanes_of` on every
    expression of a scheduled contraction, whose tiles hold vectors,
    broadcasts, masks and ramps; a node reached twice is counted once."""
    from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts
    from dsl.lowering.vector import lanes_counter, lanes_of
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_source

    text = "def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):\n    C[m, n] = sum(A[m, k] * B[k, n])\n"
    kernel = compile_source(Source("mm.tk", text), CompileOptions(cpu="znver3"), stop_after="schedule").program.kernels[0]
    count = lanes_counter()
    nodes = [x for s in walk_stmts(kernel.body) for e in stmt_exprs(s) for x in walk_expr(e)]
    assert {lanes_of(x) for x in nodes} >= {1, 8}
    assert all(count(x) == lanes_of(x) for x in nodes)
    assert all(count(x) == lanes_of(x) for x in reversed(nodes))  # from the memo this time
