"""Vector values (from the `vectorize` transform): splats, ramps, horizontal
reductions and per-lane calls.

An expression with `lanes_of(e) == L > 1` is an LLVM `<L x T>` value (bool ->
`<L x i1>`). A scalar operand next to a vector is splatted (`widen`), so the
scalar operators of arith.py and mathops.py apply lane-wise unchanged.
Vector loads and stores are in vector_memory.py.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.types import ScalarType

from ..errors import BackendError
from .context import FunctionContext, intrinsic_suffix
from .ltypes import I32, float_const, int_const, lanes_of_type

_FLOAT_REDUCE = {"+": "fadd", "*": "fmul", "min": "fminimum", "max": "fmaximum"}
_INT_REDUCE = {"+": "add", "*": "mul"}


def splat(cx: FunctionContext, v: ir.Value, lanes: int) -> ir.Value:
    """`v` repeated in `lanes` lanes; a vector (or `lanes` == 1) is returned as it is.

    >>> splat(cx, x, 4)          # doctest: +SKIP
    shufflevector (insertelement <4 x float> zeroinitializer, float %x, i32 0), ..., zeroinitializer
    """
    if lanes <= 1 or isinstance(v.type, ir.VectorType):
        return v
    vty = ir.VectorType(v.type, lanes)
    if isinstance(v, ir.Constant):
        return ir.Constant(vty, v)
    bld = cx.builder
    first = bld.insert_element(ir.Constant(vty, None), v, int_const(I32, 0))
    return bld.shuffle_vector(first, ir.Constant(vty, None), ir.Constant(ir.VectorType(I32, lanes), 0))


def widen(cx: FunctionContext, *values: ir.Value, lanes: int = 1) -> list[ir.Value]:
    """`values` with every scalar splatted to the widest lane count among them
    (at least `lanes`): the implicit broadcast of a scalar operand."""
    width = max([lanes, *(lanes_of_type(v.type) for v in values)])
    return [splat(cx, v, width) for v in values]


def ramp(cx: FunctionContext, base: ir.Value, stride: int, lanes: int) -> ir.Value:
    """The vector (base, base + stride, ..., base + (lanes - 1) * stride).

    >>> str(ramp(cx, int_const(I64, 4), 2, 4))        # doctest: +SKIP
    '<4 x i64> <i64 4, i64 6, i64 8, i64 10>'
    """
    vty = ir.VectorType(base.type, lanes)
    if isinstance(base, ir.Constant):
        return ir.Constant(vty, [int_const(base.type, base.constant + k * stride) for k in range(lanes)])
    steps = ir.Constant(vty, [int_const(base.type, k * stride) for k in range(lanes)])
    return cx.builder.add(splat(cx, base, lanes), steps)


def hreduce(cx: FunctionContext, op: str, t: ScalarType, v: ir.Value) -> ir.Value:
    """The lanes of `v` combined with `op` (+ * min max) into one scalar of type `t`.

    Float sums and products start from the identity (-0.0, 1.0) and carry the
    kernel's fast-math flags: `reassoc` (a tree reduction) only when the kernel
    allows reassociation, else LLVM keeps the lane order. min/max propagate NaN.
    """
    if not isinstance(v.type, ir.VectorType):
        return v
    elem = v.type.element
    bld = cx.builder
    if t.is_float:
        name = f"llvm.vector.reduce.{_FLOAT_REDUCE[op]}.{intrinsic_suffix(v.type)}"
        if op in ("+", "*"):
            start = float_const(elem, -0.0 if op == "+" else 1.0)
            return bld.call(cx.declare(name, elem, [elem, v.type]), [start, v], fastmath=cx.fmf)
        return bld.call(cx.declare(name, elem, [v.type]), [v])
    kind = _INT_REDUCE.get(op)
    if kind is None:
        if op not in ("min", "max"):
            raise BackendError(f"cannot reduce the lanes of a vector with {op!r}")
        kind = ("s" if t.is_signed else "u") + op
    name = f"llvm.vector.reduce.{kind}.{intrinsic_suffix(v.type)}"
    return bld.call(cx.declare(name, elem, [v.type]), [v])


def per_lane(cx: FunctionContext, fn: ir.Function, v: ir.Value) -> ir.Value:
    """`fn` (a scalar function of one argument) applied to each lane of `v`.

    For library functions without a vector version (erf): one call per lane,
    through extractelement / insertelement.
    """
    bld = cx.builder
    out = ir.Constant(v.type, None)
    for k in range(v.type.count):
        lane = bld.extract_element(v, int_const(I32, k))
        out = bld.insert_element(out, bld.call(fn, [lane], fastmath=cx.fmf), int_const(I32, k))
    return out
