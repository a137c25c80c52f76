"""The reference interpreter against numpy and Python references (docs/semantics.md):
hand-built loop-IR (and kernel-IR) kernels on arrays of every layout."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl.grammar.diagnostics import Source, Span
from dsl.lowering.interpret import CheckFailed, run_kernel
from dsl.lowering.interpret_ops import overlaps
from dsl.lowering.ir import (Assign, Binary, Cast, Check, CheckInfo, Const, Fma, For, If, IndexStore,
                             Kernel, KernelOptions, Load, Reduce, ScalarParam, Select, Shape, Store, Sym,
                             TensorParam, Unary, Var)
from dsl.lowering.loops import lower_kernel
from dsl.lowering.types import (BOOL, F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64,
                                ScalarType, value_type)

INT_TYPES = (I8, I16, I32, I64, U8, U16, U32, U64)

# ------------------------------------------------------------------ building kernels


def i64(v: int) -> Const:
    return Const(v, I64)


def span(line: int, col: int, name: str = "stencil.tk") -> Span:
    return Span(Source(name, "\n" * 40), line, col, line, col + 4)


def saxpy_kernel():
    """out = alpha * x + y over N = shape(x, 0), with the shape check of y."""
    n, i, alpha = Sym("N", I64, "dim"), Sym("i", I64, "loop"), Sym("alpha", F32, "scalar")
    x = TensorParam("x", F32, (n,), False)
    y = TensorParam("y", F32, (n,), False)
    out = TensorParam("out", F32, (n,), True)
    ax = Binary("*", Var(alpha), Load(x, (Var(i),), F32), F32)
    value = Binary("+", ax, Load(y, (Var(i),), F32), F32)
    body = (Assign(n, Shape(x, 0)),
            Check(Binary("==", Shape(y, 0), Var(n), BOOL), 0),
            For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), value),), "i"))
    checks = (CheckInfo("shape", "'y' axis 0 must equal N ('x' axis 0)", span(1, 20, "saxpy.tk")),)
    return Kernel("saxpy", (ScalarParam(alpha), x, y, out), (n,), body, checks=checks)


def elementwise(name, in_types, out_type, fn):
    """`out[i] = fn(a[i], b[i], ...)` over N = shape(a, 0) (no checks)."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    ins = [TensorParam(chr(ord("a") + k), t, (n,), False) for k, t in enumerate(in_types)]
    out = TensorParam("out", out_type, (n,), True)
    loads = [Load(p, (Var(i),), value_type(p.dtype)) for p in ins]
    loop = For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), fn(*loads)),), "i")
    return Kernel(name, (*ins, out), (n,), (Assign(n, Shape(ins[0], 0)), loop))


def run_elementwise(kernel, *arrays, out_dtype):
    out = np.zeros(len(arrays[0]), out_dtype)
    args = {chr(ord("a") + k): a for k, a in enumerate(arrays)}
    run_kernel(kernel, {**args, "out": out})
    return out


def rowsum_kernel(t: ScalarType):
    """out[m] = sum over k of A[m, k], accumulated in a local."""
    m, k = Sym("M", I64, "dim"), Sym("K", I64, "dim")
    im, ik, acc = Sym("m", I64, "loop"), Sym("k", I64, "loop"), Sym("acc", t, "local")
    a = TensorParam("A", t, (m, k), False)
    out = TensorParam("out", t, (m,), True)
    add = Assign(acc, Binary("+", Var(acc), Load(a, (Var(im), Var(ik)), t), t))
    row = (Assign(acc, Const(0.0 if t.is_float else 0, t)),
           For(ik, i64(0), Var(k), 1, (add,), "k"),
           Store(out, (Var(im),), Var(acc)))
    body = (Assign(m, Shape(a, 0)), Assign(k, Shape(a, 1)), For(im, i64(0), Var(m), 1, row, "m"))
    return Kernel("rowsum", (a, out), (m, k), body)


def matmul_kernel_ir(t: ScalarType):
    """Kernel IR: C[m, n] = sum[k < K](A[m, k] * B[k, n]) for m < M, n < N."""
    dm, dk, dn = (Sym(s, I64, "dim") for s in "MKN")
    m, n, k = (Sym(s, I64, "index") for s in "mnk")
    a = TensorParam("A", t, (dm, dk), False)
    b = TensorParam("B", t, (dk, dn), False)
    c = TensorParam("C", t, (dm, dn), True)
    prod = Binary("*", Load(a, (Var(m), Var(k)), t), Load(b, (Var(k), Var(n)), t), t)
    total = Reduce("sum", ((k, Var(dk)),), prod, t)
    stmt = IndexStore(((m, Var(dm)), (n, Var(dn))), Store(c, (Var(m), Var(n)), total))
    return Kernel("matmul", (a, b, c), (dm, dk, dn), (stmt,))


# ------------------------------------------------------------------ whole kernels


def test_saxpy_matches_numpy_in_f32():
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(100).astype(np.float32), rng.standard_normal(100).astype(np.float32)
    out = np.zeros(100, np.float32)
    run_kernel(saxpy_kernel(), {"alpha": 1.5, "x": x, "y": y, "out": out})
    np.testing.assert_array_equal(out, np.float32(1.5) * x + y)


def test_failed_check_raises_check_failed_with_its_info():
    kernel = saxpy_kernel()
    x, y, out = np.ones(4, np.float32), np.ones(5, np.float32), np.zeros(4, np.float32)
    with pytest.raises(CheckFailed) as info:
        run_kernel(kernel, {"alpha": 1.0, "x": x, "y": y, "out": out})
    err = info.value
    assert (err.kernel_name, err.code, err.info) == ("saxpy", 0, kernel.checks[0])
    assert str(err) == ("kernel 'saxpy': check #0 failed (shape): 'y' axis 0 must equal N "
                        "('x' axis 0) at saxpy.tk:1:20")
    assert not out.any()  # the check runs before any store


@pytest.mark.parametrize("t", [F32, I32])
def test_rowsum_with_local_accumulator(t):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((5, 7)) * 10).astype(t.numpy_name)
    out = np.zeros(5, t.numpy_name)
    run_kernel(rowsum_kernel(t), {"A": a, "out": out})
    expected = np.zeros(5, t.numpy_name)
    for r in range(5):
        acc = a.dtype.type(0)
        for v in a[r]:  # left to right in the type, as the loop does
            acc = acc + v
        expected[r] = acc
    np.testing.assert_array_equal(out, expected)


def test_kernel_ir_matmul_matches_numpy_and_the_lowered_kernel():
    kernel = matmul_kernel_ir(I32)
    rng = np.random.default_rng(2)
    a = rng.integers(-50, 50, (6, 4), dtype=np.int32)
    b = rng.integers(-50, 50, (4, 3), dtype=np.int32)
    direct, lowered = np.zeros((6, 3), np.int32), np.zeros((6, 3), np.int32)
    run_kernel(kernel, {"A": a, "B": b, "C": direct})
    run_kernel(lower_kernel(kernel), {"A": a, "B": b, "C": lowered})
    np.testing.assert_array_equal(direct, a @ b)
    np.testing.assert_array_equal(lowered, a @ b)


def test_kernel_ir_gets_the_entry_checks():
    a, b = np.ones((3, 4), np.int32), np.ones((5, 2), np.int32)
    with pytest.raises(CheckFailed) as info:
        run_kernel(matmul_kernel_ir(I32), {"A": a, "B": b, "C": np.zeros((3, 2), np.int32)})
    assert info.value.info.kind == "shape"


def test_output_overlapping_an_input_fails_the_overlap_check():
    kernel = lower_kernel(elementwise("copy", [F32], F32, lambda a: a))
    buf = np.arange(8, dtype=np.float32)
    with pytest.raises(CheckFailed) as info:
        run_kernel(kernel, {"a": buf[:6], "out": buf[2:]})
    assert info.value.info.kind == "overlap"
    run_kernel(kernel, {"a": buf[:4], "out": buf[4:]})  # disjoint halves are fine
    np.testing.assert_array_equal(buf, [0, 1, 2, 3, 0, 1, 2, 3])


def test_overlaps_uses_byte_ranges_and_ignores_empty_arrays():
    buf = np.zeros(10, np.float64)
    assert overlaps(buf[::2], buf[1::2])  # interleaved: conservatively overlapping
    assert not overlaps(buf[:5], buf[5:])
    assert overlaps(buf[:5], buf[4::-1])
    assert not overlaps(buf[:0], buf)
    assert overlaps(buf.view(np.uint8)[39:41], buf[4:5])


# ------------------------------------------------------------------ memory layouts


def test_negative_zero_and_non_unit_strides():
    kernel = elementwise("add", [F32, F32], F32, lambda a, b: Binary("+", a, b, F32))
    base = np.arange(12, dtype=np.float32)
    a = base[::-2]  # negative stride
    b = np.broadcast_to(np.float32(100), (6,))  # zero stride
    out_base = np.zeros(12, np.float32)
    out = out_base[10::-2]  # negative-stride output
    run_kernel(kernel, {"a": a, "b": b, "out": out})
    np.testing.assert_array_equal(out, a + 100)
    assert not out_base[1::2].any()


def test_transposed_2d_views():
    a = np.arange(12, dtype=np.int32).reshape(3, 4)
    out = np.zeros(4, np.int32)
    run_kernel(rowsum_kernel(I32), {"A": a.T, "out": out})
    np.testing.assert_array_equal(out, a.sum(axis=0))


def test_f16_loads_widen_exactly_and_stores_round_to_nearest_even():
    kernel = elementwise("half", [F16, F32], F16, lambda a, b: Binary("+", a, b, F32))
    one = 1.0
    halfway = 2.0 ** -11  # half an f16 ulp at 1.0
    b = np.array([halfway, 3 * halfway, 1e6, -1e6, 0.1], np.float32)
    a = np.array([one, one, 0, 0, 0.5], np.float16)
    out = run_elementwise(kernel, a, b, out_dtype=np.float16)
    with np.errstate(over="ignore"):
        expected = (a.astype(np.float32) + b).astype(np.float16)
    np.testing.assert_array_equal(out, expected)
    assert out[0] == 1.0 and out[1] == 1.0 + 4 * halfway and np.isinf(out[2]) and out[3] == -np.inf


def test_bool_tensors_load_and_store():
    kernel = elementwise("xor", [BOOL, BOOL], BOOL, lambda a, b: Binary("^", a, b, BOOL))
    a, b = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    out = run_elementwise(kernel, a, b, out_dtype=bool)
    np.testing.assert_array_equal(out, a ^ b)


# ------------------------------------------------------------------ errors


def oob_kernel(offset: int, rank2: bool = False):
    """out[i] = A[i + offset] (or A[i + offset, 0]) over N = shape(out, 0)."""
    n, m, i = Sym("N", I64, "dim"), Sym("M", I64, "dim"), Sym("i", I64, "loop")
    a = TensorParam("A", F32, (n, m) if rank2 else (n,), False)
    out = TensorParam("out", F32, (n,), True)
    index = Binary("+", Var(i), i64(offset), I64)
    load = Load(a, (index, i64(0)) if rank2 else (index,), F32, span(12, 13))
    body = (Assign(n, Shape(out, 0)), For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), load),), "i"))
    return Kernel("stencil", (a, out), (n, m), body)


def test_out_of_bounds_read_raises_index_error_naming_everything():
    a, out = np.zeros((7, 5), np.float32), np.zeros(7, np.float32)
    with pytest.raises(IndexError) as info:
        run_kernel(oob_kernel(1, rank2=True), {"A": a, "out": out})
    assert str(info.value) == "kernel 'stencil': index (7, 0) out of bounds for 'A' with shape (7, 5) at stencil.tk:12:13"


def test_negative_index_is_out_of_bounds_not_wrapped():
    a, out = np.arange(7, dtype=np.float32), np.zeros(7, np.float32)
    with pytest.raises(IndexError, match=r"index \(-1,\) out of bounds for 'A' with shape \(7,\)"):
        run_kernel(oob_kernel(-1), {"A": a, "out": out})


def test_out_of_bounds_store_without_span_uses_the_statement_span():
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    out = TensorParam("out", I32, (n,), True)
    store = Store(out, (Binary("*", Var(i), i64(2), I64),), Const(1, I32))
    body = (Assign(n, Shape(out, 0)), For(i, i64(0), Var(n), 1, (store,), "i", span=span(3, 5)))
    kernel = Kernel("spread", (out,), (n,), body)
    with pytest.raises(IndexError, match=r"^kernel 'spread': index \(4,\) .* shape \(4,\) at stencil.tk:3:5$"):
        run_kernel(kernel, {"out": np.zeros(4, np.int32)})


def test_reading_a_local_before_assignment_is_an_error():
    acc = Sym("acc", F32, "local")
    n = Sym("N", I64, "dim")
    out = TensorParam("out", F32, (n,), True)
    body = (Assign(n, Shape(out, 0)), If(Const(False, BOOL), (Assign(acc, Const(1.0, F32)),)),
            Store(out, (i64(0),), Var(acc)))
    with pytest.raises(UnboundLocalError, match="local 'acc' read before it was assigned"):
        run_kernel(Kernel("k", (out,), (n,), body), {"out": np.zeros(1, np.float32)})


def test_bad_arguments_raise_type_errors():
    kernel = saxpy_kernel()
    x = np.zeros(3, np.float32)
    with pytest.raises(TypeError, match="missing argument 'y'"):
        run_kernel(kernel, {"alpha": 1.0, "x": x, "out": x})
    with pytest.raises(TypeError, match="float32 array, got 1-d float64"):
        run_kernel(kernel, {"alpha": 1.0, "x": x, "y": np.zeros(3), "out": x.copy()})
    with pytest.raises(TypeError, match="no parameter"):
        run_kernel(kernel, {"alpha": 1.0, "x": x, "y": x, "out": x.copy(), "z": 1})
    int_kernel = Kernel("k", (ScalarParam(Sym("s", I8, "scalar")),), (), ())
    with pytest.raises(OverflowError):
        run_kernel(int_kernel, {"s": 200})
    with pytest.raises(TypeError):
        run_kernel(int_kernel, {"s": 1.5})


# ------------------------------------------------------------------ control


def test_select_and_short_circuit_evaluate_only_what_they_need():
    """A[i + 1] would be out of bounds on the last element; it is never read there."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    a = TensorParam("A", I32, (n,), False)
    out = TensorParam("out", I32, (n,), True)
    nxt = Binary("+", Var(i), i64(1), I64)
    in_range = Binary("<", nxt, Var(n), BOOL)
    pick = Select(in_range, Load(a, (nxt,), I32), Const(-1, I32), I32)
    positive = Binary("and", in_range, Binary(">", Load(a, (nxt,), I32), Const(0, I32), BOOL), BOOL)
    both = Binary("+", pick, Cast(positive, I32), I32)
    body = (Assign(n, Shape(a, 0)), For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), both),), "i"))
    out_arr = np.zeros(4, np.int32)
    run_kernel(Kernel("shift", (a, out), (n,), body), {"A": np.array([5, -6, 7, 8], np.int32), "out": out_arr})
    np.testing.assert_array_equal(out_arr, [-6, 8, 9, -1])


def test_loops_with_steps_and_kinds():
    """for i in range(N - 1, -1, -2) parallel: out[i] = i; start/stop are read once."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    out = TensorParam("out", I64, (n,), True)
    start = Binary("-", Var(n), i64(1), I64)
    loop = For(i, start, i64(-1), -2, (Store(out, (Var(i),), Binary("+", Var(i), i64(1), I64)),), "i", "parallel")
    arr = np.zeros(7, np.int64)
    run_kernel(Kernel("steps", (out,), (n,), (Assign(n, Shape(out, 0)), loop)), {"out": arr})
    np.testing.assert_array_equal(arr, [1, 0, 3, 0, 5, 0, 7])


def test_trace_sees_every_statement_and_current_values():
    kernel = rowsum_kernel(I32)
    seen = []
    run_kernel(kernel, {"A": np.array([[1, 2]], np.int32), "out": np.zeros(1, np.int32)},
               trace=lambda stmt, env: seen.append((type(stmt).__name__, dict(env).get("acc"))))
    kinds = [k for k, _ in seen]
    assert kinds == ["Assign", "Assign", "For", "Assign", "For", "Assign", "Assign", "Store"]
    assert [int(v) for k, v in seen if v is not None] == [0, 0, 1, 3]


# ------------------------------------------------------------------ integer semantics


def wrap(v: int, t: ScalarType) -> int:
    v &= (1 << t.bits) - 1
    if t.is_signed and v >= 1 << (t.bits - 1):
        v -= 1 << t.bits
    return v


def reference_int(op: str, a: int, b: int, t: ScalarType) -> int:
    """Python's integer semantics, then wrapped: the contract of docs/semantics.md."""
    bits = t.bits
    if op in ("//", "%"):
        if b == 0:
            return 0
        return wrap(a // b if op == "//" else a % b, t)
    if op in ("<<", ">>"):
        amount = b & ((1 << bits) - 1)  # the amount is read as unsigned
        if op == "<<":
            return 0 if amount >= bits else wrap(a << amount, t)
        return a >> min(amount, bits)  # Python's >> fills with the sign
    ops = {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
           "min": min(a, b), "max": max(a, b)}
    return wrap(ops[op], t)


def int_samples(t: ScalarType) -> np.ndarray:
    lo = -(1 << (t.bits - 1)) if t.is_signed else 0
    hi = (1 << (t.bits - 1)) - 1 if t.is_signed else (1 << t.bits) - 1
    edges = {lo, lo + 1, -1, 0, 1, 2, 3, 7, t.bits - 1, t.bits, t.bits + 1, hi - 1, hi, 100}
    edges = [v for v in edges if lo <= v <= hi]
    rng = np.random.default_rng(t.bits)
    randoms = [int(v) for v in rng.integers(lo, hi, 12, endpoint=True, dtype=t.numpy_name)]
    return np.array(edges + randoms, dtype=t.numpy_name)


@pytest.mark.parametrize("t", INT_TYPES, ids=str)
@pytest.mark.parametrize("op", ["+", "-", "*", "//", "%", "<<", ">>", "&", "|", "^", "min", "max"])
def test_integer_ops_match_python_semantics(op, t):
    samples = int_samples(t)
    a = np.repeat(samples, len(samples))
    b = np.tile(samples, len(samples))
    kernel = elementwise("op", [t, t], t, lambda x, y: Binary(op, x, y, t))
    out = run_elementwise(kernel, a, b, out_dtype=t.numpy_name)
    expected = [reference_int(op, int(x), int(y), t) for x, y in zip(a, b)]
    assert [int(v) for v in out] == expected


@pytest.mark.parametrize("t", [I8, I64], ids=str)
def test_neg_and_abs_wrap_at_min(t):
    lo = -(1 << (t.bits - 1))
    a = np.array([lo, -5, 0, 5], t.numpy_name)
    for op in ("neg", "abs"):
        out = run_elementwise(elementwise(op, [t], t, lambda x: Unary(op, x, t)), a, out_dtype=t.numpy_name)
        expected = [wrap(-v if op == "neg" else abs(v), t) for v in map(int, a)]
        assert [int(v) for v in out] == expected


# ------------------------------------------------------------------ casts


NAN, INF = float("nan"), float("inf")
FLOATS = [NAN, INF, -INF, 1e20, -1e20, 127.5, -128.7, 2.9, -2.9, 255.9, 256.0, -0.5, 4294967296.0, 9.3e18]


def reference_float_to_int(v: float, t: ScalarType) -> int:
    lo = -(1 << (t.bits - 1)) if t.is_signed else 0
    hi = (1 << (t.bits - 1)) - 1 if t.is_signed else (1 << t.bits) - 1
    if math.isnan(v):
        return 0
    if math.isinf(v):
        return hi if v > 0 else lo
    return max(lo, min(hi, math.trunc(v)))


@pytest.mark.parametrize("src", [F32, F64], ids=str)
@pytest.mark.parametrize("dst", [I8, U8, I32, U32, I64, U64], ids=str)
def test_float_to_int_casts_saturate(src, dst):
    a = np.array(FLOATS, src.numpy_name)
    out = run_elementwise(elementwise("cast", [src], dst, lambda x: Cast(x, dst)), a, out_dtype=dst.numpy_name)
    assert [int(v) for v in out] == [reference_float_to_int(float(v), dst) for v in a]


@pytest.mark.parametrize("src,dst", [(I32, I8), (I8, U32), (U8, I8), (I64, U16), (U64, I32), (I8, I64)])
def test_int_to_int_casts_truncate_or_extend_by_source_sign(src, dst):
    a = int_samples(src)
    out = run_elementwise(elementwise("cast", [src], dst, lambda x: Cast(x, dst)), a, out_dtype=dst.numpy_name)
    assert [int(v) for v in out] == [wrap(int(v), dst) for v in a]


def test_casts_to_and_from_bool():
    a = np.array([0.0, -0.0, 0.5, NAN, -INF], np.float32)
    out = run_elementwise(elementwise("tobool", [F32], BOOL, lambda x: Cast(x, BOOL)), a, out_dtype=bool)
    np.testing.assert_array_equal(out, [False, False, True, True, True])
    b = np.array([False, True])
    out = run_elementwise(elementwise("fromb", [BOOL], F32, lambda x: Cast(x, F32)), b, out_dtype=np.float32)
    np.testing.assert_array_equal(out, [0.0, 1.0])


def test_int_to_float_rounds_once_to_nearest():
    big = np.array([2**60 + 2**36 + 1, 2**24 + 1, -(2**63)], np.int64)
    out = run_elementwise(elementwise("tof", [I64], F32, lambda x: Cast(x, F32)), big, out_dtype=np.float32)
    assert [Fraction(float(v)) for v in out] == [Fraction(2**60 + 2**37), Fraction(2**24), Fraction(-(2**63))]


# ------------------------------------------------------------------ float semantics


@pytest.mark.parametrize("t", [F32, F64], ids=str)
def test_float_min_max_propagate_nan_and_order_signed_zeros(t):
    a = np.array([NAN, 1.0, 0.0, -0.0, 2.0], t.numpy_name)
    b = np.array([1.0, NAN, -0.0, 0.0, 3.0], t.numpy_name)
    for op, zero_sign in (("min", -1.0), ("max", 1.0)):
        out = run_elementwise(elementwise(op, [t, t], t, lambda x, y: Binary(op, x, y, t)), a, b,
                              out_dtype=t.numpy_name)
        assert np.isnan(out[0]) and np.isnan(out[1])
        assert out[2] == 0 and math.copysign(1.0, out[2]) == zero_sign
        assert out[3] == 0 and math.copysign(1.0, out[3]) == zero_sign
        assert out[4] == (2.0 if op == "min" else 3.0)


def test_float_floordiv_and_mod_follow_the_formula():
    a = np.array([7.5, -7.5, 7.5, 1.0, 5.0], np.float32)
    b = np.array([2.0, 2.0, -2.0, 0.1, 0.0], np.float32)
    div = run_elementwise(elementwise("fd", [F32, F32], F32, lambda x, y: Binary("//", x, y, F32)), a, b,
                          out_dtype=np.float32)
    mod = run_elementwise(elementwise("fm", [F32, F32], F32, lambda x, y: Binary("%", x, y, F32)), a, b,
                          out_dtype=np.float32)
    with np.errstate(all="ignore"):
        expected_div = np.floor(a / b)
        np.testing.assert_array_equal(div, expected_div)
        np.testing.assert_array_equal(mod, a - expected_div * b)
    assert div[3] == 10.0  # floor(1 / 0.1) after rounding, where Python's 1 // 0.1 is 9


def test_float_comparisons_with_nan():
    ops = ["==", "!=", "<", ">="]
    a, b = np.array([NAN, 1.0], np.float64), np.array([NAN, NAN], np.float64)
    results = {op: run_elementwise(elementwise(op, [F64, F64], BOOL, lambda x, y, o=op: Binary(o, x, y, BOOL)),
                                   a, b, out_dtype=bool).tolist() for op in ops}
    assert results == {"==": [False, False], "!=": [True, True], "<": [False, False], ">=": [False, False]}


def test_intrinsics():
    a = np.array([0.25, 1.0, 2.5, -0.0], np.float32)
    for op, ref in [("sqrt", np.sqrt), ("floor", np.floor), ("ceil", np.ceil), ("rint", np.rint), ("abs", np.abs),
                    ("rsqrt", lambda x: np.float32(1) / np.sqrt(x)),
                    ("erf", lambda x: np.array([math.erf(v) for v in x], np.float32))]:
        out = run_elementwise(elementwise(op, [F32], F32, lambda x, o=op: Unary(o, x, F32)), a, out_dtype=np.float32)
        with np.errstate(all="ignore"):
            np.testing.assert_array_equal(out, ref(a), err_msg=op)
    for op in ("exp", "log", "tanh"):
        out = run_elementwise(elementwise(op, [F32], F32, lambda x, o=op: Unary(o, x, F32)), a, out_dtype=np.float32)
        with np.errstate(all="ignore"):
            np.testing.assert_allclose(out, getattr(np, op)(a.astype(np.float64)), rtol=1e-6)


def exact_fma_f32(a: float, b: float, c: float) -> np.float32:
    """a * b + c rounded once to f32, from the exact rational value."""
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    lo = np.float32(float(exact))  # within an ulp; fix up by comparing neighbours
    candidates = [np.nextafter(lo, np.float32(-np.inf)), lo, np.nextafter(lo, np.float32(np.inf))]
    candidates = [x for x in candidates if np.isfinite(x)]

    def key(x):
        distance = abs(Fraction(float(x)) - exact)
        even = int(np.array(x).view(np.uint32)) & 1
        return (distance, even)

    return min(candidates, key=key)


f32s = st.floats(width=32, allow_nan=False, allow_infinity=False, min_value=-(2.0**60), max_value=2.0**60)


@settings(max_examples=300, deadline=None)
@given(f32s, f32s, f32s)
def test_fma_f32_rounds_once(a, b, c):
    kernel = elementwise("fma", [F32, F32, F32], F32, lambda x, y, z: Fma(x, y, z, F32))
    arrays = [np.array([v], np.float32) for v in (a, b, c)]
    out = run_elementwise(kernel, *arrays, out_dtype=np.float32)
    expected = exact_fma_f32(a, b, c)
    assert out[0] == expected or (out[0] == 0 and expected == 0)


def test_fma_f32_hard_double_rounding_case():
    """a * b + c = 1 + 2^-24 + 2^-60: f64 rounds it to the f32 midpoint 1 + 2^-24, and
    rounding that again would give 1.0; rounded once it is 1 + 2^-23."""
    a = np.float32(2**-12 * (1 + 2**-12))
    b = np.float32(2**-12 * (1 - 2**-12 + 2**-24))
    assert Fraction(float(a)) * Fraction(float(b)) == Fraction(2**-24) + Fraction(2**-60)
    kernel = elementwise("fma", [F32, F32, F32], F32, lambda x, y, z: Fma(x, y, z, F32))
    out = run_elementwise(kernel, np.array([a]), np.array([b]), np.ones(1, np.float32), out_dtype=np.float32)
    assert out[0] == np.float32(1 + 2**-23)


def test_fma_f64_rounds_once():
    a, b = 1 + 2**-52, 1 - 2**-53
    c = -1.0
    kernel = elementwise("fma", [F64, F64, F64], F64, lambda x, y, z: Fma(x, y, z, F64))
    out = run_elementwise(kernel, *(np.array([v]) for v in (a, b, c)), out_dtype=np.float64)
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    assert out[0] == float(exact) and out[0] != a * b + c


def test_kernel_options_do_not_change_interpretation():
    kernel = elementwise("add", [F32, F32], F32, lambda a, b: Binary("+", a, b, F32))
    fast = Kernel(kernel.name, kernel.params, kernel.dims, kernel.body, KernelOptions(reassociate=True))
    a = np.array([1e8, 1.0], np.float32)
    assert (run_elementwise(fast, a, a, out_dtype=np.float32) == a + a).all()
