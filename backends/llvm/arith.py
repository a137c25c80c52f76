"""Binary arithmetic and comparisons, with the semantics of docs/semantics.md.

Integer `//` and `%` floor, give 0 for a zero divisor and wrap MIN // -1 without
trapping (x86 `idiv` traps on both, so the divisor is replaced before dividing);
shifts clamp amounts >= the width; float min/max propagate NaN. Every rule is
written with selects, so it applies lane-wise to vector operands unchanged.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Broadcast, Const, Expr
from dsl.lowering.types import ScalarType

from ..errors import BackendError
from .context import FunctionContext
from .ltypes import int_const, lanes_of_type, scalar_of, with_lanes

COMPARISONS = frozenset({"==", "!=", "<", "<=", ">", ">="})


def emit_binary(cx: FunctionContext, op: str, t: ScalarType, a: ir.Value, b: ir.Value,
                rhs: Expr) -> ir.Value:
    """`a op b` on operands of type `t` (not comparisons, not and/or).

    `rhs` is the divisor's IR node: a constant divisor skips the zero/-1 guards.
    """
    if t.is_float:
        return _float_op(cx, op, a, b)
    return _int_op(cx, op, t, a, b, rhs)


def emit_compare(cx: FunctionContext, op: str, t: ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
    """A comparison giving i1: floats ordered except `!=` (true with NaN)."""
    bld = cx.builder
    if t.is_float:
        if op == "!=":
            return bld.fcmp_unordered("!=", a, b)
        return bld.fcmp_ordered(op, a, b)
    if t.is_signed:
        return bld.icmp_signed(op, a, b)
    return bld.icmp_unsigned(op, a, b)


def _float_op(cx: FunctionContext, op: str, a: ir.Value, b: ir.Value) -> ir.Value:
    bld, fmf = cx.builder, cx.fmf
    match op:
        case "+":
            return bld.fadd(a, b, flags=fmf)
        case "-":
            return bld.fsub(a, b, flags=fmf)
        case "*":
            return bld.fmul(a, b, flags=fmf)
        case "/":
            return bld.fdiv(a, b, flags=fmf)
        case "//":
            return _floor(cx, bld.fdiv(a, b, flags=fmf))
        case "%":
            # a - floor(a / b) * b: the result has the divisor's sign, as in Python.
            # No `contract` here: a fused multiply-subtract can flip that sign.
            q = _floor(cx, bld.fdiv(a, b, flags=fmf))
            return bld.fsub(a, bld.fmul(q, b))
        case "min" | "max":
            fn = cx.intrinsic("llvm.minimum" if op == "min" else "llvm.maximum", a.type, 2)
            return bld.call(fn, [a, b], fastmath=fmf)
    raise BackendError(f"float operator {op!r} is not supported")


def _floor(cx: FunctionContext, x: ir.Value) -> ir.Value:
    return cx.builder.call(cx.intrinsic("llvm.floor", x.type, 1), [x], fastmath=cx.fmf)


def _int_op(cx: FunctionContext, op: str, t: ScalarType, a: ir.Value, b: ir.Value,
            rhs: Expr) -> ir.Value:
    bld = cx.builder
    simple = {"+": bld.add, "-": bld.sub, "*": bld.mul, "&": bld.and_, "|": bld.or_, "^": bld.xor}
    if op in simple:
        return cx.reuse(op, a, b, lambda: simple[op](a, b))
    if op in ("//", "%"):
        return _floor_divmod(cx, op, t, a, b, guarded=not _safe_divisor(t, rhs))
    if op in ("<<", ">>"):
        return _shift(cx, op, t, a, b)
    if op in ("min", "max"):
        signed = "s" if t.is_signed else "u"
        return bld.call(cx.intrinsic(f"llvm.{signed}{op}", a.type, 2), [a, b])
    raise BackendError(f"integer operator {op!r} is not supported")


def _safe_divisor(t: ScalarType, rhs: Expr) -> bool:
    """True when `rhs` is a constant that can neither be 0 nor trap (-1 signed)."""
    if isinstance(rhs, Broadcast):
        rhs = rhs.value
    if not isinstance(rhs, Const):
        return False
    value = int(rhs.value) & ((1 << t.bits) - 1)
    if value == 0:
        return False
    return not (t.is_signed and value == (1 << t.bits) - 1)


def _floor_divmod(cx: FunctionContext, op: str, t: ScalarType, a: ir.Value, b: ir.Value,
                  guarded: bool) -> ir.Value:
    """Floor `a // b` or `a % b`; with `guarded`, b == 0 gives 0 and MIN // -1 wraps.

    Divisors 0 and -1 are replaced by 1 before dividing, which makes the
    remainder (0) come out right and leaves the quotient to two selects.
    """
    bld, ty = cx.builder, a.type
    zero, minus_one = int_const(ty, 0), int_const(ty, -1)
    divisor = b
    if guarded:
        bad = bld.icmp_unsigned("==", b, zero)
        if t.is_signed:
            bad = bld.or_(bad, bld.icmp_signed("==", b, minus_one))
        divisor = bld.select(bad, int_const(ty, 1), b)
    if not t.is_signed:
        result = bld.udiv(a, divisor) if op == "//" else bld.urem(a, divisor)
    elif op == "//":
        result = _signed_floor_div(bld, a, divisor)
    else:
        result = _signed_floor_mod(bld, a, divisor)
    if guarded and op == "//":
        if t.is_signed:
            result = bld.select(bld.icmp_signed("==", b, minus_one), bld.neg(a), result)
        result = bld.select(bld.icmp_unsigned("==", b, zero), zero, result)
    return result


def _needs_floor_fix(bld: ir.IRBuilder, r: ir.Value, divisor: ir.Value) -> ir.Value:
    """Truncating division rounded toward zero: step down when r != 0 and the
    signs of r and the divisor differ."""
    zero = int_const(r.type, 0)
    return bld.and_(bld.icmp_signed("!=", r, zero),
                    bld.icmp_signed("<", bld.xor(r, divisor), zero))


def _signed_floor_div(bld: ir.IRBuilder, a: ir.Value, divisor: ir.Value) -> ir.Value:
    fix = _needs_floor_fix(bld, bld.srem(a, divisor), divisor)
    return bld.sub(bld.sdiv(a, divisor), bld.zext(fix, a.type))


def _signed_floor_mod(bld: ir.IRBuilder, a: ir.Value, divisor: ir.Value) -> ir.Value:
    r = bld.srem(a, divisor)
    fix = _needs_floor_fix(bld, r, divisor)
    return bld.add(r, bld.select(fix, divisor, int_const(a.type, 0)))


def _shift(cx: FunctionContext, op: str, t: ScalarType, a: ir.Value, b: ir.Value) -> ir.Value:
    """Shifts with the amount taken as unsigned and clamped at the bit width."""
    bld, ty = cx.builder, a.type
    width = t.bits
    too_big = bld.icmp_unsigned(">=", b, int_const(b.type, width))
    amount = _resize_unsigned(bld, b, ty)
    # Mask so the shift itself never sees an amount >= width (that is poison).
    masked = bld.and_(amount, int_const(ty, width - 1))
    if op == "<<":
        return bld.select(too_big, int_const(ty, 0), bld.shl(a, masked))
    if t.is_signed:
        return bld.ashr(a, bld.select(too_big, int_const(ty, width - 1), masked))
    return bld.select(too_big, int_const(ty, 0), bld.lshr(a, masked))


def _resize_unsigned(bld: ir.IRBuilder, v: ir.Value, ty: ir.Type) -> ir.Value:
    """`v` zero-extended or truncated to `ty`'s integer width (lanes kept)."""
    have, want = scalar_of(v.type).width, scalar_of(ty).width
    if have == want:
        return v
    target = with_lanes(scalar_of(ty), lanes_of_type(v.type))
    if have > want:
        return bld.trunc(v, target)
    return bld.zext(v, target)
