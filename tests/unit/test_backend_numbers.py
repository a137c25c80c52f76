"""The LLVM back-end computes what docs/semantics.md says: hand-built loop-IR
kernels, compiled at -O0 and -O3, against numpy / Python references."""


import ctypes
import math
from fractions import Fraction

import numpy as np
import pytest

from dsl.lowering.ir import (Assign, Binary, Cast, Check, CheckInfo, Const, Fma, For, If, Kernel,
                             KernelOptions, Load, Overlaps, ScalarParam, Select, Shape, Store, Sym,
                             TensorParam, Unary, Var)
from dsl.lowering.types import (BOOL, F16, F32, F64, I8, I16, I32, I64, U8, U32, U64, ScalarType)

OPTS = [0, 3]
from backend_kernels import arg_values, compile_lib, elementwise, i64, rowsum_kernel, run_both, saxpy_kernel

# ------------------------------------------------------------------ float kernels


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("layout", ["contiguous", "negative", "zero", "strided_out"])
def test_saxpy(opt, layout):
    kernel = saxpy_kernel()
    lib = compile_lib([kernel], opt)
    rng = np.random.default_rng(0)
    base_x = rng.standard_normal(37).astype(np.float32)
    base_y = rng.standard_normal(74).astype(np.float32)

    def make():
        x = {"contiguous": base_x, "negative": base_x[::-1],
             "zero": np.broadcast_to(base_x[3], (37,))}.get(layout, base_x)
        y = base_y.copy()[::2] if layout == "strided_out" else base_y[:37].copy()
        return {"a": 1.5, "x": x, "y": y}

    status, got = run_both(lib, kernel, make)
    expect = make()
    assert status == 0
    a, x, y = np.float32(1.5), expect["x"], expect["y"]
    # `contract` allows a*x+y to become one FMA (rounded once), or not.
    fused = (np.float64(a) * x.astype(np.float64) + y).astype(np.float32)
    assert np.all((got["y"] == a * x + y) | (got["y"] == fused))


@pytest.mark.parametrize("opt", OPTS)
def test_failed_check_returns_code_plus_one(opt):
    kernel = saxpy_kernel()
    lib = compile_lib([kernel], opt)
    y = np.zeros(5, np.float32)
    status, got = run_both(lib, kernel, lambda: {"a": 2.0, "x": np.ones(6, np.float32), "y": y.copy()})
    assert status == 1
    assert not got["y"].any()


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("dtype", [F32, F64])
def test_rowsum_with_local_accumulator(opt, dtype):
    kernel = rowsum_kernel(dtype)
    lib = compile_lib([kernel], opt)
    x = np.arange(35, dtype=dtype.numpy_name).reshape(5, 7) / 7
    for view in (x, x.T.copy().T, x[::-1, ::2], x[:0]):
        status, got = run_both(lib, kernel, lambda v=view: {"x": v, "out": np.zeros(v.shape[0], v.dtype)})
        assert status == 0
        np.testing.assert_allclose(got["out"], view.sum(axis=1), rtol=1e-12 if dtype == F64 else 1e-6)


@pytest.mark.parametrize("opt", OPTS)
def test_f16_round_trip(opt):
    load = elementwise("widen", [("x", F16)], F32, lambda x: x)
    store = elementwise("narrow", [("x", F32)], F16, lambda x: x)
    lib = compile_lib([load, store], opt)
    halves = np.array([0, 1, -2.5, 65504, 6e-8, np.inf, -np.inf, np.nan, 1 / 3], np.float16)
    _, got = run_both(lib, load, lambda: {"x": halves, "out": np.zeros(halves.size, np.float32)})
    np.testing.assert_array_equal(got["out"], halves.astype(np.float32))
    # Halfway cases round to even; overflow goes to inf.
    singles = np.array([1 + 2**-11, 1 + 3 * 2**-11, 65520, 65519, 1e-8, -0.0, np.nan, 0.1], np.float32)
    _, got = run_both(lib, store, lambda: {"x": singles, "out": np.zeros(singles.size, np.float16)})
    with np.errstate(over="ignore"):
        np.testing.assert_array_equal(got["out"], singles.astype(np.float16))


@pytest.mark.parametrize("opt", OPTS)
def test_float_min_max_propagate_nan(opt):
    kernels = [elementwise(f"k_{op}", [("a", F64), ("b", F64)], F64,
                           lambda a, b, op=op: Binary(op, a, b, F64)) for op in ("min", "max")]
    lib = compile_lib(kernels, opt)
    a = np.array([1.0, np.nan, 3.0, np.nan, -np.inf])
    b = np.array([2.0, 1.0, np.nan, np.nan, 5.0])
    for kernel, ref in zip(kernels, (np.minimum, np.maximum)):
        _, got = run_both(lib, kernel, lambda: {"a": a, "b": b, "out": np.zeros(5)})
        np.testing.assert_array_equal(got["out"], ref(a, b))


@pytest.mark.parametrize("opt", OPTS)
def test_float_compare_floor_div_mod(opt):
    ops = ["==", "!=", "<", "<=", ">", ">="]
    kernels = [elementwise(f"cmp{k}", [("a", F32), ("b", F32)], BOOL,
                           lambda a, b, op=op: Binary(op, a, b, BOOL)) for k, op in enumerate(ops)]
    kernels += [elementwise(f"arith{k}", [("a", F64), ("b", F64)], F64,
                            lambda a, b, op=op: Binary(op, a, b, F64)) for k, op in enumerate(["//", "%"])]
    lib = compile_lib(kernels, opt)
    a = np.array([1, np.nan, 2, 3, -7.5, 7.5, -7.5], np.float32)
    b = np.array([1, 1, np.nan, 2, 2, -2, -2], np.float32)
    for kernel, op in zip(kernels, ops):
        _, got = run_both(lib, kernel, lambda: {"a": a, "b": b, "out": np.zeros(7, np.bool_)})
        assert got["out"].tolist() == [eval(f"x {op} y") for x, y in zip(a.tolist(), b.tolist())]
    a64, b64 = a[3:].astype(np.float64), b[3:].astype(np.float64)
    refs = (lambda x, y: math.floor(x / y), lambda x, y: x - math.floor(x / y) * y)
    for kernel, ref in zip(kernels[6:], refs):
        _, got = run_both(lib, kernel, lambda: {"a": a64, "b": b64, "out": np.zeros(4)})
        assert got["out"].tolist() == [ref(x, y) for x, y in zip(a64.tolist(), b64.tolist())]


UNARY_REFS = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda v: 1 / np.sqrt(v),
              "tanh": np.tanh, "erf": np.vectorize(math.erf), "floor": np.floor, "ceil": np.ceil,
              "rint": np.rint, "abs": np.abs, "neg": np.negative}


@pytest.mark.parametrize("dtype", [F32, F64])
def test_float_intrinsics(dtype):
    kernels = [elementwise(f"k_{op}", [("x", dtype)], dtype, lambda x, op=op: Unary(op, x, dtype))
               for op in UNARY_REFS]
    kernels.append(elementwise("k_fma", [("a", dtype), ("b", dtype), ("c", dtype)], dtype,
                               lambda a, b, c: Fma(a, b, c, dtype)))
    lib = compile_lib(kernels, 3)
    x = np.array([0.25, 1.0, 2.5, 7.0, 0.5, 3.75], dtype.numpy_name)
    for kernel, ref in zip(kernels, UNARY_REFS.values()):
        _, got = run_both(lib, kernel, lambda: {"x": x, "out": np.zeros_like(x)})
        rtol = 3e-7 if dtype == F32 else 1e-15  # libm is within an ulp or two
        np.testing.assert_allclose(got["out"], ref(x.astype(np.float64)), rtol=rtol)

    def fma_args():
        args = {"a": 0.1, "b": 10.0, "c": -1.0, "out": 0.0}
        return {k: np.full(1, v, dtype.numpy_name) for k, v in args.items()}

    _, got = run_both(lib, kernels[-1], fma_args)
    # One rounding: 0.1 * 10 - 1 is the representation error of 0.1, not 0.
    tenth = Fraction(float(np.dtype(dtype.numpy_name).type(0.1)))
    assert got["out"][0] == float(tenth * 10 - 1) != 0


@pytest.mark.parametrize("dtype", [F32, F64])
def test_rint_ties_to_even_and_keeps_specials(dtype):
    """rint as numpy's: halves to the even neighbour, the sign of a zero kept,
    infinities, NaN and values beyond 2**mantissa unchanged."""
    (kernel,) = kernels = [elementwise("k_rint", [("x", dtype)], dtype, lambda x: Unary("rint", x, dtype))]
    lib = compile_lib(kernels, 3)
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, -0.4, -0.0, 0.49999997, 8388609.0, 1e30,
                  np.inf, -np.inf, np.nan], dtype.numpy_name)
    _, got = run_both(lib, kernel, lambda: {"x": x, "out": np.zeros_like(x)})
    assert got["out"].tobytes() == np.rint(x).tobytes()


# ------------------------------------------------------------------ integer semantics


def wrap(v: int, t: ScalarType) -> int:
    v &= (1 << t.bits) - 1
    return v - (1 << t.bits) if t.is_signed and v >= 1 << (t.bits - 1) else v


def ref_int(op: str, a: int, b: int, t: ScalarType) -> int:
    """Python model of docs/semantics.md for integer binary operators."""
    amount = b & ((1 << t.bits) - 1)  # shift amounts are unsigned
    match op:
        case "//":
            return 0 if b == 0 else wrap(a // b, t)
        case "%":
            return 0 if b == 0 else wrap(a % b, t)
        case "<<":
            return 0 if amount >= t.bits else wrap(a << amount, t)
        case ">>":
            return (-1 if a < 0 else 0) if amount >= t.bits else a >> amount
        case "min":
            return min(a, b)
        case "max":
            return max(a, b)
    return wrap(eval(f"a {op} b"), t)


INT_OPS = ["+", "-", "*", "//", "%", "<<", ">>", "min", "max", "&", "|", "^"]


def edge_values(t: ScalarType) -> list[int]:
    lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (0, (1 << t.bits) - 1)
    vals = {lo, lo + 1, hi, hi - 1, 0, 1, 2, 3, 7, t.bits - 1, t.bits, t.bits + 1, 100 % (hi + 1)}
    if t.is_signed:
        vals |= {-1, -2, -3, -7, -t.bits}
    return sorted(vals)


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("t", [I8, I16, I32, I64, U8, U32, U64])
def test_integer_binary_ops(opt, t):
    kernels = [elementwise(f"op{k}", [("a", t), ("b", t)], t, lambda a, b, op=op: Binary(op, a, b, t))
               for k, op in enumerate(INT_OPS)]
    lib = compile_lib(kernels, opt)
    vals = edge_values(t)
    a = np.array([x for x in vals for _ in vals], t.numpy_name)
    b = np.array([y for _ in vals for y in vals], t.numpy_name)
    for kernel, op in zip(kernels, INT_OPS):
        _, got = run_both(lib, kernel, lambda: {"a": a, "b": b, "out": np.zeros_like(a)})
        expect = [ref_int(op, int(x), int(y), t) for x, y in zip(a, b)]
        bad = [(int(x), int(y), int(g), e) for x, y, g, e in zip(a, b, got["out"], expect) if g != e]
        assert not bad, f"{t} {op}: (a, b, got, expected) {bad[:5]}"


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("t", [I32, U8])
def test_integer_division_by_constants(opt, t):
    divisors = [3, -4, 1, -1, 0, 7] if t.is_signed else [3, 4, 1, 0, 255]
    cases = [(op, d) for d in divisors for op in ("//", "%")]
    kernels = [elementwise(f"div{k}", [("a", t)], t, lambda a, op=op, d=d: Binary(op, a, Const(d, t), t))
               for k, (op, d) in enumerate(cases)]
    lib = compile_lib(kernels, opt)
    a = np.array(edge_values(t), t.numpy_name)
    for kernel, (op, d) in zip(kernels, cases):
        _, got = run_both(lib, kernel, lambda: {"a": a, "out": np.zeros_like(a)})
        assert got["out"].tolist() == [ref_int(op, int(x), wrap(d, t), t) for x in a], (op, d)


def ref_cast(v: float, t: ScalarType) -> int:
    lo, hi = (-(1 << (t.bits - 1)), (1 << (t.bits - 1)) - 1) if t.is_signed else (0, (1 << t.bits) - 1)
    if math.isnan(v):
        return 0
    return hi if v >= hi else lo if v <= lo else int(v)


@pytest.mark.parametrize("opt", OPTS)
def test_casts_saturate_truncate_and_test_nonzero(opt):
    floats = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, -1.5, 2.7, 255.9, -128.5, 0.0], np.float32)
    targets = [I8, U8, I32, U32, I64, U64]
    kernels = [elementwise(f"f2{t}", [("x", F32)], t, lambda x, t=t: Cast(x, t)) for t in targets]
    kernels += [elementwise("f2b", [("x", F32)], BOOL, lambda x: Cast(x, BOOL)),
                elementwise("i2u8", [("x", I32)], U8, lambda x: Cast(x, U8)),
                elementwise("i8toi64", [("x", I8)], I64, lambda x: Cast(x, I64)),
                elementwise("u8toi64", [("x", U8)], I64, lambda x: Cast(x, I64)),
                elementwise("b2f", [("x", BOOL)], F64, lambda x: Cast(x, F64))]
    lib = compile_lib(kernels, opt)
    for kernel, t in zip(kernels, targets):
        _, got = run_both(lib, kernel, lambda t=t: {"x": floats, "out": np.zeros(10, t.numpy_name)})
        assert got["out"].tolist() == [ref_cast(float(v), t) for v in floats], t
    _, got = run_both(lib, kernels[6], lambda: {"x": floats, "out": np.zeros(10, np.bool_)})
    assert got["out"].tolist() == [v != 0 for v in floats.tolist()]  # NaN -> True
    ints = np.array([-1, 256, 300, -129], np.int32)
    _, got = run_both(lib, kernels[7], lambda: {"x": ints, "out": np.zeros(4, np.uint8)})
    assert got["out"].tolist() == [255, 0, 44, 127]
    for kernel, dt in ((kernels[8], np.int8), (kernels[9], np.uint8)):
        src = np.array([-1, 127, -128], np.int64).astype(dt)
        _, got = run_both(lib, kernel, lambda src=src: {"x": src, "out": np.zeros(3, np.int64)})
        assert got["out"].tolist() == src.astype(np.int64).tolist()
    bools = np.array([True, False, True])
    _, got = run_both(lib, kernels[10], lambda: {"x": bools, "out": np.zeros(3)})
    assert got["out"].tolist() == [1.0, 0.0, 1.0]


@pytest.mark.parametrize("opt", OPTS)
def test_int_unary(opt):
    kernels = [elementwise(f"k_{op}", [("x", I32)], I32, lambda x, op=op: Unary(op, x, I32))
               for op in ("abs", "neg", "invert")]
    kernels.append(elementwise("not", [("x", BOOL)], BOOL, lambda x: Unary("not", x, BOOL)))
    lib = compile_lib(kernels, opt)
    x = np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int32)
    refs = [lambda v: wrap(abs(v), I32), lambda v: wrap(-v, I32), lambda v: ~v]
    for kernel, ref in zip(kernels, refs):
        _, got = run_both(lib, kernel, lambda: {"x": x, "out": np.zeros_like(x)})
        assert got["out"].tolist() == [ref(int(v)) for v in x]
    _, got = run_both(lib, kernels[3], lambda: {"x": np.array([True, False]), "out": np.zeros(2, bool)})
    assert got["out"].tolist() == [False, True]


# ------------------------------------------------------------------ control flow


def guarded_kernel(op: str):
    """out[i] = (i < shape(x, 0) and x[i] > 0) / (i >= shape(x, 0) or x[i] > 0), and
    val[i] = x[i] if i < shape(x, 0) else -1: the guard must keep x[i] from running."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    x = TensorParam("x", F32, (n,), False)
    out = TensorParam("out", BOOL, (n,), True)
    val = TensorParam("val", F32, (n,), True)
    inside = Binary("<" if op == "and" else ">=", Var(i), Shape(x, 0), BOOL)
    positive = Binary(">", Load(x, (Var(i),), F32), Const(0.0, F32), BOOL)
    chosen = Select(Binary("<", Var(i), Shape(x, 0), BOOL), Load(x, (Var(i),), F32), Const(-1.0, F32), F32)
    body = (Assign(n, Shape(out, 0)),
            For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), Binary(op, inside, positive, BOOL)),
                                       Store(val, (Var(i),), chosen)), "i"))
    return Kernel(f"guard_{op}", (x, out, val), (n,), body)


@pytest.mark.parametrize("opt", OPTS)
@pytest.mark.parametrize("op", ["and", "or"])
def test_short_circuit_protects_access(opt, op):
    kernel = guarded_kernel(op)
    lib = compile_lib([kernel], opt)
    x = np.array([1.0, -2.0, 3.0], np.float32)
    _, got = run_both(lib, kernel, lambda: {"x": x, "out": np.zeros(6, bool), "val": np.zeros(6, np.float32)})
    inside = [True, False, True, False, False, False]
    assert got["out"].tolist() == (inside if op == "and" else [True, False, True, True, True, True])
    assert got["val"].tolist() == [1.0, -2.0, 3.0, -1.0, -1.0, -1.0]
    # A NULL x of size 0: any access would crash.
    values = {"x": np.zeros(0, np.float32), "out": np.ones(4, bool), "val": np.zeros(4, np.float32)}
    args = arg_values(kernel, values)
    args[0] = None
    fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, *[ctypes.c_int64] * 2, ctypes.c_void_p,
                          *[ctypes.c_int64] * 2, ctypes.c_void_p, *[ctypes.c_int64] * 2)
    assert fn(lib.address(kernel.name))(*args) == 0
    assert values["out"].tolist() == [op == "or"] * 4


@pytest.mark.parametrize("opt", OPTS)
def test_if_and_negative_step_loop(opt):
    """out[i] = i*i for odd i, else -i; the loop runs downwards from N-1 to 0."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    out = TensorParam("out", I64, (n,), True)
    odd = Binary("==", Binary("%", Var(i), i64(2), I64), i64(1), BOOL)
    branch = If(odd, (Store(out, (Var(i),), Binary("*", Var(i), Var(i), I64)),),
                (Store(out, (Var(i),), Unary("neg", Var(i), I64)),))
    loop = For(i, Binary("-", Var(n), i64(1), I64), i64(-1), -1, (branch,), "i")
    kernel = Kernel("ifs", (out,), (n,), (Assign(n, Shape(out, 0)), loop))
    lib = compile_lib([kernel], opt)
    _, got = run_both(lib, kernel, lambda: {"out": np.full(7, 99, np.int64)})
    assert got["out"].tolist() == [0, 1, -2, 9, -4, 25, -6]


@pytest.mark.parametrize("opt", OPTS)
def test_overlap_check(opt):
    n, m = Sym("N", I64, "dim"), Sym("M", I64, "dim")
    a, b = TensorParam("a", F32, (n,), False), TensorParam("b", F32, (m,), True)
    check = Check(Unary("not", Overlaps(b, a), BOOL), 0)
    kernel = Kernel("nooverlap", (a, b), (n, m), (check,), KernelOptions(inplace=True),
                    (CheckInfo("overlap", "b overlaps a"),))
    lib = compile_lib([kernel], opt)
    buf = np.zeros(20, np.float32)
    # buf[::-2] holds elements 19, 17, ..., 1; the test is on address ranges, so
    # interleaved views (buf[::3], buf[1::3]) count as overlapping.
    cases = [(buf[:10], buf[10:], 0), (buf[:10], buf[9:], 1), (buf[::-2], buf[:1], 0),
             (buf[::-2], buf[1:2], 1), (buf[:0], buf, 0), (buf[::3], buf[1::3], 1),
             (np.broadcast_to(buf[5:6], (4,)), buf[5:6], 1), (buf[5:6], buf[19::-1], 1)]
    for x, y, expect in cases:
        status, _ = run_both(lib, kernel, lambda x=x, y=y: {"a": x, "b": y})
        assert status == expect, (x.strides, y.strides)


def scalar_kernel():
    """Copies each scalar argument into element 0 of a tensor of its type."""
    types = [I8, U64, BOOL, F32, F64, I16]
    syms = [Sym(f"s{k}", t, "scalar") for k, t in enumerate(types)]
    outs = [TensorParam(f"o{k}", t, (1,), True) for k, t in enumerate(types)]
    body = tuple(Store(o, (i64(0),), Var(s)) for o, s in zip(outs, syms))
    params = tuple(p for s, o in zip(syms, outs) for p in (ScalarParam(s), o))
    return Kernel("scalars", params, (), body), types


@pytest.mark.parametrize("opt", OPTS)
def test_scalar_arguments_direct_and_packed(opt):
    kernel, types = scalar_kernel()
    lib = compile_lib([kernel], opt)
    inputs = [-5, 2**64 - 3, True, 1.25, -1e300, -32768]

    def make():
        values = {f"s{k}": v for k, v in enumerate(inputs)}
        values |= {f"o{k}": np.zeros(1, t.numpy_name) for k, t in enumerate(types)}
        return values

    _, got = run_both(lib, kernel, make)
    assert [got[f"o{k}"][0].item() for k in range(6)] == inputs


