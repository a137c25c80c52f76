"""The reference interpreter on vector IR (docs/semantics.md, "Vectors"): hand-built
vector nodes and their edge cases, lane-wise ops against the scalar ops on the
same values, and kernels vectorized by the real transform against the same
kernels unscheduled."""

from __future__ import annotations

import functools
import math
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl.grammar.diagnostics import Source, Span
from dsl.lowering import interpret_ops as ops
from dsl.lowering.interpret import run_kernel
from dsl.lowering.ir import (Assign, Binary, Broadcast, Cast, Const, Fma, For, HReduce, If, Kernel, Load,
                             Ramp, ScalarParam, Select, Store, Sym, TensorParam, Unary, Var)
from dsl.lowering.types import (BOOL, F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, ScalarType,
                                value_type)
from dsl.lowering.verify import verify
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

INT_TYPES = (I8, I16, I32, I64, U8, U16, U32, U64)
FLOAT_TYPES = (F32, F64)
L = 8
R8 = Ramp(Const(0, I64), 1, L)

# ------------------------------------------------------------------ building kernels


def i64(v: int) -> Const:
    return Const(v, I64)


def tensor(name: str, t: ScalarType, *dims, out: bool = False) -> TensorParam:
    return TensorParam(name, t, dims or (L,), out)


def load(p: TensorParam, *indices, mask=None) -> Load:
    return Load(p, indices, value_type(p.dtype), mask=mask)


def lt(a, b) -> Binary:
    return Binary("<", a, b, BOOL)


def kernel(name: str, params, *body, verified: bool = True) -> Kernel:
    k = Kernel(name, tuple(params), (), tuple(body))
    if verified:
        verify(k, "loops")
    return k


def span(line: int, col: int) -> Span:
    return Span(Source("vec.tk", "\n" * 20), line, col, line, col + 4)


def lanewise_pair(in_types, out_type, fn, scalar_operand: int | None = None):
    """`out[ramp] = fn(loads)` and the same as a scalar loop over 8 elements.
    Operand `scalar_operand` (if any) is the scalar `b[3]` in both."""
    ins = [tensor(chr(ord("a") + k), t) for k, t in enumerate(in_types)]
    out = tensor("out", out_type, out=True)

    def value(ix):
        return fn(*(load(p, i64(3) if k == scalar_operand else ix) for k, p in enumerate(ins)))

    i = Sym("i", I64, "loop")
    vec = kernel("vec", (*ins, out), Store(out, (R8,), value(R8)))
    sca = kernel("sca", (*ins, out), For(i, i64(0), i64(L), 1, (Store(out, (Var(i),), value(Var(i))),), "i"))
    return vec, sca


def run_pair(pair, *arrays, out_type):
    """Outputs of the vector and the scalar kernel of `pair` on the same inputs."""
    results = []
    for k in pair:
        out = np.zeros(L, out_type.numpy_name)
        run_kernel(k, {**{chr(ord("a") + n): a for n, a in enumerate(arrays)}, "out": out})
        results.append(out)
    return results


def assert_same(a: np.ndarray, b: np.ndarray) -> None:
    """Equal bit for bit, the sign of zero included; a NaN equals any NaN (which
    NaN an operation gives is not specified, as in LLVM)."""
    assert a.dtype == b.dtype
    if a.dtype.kind == "f":
        np.testing.assert_array_equal(np.isnan(a), np.isnan(b))
        a, b = np.where(np.isnan(a), 0, a), np.where(np.isnan(b), 0, b)
        a, b = a.view(f"u{a.itemsize}"), b.view(f"u{b.itemsize}")
    np.testing.assert_array_equal(a, b)


# ------------------------------------------------------------------ values


def int_values(t: ScalarType):
    lo, hi = ops.int_range(t)
    edges = [v for v in (lo, lo + 1, -2, -1, 0, 1, 2, 3, t.bits - 1, t.bits, t.bits + 1, hi - 1, hi)
             if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(lo, hi))


FLOAT_EDGES = [math.nan, math.inf, -math.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1.5, -2.5, 1e-45, 3.4e38,
               -3.4e38, 255.9, -128.5, 2.0**31, 2.0**63, -2.0**63, 2.0**64, 1e300, -1e300]


def float_values(t: ScalarType):
    return st.one_of(st.sampled_from(FLOAT_EDGES), st.floats(width=t.bits, allow_nan=True))


def values(t: ScalarType):
    if t.is_bool:
        return st.booleans()
    return float_values(t) if t.is_float else int_values(t)


def lanes(data, t: ScalarType) -> np.ndarray:
    with np.errstate(all="ignore"):
        return np.array(data.draw(st.lists(values(t), min_size=L, max_size=L)), dtype=t.numpy_name)


# ------------------------------------------------ lane-wise ops == scalar ops


INT_OPS = ("+", "-", "*", "//", "%", "&", "|", "^", "<<", ">>", "min", "max",
           "==", "!=", "<", "<=", ">", ">=")
FLOAT_OPS = ("+", "-", "*", "/", "//", "%", "min", "max", "==", "!=", "<", "<=", ">", ">=")
COMPARE = ("==", "!=", "<", "<=", ">", ">=")


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_binary_ops_lanewise_equal_scalar_ops(data):
    t = data.draw(st.sampled_from(INT_TYPES + FLOAT_TYPES))
    op = data.draw(st.sampled_from(FLOAT_OPS if t.is_float else INT_OPS))
    result = BOOL if op in COMPARE else t
    scalar = data.draw(st.sampled_from([None, 0, 1]))
    pair = lanewise_pair((t, t), result, lambda a, b: Binary(op, a, b, result), scalar)
    vec, sca = run_pair(pair, lanes(data, t), lanes(data, t), out_type=result)
    assert_same(vec, sca)


UNARY = {"i": ("neg", "invert", "abs"), "u": ("neg", "invert", "abs"), "b": ("not", "invert"),
         "f": ("neg", "abs", "sqrt", "rsqrt", "erf", "floor", "ceil", "rint", "exp", "log", "tanh")}


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_unary_ops_lanewise_equal_scalar_ops(data):
    t = data.draw(st.sampled_from(INT_TYPES + FLOAT_TYPES + (BOOL,)))
    op = data.draw(st.sampled_from(UNARY[t.kind]))
    pair = lanewise_pair((t,), t, lambda a: Unary(op, a, t))
    vec, sca = run_pair(pair, lanes(data, t), out_type=t)
    if op in ("exp", "log", "tanh"):  # libm functions: not promised bit-exact
        np.testing.assert_allclose(vec, sca, rtol=4 * np.finfo(vec.dtype).eps, equal_nan=True)
    else:
        assert_same(vec, sca)


@settings(max_examples=400, deadline=None)
@given(st.data())
def test_casts_lanewise_equal_scalar_casts(data):
    """Saturating float -> int (NaN, inf, +-2**63, 2**64 ...), int -> int, -> bool,
    and stores to f16 (rounded to nearest even lane by lane)."""
    every = INT_TYPES + FLOAT_TYPES + (BOOL, F16)
    src, out = data.draw(st.sampled_from(every)), data.draw(st.sampled_from(every))
    s, d = value_type(src), value_type(out)
    pair = lanewise_pair((src,), out, lambda a: Cast(a, d) if s != d else a)
    with np.errstate(all="ignore"):
        arg = lanes(data, s).astype(src.numpy_name)
    vec, sca = run_pair(pair, arg, out_type=out)
    assert_same(vec, sca)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_fma_lanewise_equal_scalar_fma(data):
    t = data.draw(st.sampled_from(FLOAT_TYPES))
    scalar = data.draw(st.sampled_from([None, 1]))
    pair = lanewise_pair((t, t, t), t, lambda a, b, c: Fma(a, b, c, t), scalar)
    vec, sca = run_pair(pair, lanes(data, t), lanes(data, t), lanes(data, t), out_type=t)
    assert_same(vec, sca)


def test_fma_f32_rounds_once_in_every_lane():
    a = np.full(L, 1 + 2.0**-23, np.float32)
    c = np.full(L, -(1 + 2.0**-22), np.float32)
    vec, _ = run_pair(lanewise_pair((F32,) * 3, F32, lambda x, y, z: Fma(x, y, z, F32)), a, a, c, out_type=F32)
    np.testing.assert_array_equal(vec, np.full(L, 2.0**-46, np.float32))  # a*a+c rounded twice is 0


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_hreduce_is_a_left_fold_with_the_scalar_op(data):
    t = data.draw(st.sampled_from(INT_TYPES + FLOAT_TYPES))
    op = data.draw(st.sampled_from(("+", "*", "min", "max")))
    x, out = tensor("x", t), tensor("out", t, 1, out=True)
    k = kernel("hr", (x, out), Store(out, (i64(0),), HReduce(op, load(x, R8), t)))
    v = lanes(data, t)
    got = np.zeros(1, t.numpy_name)
    run_kernel(k, {"x": v, "out": got})
    with np.errstate(all="ignore"):
        want = functools.reduce(ops.binary_fn(op, t), v)
    assert_same(got, np.array([want]))


def test_float_hreduce_folds_in_lane_order():
    """((1e8 + 1) - 1e8) + 1 in f32 is 1; a pairwise sum would give 0."""
    x, out = tensor("x", F32, 4), tensor("out", F32, 1, out=True)
    k = kernel("sum4", (x, out), Store(out, (i64(0),), HReduce("+", load(x, Ramp(i64(0), 1, 4)), F32)))
    got = np.zeros(1, np.float32)
    run_kernel(k, {"x": np.array([1e8, 1, -1e8, 1], np.float32), "out": got})
    assert got[0] == 1.0


# ------------------------------------------------------------------ vector nodes


def test_ramp_broadcast_and_a_vector_local():
    base, alpha = Sym("base", I64, "scalar"), Sym("alpha", I32, "scalar")
    v = Sym("v", I32, "local", lanes=L)
    ramps, out = tensor("ramps", I64, out=True), tensor("out", I32, 2, L, out=True)
    k = kernel("nodes", (ScalarParam(base), ScalarParam(alpha), ramps, out),
               Store(ramps, (Ramp(i64(7), -1, L),), Ramp(Var(base), 3, L)),
               Assign(v, Const(5, I32)),  # a scalar fills every lane
               Store(out, (i64(0), R8), Binary("+", Var(v), Broadcast(Var(alpha), L), I32)),
               Assign(v, Binary("*", Var(v), Cast(R8, I32), I32)),
               Store(out, (i64(1), R8), Var(v)))
    r, o = np.zeros(L, np.int64), np.zeros((2, L), np.int32)
    run_kernel(k, {"base": 2**63 - 2, "alpha": 10, "ramps": r, "out": o})
    np.testing.assert_array_equal(r[::-1], (2**63 - 2 + 3 * np.arange(L, dtype=np.uint64)).astype(np.int64))
    np.testing.assert_array_equal(o, [[15] * L, 5 * np.arange(L)])


def test_masked_lanes_are_not_read_and_load_zero():
    """Lanes 5..7 of x[0..7] are out of bounds of x[5], but masked off."""
    x, out = tensor("x", I32, 5), tensor("out", I32, out=True)
    k = kernel("tail", (x, out), Store(out, (R8,), load(x, R8, mask=lt(R8, i64(5)))))
    o = np.full(L, -1, np.int32)
    run_kernel(k, {"x": np.arange(1, 6, dtype=np.int32), "out": o})
    np.testing.assert_array_equal(o, [1, 2, 3, 4, 5, 0, 0, 0])


def test_masked_store_writes_only_active_lanes():
    out = tensor("out", I32, 5, out=True)
    even = Binary("==", Binary("%", R8, i64(2), I64), i64(0), BOOL)
    both = Binary("and", even, lt(R8, i64(5)), BOOL)
    k = kernel("scatter", (out,), Store(out, (R8,), Cast(R8, I32), mask=both))
    o = np.full(5, -1, np.int32)
    run_kernel(k, {"out": o})
    np.testing.assert_array_equal(o, [0, -1, 2, -1, 4])


@pytest.mark.parametrize("where", ["load", "store"])
def test_an_active_lane_out_of_bounds_raises_the_scalar_index_error(where):
    x, out = tensor("x", I32, 3, 5), tensor("out", I32, 3, 5, out=True)
    index = (i64(2), Binary("-", R8, i64(1), I64))  # lane 0 is -1: masked off below
    mask = lt(i64(0), R8)
    if where == "load":
        body = Store(out, (i64(0), i64(0)), HReduce("+", Load(x, index, I32, span(4, 9), mask=mask), I32))
    else:
        body = Store(out, index, Const(1, I32), span(4, 9), mask=mask)
    k = kernel("edge", (x, out), body)
    o = np.zeros((3, 5), np.int32)
    name = "x" if where == "load" else "out"
    message = f"kernel 'edge': index (2, 5) out of bounds for '{name}' with shape (3, 5) at vec.tk:4:9"
    with pytest.raises(IndexError, match=f"^{re.escape(message)}$"):
        run_kernel(k, {"x": np.zeros((3, 5), np.int32), "out": o})
    assert not o.any()  # a vector store checks all its active lanes before writing one


def test_colliding_scatter_lanes_store_in_lane_order():
    out, grid = tensor("out", I32, 4, out=True), tensor("grid", I32, 2, 2, out=True)
    value = Cast(Ramp(i64(10), 1, L), I32)
    k = kernel("collide", (out, grid),
               Store(out, (Ramp(i64(0), 0, L),), value),  # all lanes at out[0]: lane 7 wins
               Store(out, (Ramp(i64(1), 0, L),), value, mask=lt(R8, i64(6))),  # lane 5 wins
               Store(out, (Binary("%", R8, i64(2), I64),), Binary("+", value, Const(10, I32), I32)),
               Store(grid, (Binary("//", R8, i64(4), I64), Binary("%", R8, i64(2), I64)), value))
    o, g = np.zeros(4, np.int32), np.zeros((2, 2), np.int32)
    run_kernel(k, {"out": o, "grid": g})
    np.testing.assert_array_equal(o, [26, 27, 0, 0])
    np.testing.assert_array_equal(g, [[12, 13], [16, 17]])


def test_gathers_mix_scalar_and_vector_indices():
    a, out = tensor("A", F16, 3, L), tensor("out", F32, 4, L, out=True)
    k = kernel("gather", (a, out),
               Store(out, (i64(0), R8), load(a, i64(1), Ramp(i64(7), -1, L))),
               Store(out, (Ramp(i64(1), 1, 3), i64(1)), load(a, Ramp(i64(2), -1, 3), i64(2))))
    src = (np.arange(3 * L).reshape(3, L) + 0.25).astype(np.float16)
    o = np.zeros((4, L), np.float32)
    run_kernel(k, {"A": src, "out": o})
    np.testing.assert_array_equal(o[0], src[1, ::-1].astype(np.float32))
    np.testing.assert_array_equal(o[1:, 1], src[::-1, 2].astype(np.float32))


def test_vector_select_evaluates_both_sides_and_picks_per_lane():
    x, out = tensor("x", F32, 4), tensor("out", F32, out=True)
    safe = Select(lt(R8, i64(4)), Cast(R8, F32), Const(-1.0, F32), F32)
    k = kernel("sel", (x, out), Store(out, (R8,), safe))
    o = np.zeros(L, np.float32)
    run_kernel(k, {"x": np.zeros(4, np.float32), "out": o})
    np.testing.assert_array_equal(o, [0, 1, 2, 3, -1, -1, -1, -1])
    unsafe = Select(lt(R8, i64(4)), load(x, R8), Const(0.0, F32), F32)  # x[4..7] is read, and fails
    with pytest.raises(IndexError, match=r"index \(4,\) out of bounds for 'x'"):
        run_kernel(kernel("sel2", (x, out), Store(out, (R8,), unsafe)), {"x": np.zeros(4, np.float32), "out": o})


def test_scalar_conditions_pick_one_side_and_fill_the_lanes():
    flag = Sym("flag", BOOL, "scalar")
    x, out, both = tensor("x", F32, 4), tensor("out", F32, out=True), tensor("both", BOOL, out=True)
    pick = Select(Var(flag), Const(2.0, F32), load(x, R8), F32)  # x[4..7] would fail: never read
    logic = Binary("or", Var(flag), lt(load(x, R8), Const(0.0, F32)), BOOL)
    k = kernel("pick", (ScalarParam(flag), x, out, both), Store(out, (R8,), pick), Store(both, (R8,), logic))
    o, b = np.zeros(L, np.float32), np.zeros(L, np.bool_)
    run_kernel(k, {"flag": True, "x": np.zeros(4, np.float32), "out": o, "both": b})
    assert (o == 2.0).all() and b.all()


def test_vector_and_or_combine_lanes():
    out = tensor("out", BOOL, out=True)
    low, odd = lt(R8, i64(4)), Binary("==", Binary("%", R8, i64(2), I64), i64(1), BOOL)
    k = kernel("logic", (out,), Store(out, (R8,), Binary("or", Binary("and", low, odd, BOOL),
                                                        Binary("==", R8, i64(6), BOOL), BOOL)))
    o = np.zeros(L, np.bool_)
    run_kernel(k, {"out": o})
    np.testing.assert_array_equal(o, [0, 1, 0, 1, 0, 0, 1, 0])


def test_vector_conditions_and_mixed_lane_counts_are_rejected():
    out = tensor("out", I32, out=True)
    i = Sym("i", I64, "loop")
    bad = [If(lt(R8, i64(3)), (Store(out, (i64(0),), Const(1, I32)),)),
           For(i, i64(0), R8, 1, (), "i"),
           Store(out, (R8,), Cast(Ramp(i64(0), 1, 4), I32))]
    for s in bad:
        with pytest.raises(TypeError, match="scalar|lane counts"):
            run_kernel(kernel("bad", (out,), s, verified=False), {"out": np.zeros(L, np.int32)})


def test_trace_sees_vector_locals_as_arrays():
    v, out = Sym("v", I64, "local", lanes=L), tensor("out", I64, out=True)
    k = kernel("traced", (out,), Assign(v, R8), Store(out, (R8,), Var(v)))
    seen = []
    run_kernel(k, {"out": np.zeros(L, np.int64)}, trace=lambda s, env: seen.append(dict(env)))
    np.testing.assert_array_equal(seen[-1]["v"], np.arange(L))


# ------------------------------------------------------- through the vectorize transform


SIZES = (0, 1, 7, 8, 9, 64, 100)


def compiled(text: str, vectorized: bool = True) -> tuple[Kernel, Kernel]:
    """(vectorized, unscheduled) loop IR of the one kernel in `text`."""
    plain = "\n".join(line for line in text.splitlines() if not line.startswith("@schedule"))
    pair = []
    for src in (text, plain):
        job = compile_source(Source("vec.tk", src), CompileOptions(), stop_after="schedule")
        pair.append(job.program.kernels[0])
    if vectorized:
        assert any(isinstance(n, (Ramp, HReduce)) for n in _nodes(pair[0])), "nothing was vectorized"
    return pair[0], pair[1]


def _nodes(k: Kernel):
    from dsl.lowering.rewrite import stmt_exprs, walk_expr, walk_stmts

    return [n for s in walk_stmts(k.body) for e in stmt_exprs(s) for n in walk_expr(e)]


def random(rng, t: ScalarType, shape):
    if t.is_float:
        return rng.standard_normal(shape).astype(t.numpy_name)
    lo, hi = ops.int_range(t)
    return rng.integers(lo, hi, shape, dtype=t.numpy_name, endpoint=True)


def run_both(text: str, inputs: dict, outputs: dict, vectorized: bool = True):
    """Run the vectorized and the unscheduled kernel; return their outputs."""
    vec, plain = compiled(text, vectorized)
    results = []
    for k in (vec, plain):
        outs = {name: np.zeros(shape, dtype) for name, (shape, dtype) in outputs.items()}
        run_kernel(k, {**inputs, **outs})
        results.append(outs)
    return results


SAXPY = """@schedule(vectorize(i, 8{tail}))
def saxpy(alpha: {t}, x: {t}[N], y: {t}[N], out: {t}[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
"""


@pytest.mark.parametrize("t,tail", [(I32, ""), (I64, ", tail=mask"), (F32, ""), (F32, ", tail=mask")])
@pytest.mark.parametrize("n", SIZES)
def test_saxpy_vectorized_equals_scalar(t, tail, n):
    rng = np.random.default_rng(n)
    alpha = 1.5 if t.is_float else int(random(rng, t, ()))
    inputs = {"alpha": alpha, "x": random(rng, t, n), "y": random(rng, t, n)}
    vec, plain = run_both(SAXPY.format(t=t.name, tail=tail), inputs, {"out": (n, t.numpy_name)})
    assert_same(vec["out"], plain["out"])


DOT = """@options(reassociate=True)
@schedule(vectorize(i, 8{tail}))
def dot(x: {t}[N], y: {t}[N], out: {t}[1]):
    acc = {t}(0)
    for i in range(N):
        acc += x[i] * y[i]
    out[0] = acc
"""


@pytest.mark.parametrize("t,tail", [(I32, ", tail=mask"), (I64, ""), (U8, ", tail=mask")])
@pytest.mark.parametrize("n", SIZES)
def test_integer_dot_vectorized_equals_scalar_exactly(t, tail, n):
    rng = np.random.default_rng(n)
    inputs = {"x": random(rng, t, n), "y": random(rng, t, n)}
    vec, plain = run_both(DOT.format(t=t.name, tail=tail), inputs, {"out": (1, t.numpy_name)})
    assert_same(vec["out"], plain["out"])


@pytest.mark.parametrize("n", (*SIZES, 10_000))
def test_float_dot_vectorized_is_close_to_scalar(n):
    rng = np.random.default_rng(n)
    inputs = {"x": random(rng, F32, n), "y": random(rng, F32, n)}
    vec, plain = run_both(DOT.format(t="f32", tail=", tail=mask"), inputs, {"out": (1, "float32")})
    np.testing.assert_allclose(vec["out"], plain["out"], rtol=1e-4, atol=1e-3)


ROW_SUM_INNER = """@schedule(vectorize(c, 8{tail}))
def row_sum(X: i32[R, C], out: i32[R]):
    out[r] = sum(X[r, c])
"""


@pytest.mark.parametrize("tail", ["", ", tail=mask"])
@pytest.mark.parametrize("n", SIZES)
def test_row_sum_vectorizing_the_inner_loop(tail, n):
    rng = np.random.default_rng(n)
    x = random(rng, I32, (3, n))
    vec, plain = run_both(ROW_SUM_INNER.format(tail=tail), {"X": x}, {"out": (3, "int32")})
    assert_same(vec["out"], plain["out"])
    assert_same(vec["out"], x.sum(axis=1, dtype=np.int32))


ROW_SUM_OUTER = """@schedule(vectorize(r, 8))
def row_sum(X: i32[R, C], out: i32[R]):
    out[r] = sum(X[r, c])
"""


@pytest.mark.parametrize("n", (9, 64))
def test_row_sum_vectorizing_the_outer_loop(n):
    x = random(np.random.default_rng(n), I32, (n, 5))
    vec, plain = run_both(ROW_SUM_OUTER, {"X": x}, {"out": (n, "int32")})
    assert_same(vec["out"], plain["out"])


ROWS_8 = """@schedule(vectorize(r))
def rows(X: i32[8, C], out: i32[8]):
    for r in range(8):
        acc = i32(0)
        for c in range(C):
            acc += X[r, c]
        out[r] = acc
"""


def test_outer_loop_local_accumulator_with_constant_trip_count():
    x = random(np.random.default_rng(0), I32, (8, 5))
    vec, plain = run_both(ROWS_8, {"X": x}, {"out": (8, "int32")})
    assert_same(vec["out"], plain["out"])


PRIVATE = """@schedule({schedule})
def private(x: i32[N], y: i32[N], out: i32[N]):
    for i in range(N):
        t = x[i] * 3
        out[i] = t + t * y[i]
"""


@pytest.mark.parametrize("n", SIZES)
def test_private_vector_local(n):
    rng = np.random.default_rng(n)
    inputs = {"x": random(rng, I32, n), "y": random(rng, I32, n)}
    text = PRIVATE.format(schedule="split(i, 8, tail=mask), vectorize(i.inner)")
    vec, plain = run_both(text, inputs, {"out": (n, "int32")})
    assert_same(vec["out"], plain["out"])
    assert any(isinstance(s, Assign) and s.sym.lanes == L for s in _stmts(compiled(text)[0]))


def _stmts(k: Kernel):
    from dsl.lowering.rewrite import walk_stmts

    return list(walk_stmts(k.body))


def test_private_vector_local_with_a_peeled_tail():
    compiled(PRIVATE.format(schedule="vectorize(i, 8)"))


COUNT = """@schedule(vectorize(i, 8))
def count(x: i32[N], out: i64[1]):
    c = 0
    for i in range(N):
        c = c + 1
    out[0] = c
"""


def test_carried_scalar_local_counts_every_iteration():
    vec, plain = run_both(COUNT, {"x": np.zeros(20, np.int32)}, {"out": (1, "int64")}, vectorized=False)
    assert vec["out"][0] == plain["out"][0] == 20


GATHER = """@schedule(vectorize(i, 8, tail=mask))
def column(X: i64[N, 3], hist: i64[2], out: i64[N]):
    for i in range(N):
        out[i] = X[i, 1] << (X[i, 0] % 70)
        hist[1] = hist[1] + X[i, 0] // (X[i, 1] % 5)
"""


@pytest.mark.parametrize("n", SIZES)
def test_strided_gather_and_a_reduction_store(n):
    x = random(np.random.default_rng(n), I64, (n, 3))
    vec, plain = run_both(GATHER, {"X": x}, {"out": (n, "int64"), "hist": (2, "int64")})
    assert_same(vec["out"], plain["out"])
    assert_same(vec["hist"], plain["hist"])
