"""Expression code generation: one IR expression -> one LLVM value.

`and`/`or` and `Select` evaluate only the side they need: when that side may
load memory they branch (a guard like `i < n and x[i] > 0` must protect the
load); when it cannot, a plain `and`/`select` is emitted, which vectorizes.

Vector expressions (`lanes_of(e) > 1`, see vectors.py) are `<L x T>` values; a
scalar operand of an operation with a vector operand is splatted. On vectors
`and`/`or` are lane-wise and a vector-condition `Select` is an LLVM `select`:
the vectorizer only leaves loads there that are masked or in bounds.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from dsl.lowering.ir import (AlignGap, Binary, Broadcast, Cast, Const, Expr, Fma, HReduce, Load, Overlaps,
                             Ramp, Select, Shape, Shuffle, TargetOp, Threads, Unary, UnitStrides, Var)
from dsl.lowering.vector import lanes_of

from ..errors import BackendError
from .arith import COMPARISONS, emit_binary, emit_compare
from .context import FunctionContext
from .float_bounds import fits_integer, guarded_by
from .ltypes import I1, I32, I64, const, int_const, reg_type, with_lanes
from .mathops import emit_cast, emit_fma, emit_unary
from .memory import load_element, overlaps
from .runtime import num_threads
from .streaming import align_gap
from .target_ops import emit_target_op
from .vector_memory import vector_load
from .vectors import hreduce, ramp, splat, widen


def emit_expr(cx: FunctionContext, e: Expr) -> ir.Value:
    """The LLVM value of expression `e`, emitted at the builder's position."""
    match e:
        case Const(value=value, type=t):
            return const(t, value)
        case Var(sym=sym):
            return cx.load_var(sym)
        case Shape(tensor=tensor, axis=axis):
            return cx.tensor(tensor).sizes[axis]
        case Load(tensor=tensor, indices=indices) if e.mask is None and lanes_of(e) == 1:
            return load_element(cx, cx.tensor(tensor), [emit_expr(cx, i) for i in indices])
        case Load():
            return vector_load(cx, e, emit_expr)
        case Binary(op="and" | "or"):
            return _logical(cx, e)
        case Binary(op=op, lhs=lhs, rhs=rhs) if op in COMPARISONS:
            return emit_compare(cx, op, lhs.type, *_operands(cx, lhs, rhs))
        case Binary(op=op, lhs=lhs, rhs=rhs, type=t):
            return emit_binary(cx, op, t, *_operands(cx, lhs, rhs), rhs)
        case Unary(op=op, operand=x, type=t):
            return emit_unary(cx, op, t, emit_expr(cx, x))
        case Cast(value=v, type=t):
            return emit_cast(cx, emit_expr(cx, v), v.type, t, in_range=fits_integer(cx, v, t))
        case Fma(a=a, b=b, c=c):
            return emit_fma(cx, *_operands(cx, a, b, c))
        case TargetOp():
            return emit_target_op(cx, e, emit_expr)
        case Select():
            return _select(cx, e)
        case Overlaps(a=a, b=b):
            return overlaps(cx, cx.tensor(a), cx.tensor(b))
        case AlignGap():
            return align_gap(cx, e, [emit_expr(cx, i) for i in e.indices])
        case UnitStrides():  # lowering.unit_strides folded every place it may stand
            raise BackendError(f"{cx.kernel.name}: unit_strides() outside a branch's condition")
        case Threads():
            return cx.builder.zext(cx.builder.call(num_threads(cx.module, cx.module.triple), []), I64)
        case Ramp(base=base, stride=stride, lanes=lanes):
            return ramp(cx, emit_expr(cx, base), stride, lanes)
        case Broadcast(value=v, lanes=lanes):
            return splat(cx, emit_expr(cx, v), lanes)
        case HReduce(op=op, value=v, type=t):
            return hreduce(cx, op, t, emit_expr(cx, v))
        case Shuffle(a=a, b=b, mask=mask):
            picks = ir.Constant(ir.VectorType(I32, len(mask)), [int_const(I32, m) for m in mask])
            return cx.builder.shuffle_vector(emit_expr(cx, a), emit_expr(cx, b), picks)
    raise BackendError(f"cannot compile expression {type(e).__name__} in {cx.kernel.name}")


def _guarded(cx: FunctionContext, cond: Expr, e: Expr) -> ir.Value:
    """`e`, where `cond` holds: conversions in it may use what `cond` bounds (float_bounds.py)."""
    with guarded_by(cx, cond):
        return emit_expr(cx, e)


def _operands(cx: FunctionContext, *operands: Expr) -> list[ir.Value]:
    """The values of `operands`, scalars splatted when another one is a vector."""
    return widen(cx, *(emit_expr(cx, x) for x in operands))


def _logical(cx: FunctionContext, e: Binary) -> ir.Value:
    """Short-circuit `and`/`or`: the right side runs only if it decides the result
    (on vectors, lane-wise `and`/`or` of both sides)."""
    bld = cx.builder
    if lanes_of(e) > 1 or not may_load(e.rhs):
        left, right = _operands(cx, e.lhs, e.rhs)
        return bld.and_(left, right) if e.op == "and" else bld.or_(left, right)
    left = emit_expr(cx, e.lhs)
    decided = ir.Constant(I1, 0 if e.op == "and" else 1)
    if e.op == "and":
        return _branch(cx, left, lambda: emit_expr(cx, e.rhs), lambda: decided, I1)
    return _branch(cx, left, lambda: decided, lambda: emit_expr(cx, e.rhs), I1)


def _select(cx: FunctionContext, e: Select) -> ir.Value:
    lanes = lanes_of(e)
    if lanes_of(e.cond) > 1 or not (may_load(e.a) or may_load(e.b)):
        cond = emit_expr(cx, e.cond)
        a, b = widen(cx, _guarded(cx, e.cond, e.a), emit_expr(cx, e.b), lanes=lanes)
        return cx.builder.select(cond, a, b)
    cond = emit_expr(cx, e.cond)
    return _branch(cx, cond, lambda: splat(cx, emit_expr(cx, e.a), lanes),
                   lambda: splat(cx, emit_expr(cx, e.b), lanes), with_lanes(reg_type(e.type), lanes))


def _branch(cx: FunctionContext, cond: ir.Value, then: Callable[[], ir.Value],
            orelse: Callable[[], ir.Value], typ: ir.Type) -> ir.Value:
    """Evaluate `then()` or `orelse()` on a branch of `cond`; join with a phi."""
    bld = cx.builder
    then_block, else_block = cx.new_block("sel.then"), cx.new_block("sel.else")
    join = cx.new_block("sel.join")
    bld.cbranch(cond, then_block, else_block)
    incoming = []
    for block, arm in ((then_block, then), (else_block, orelse)):
        bld.position_at_end(block)
        value = arm()
        incoming.append((value, bld.block))
        bld.branch(join)
    bld.position_at_end(join)
    phi = bld.phi(typ)
    for value, block in incoming:
        phi.add_incoming(value, block)
    return phi


def may_load(e: Expr) -> bool:
    """True when evaluating `e` may read tensor memory (so it cannot be speculated)."""
    match e:
        case Load(safe=True, indices=indices):  # proven in bounds: safe to read early
            return any(may_load(i) for i in indices)
        case Load():
            return True
        case Const() | Var() | Shape() | Overlaps() | Threads() | AlignGap():
            return False
        case Binary(lhs=lhs, rhs=rhs):
            return may_load(lhs) or may_load(rhs)
        case Unary(operand=x) | Cast(value=x):
            return may_load(x)
        case Fma(a=a, b=b, c=c) | Select(cond=a, a=b, b=c):
            return may_load(a) or may_load(b) or may_load(c)
        case Ramp(base=x) | Broadcast(value=x) | HReduce(value=x):
            return may_load(x)
        case Shuffle(a=a, b=b):
            return may_load(a) or may_load(b)
    return True
