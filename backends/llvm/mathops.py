"""Unary operators, intrinsics (exp, erf, ...), fma and casts, on scalars and
lane-wise on vectors (the intrinsics are overloaded on `<L x T>`)."""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.types import ScalarType

from ..errors import BackendError
from .context import FunctionContext, intrinsic_suffix
from .ltypes import I1, float_const, int_const, lanes_of_type, reg_type, scalar_of, with_lanes
from .vectors import per_lane

# One-argument float intrinsics that map straight onto an LLVM intrinsic.
# llvm.tanh is lowered to a tanhf/tanh libcall on x86 by LLVM 22 itself; on a
# vector, LLVM calls tanhf once per lane (as it does for exp and log: there is
# no vector math library yet), which is slow but right.
_FLOAT_INTRINSICS = {
    "exp": "llvm.exp", "log": "llvm.log", "sqrt": "llvm.sqrt", "floor": "llvm.floor",
    "ceil": "llvm.ceil", "rint": "llvm.roundeven", "tanh": "llvm.tanh", "abs": "llvm.fabs",
}
_LIBM = {"erf": {32: "erff", 64: "erf"}}


def emit_unary(cx: FunctionContext, op: str, t: ScalarType, x: ir.Value) -> ir.Value:
    """`op x` for the unary operators and one-argument intrinsics of the IR."""
    bld = cx.builder
    match op:
        case "neg":
            if t.is_float:
                return bld.fneg(x, flags=cx.fmf)
            return bld.sub(int_const(x.type, 0), x)
        case "invert" | "not":
            return bld.xor(x, int_const(x.type, -1))
        case "abs" if t.is_int:
            # is_int_min_poison = false: abs(MIN) wraps to MIN.
            fn = cx.declare(f"llvm.abs.{intrinsic_suffix(x.type)}", x.type, [x.type, I1])
            return bld.call(fn, [x, ir.Constant(I1, 0)])
        case "opaque" if t.is_int and not isinstance(x.type, ir.VectorType):
            # An empty asm statement that returns its operand: the value
            # unchanged, but nothing the optimizer can see through.
            return bld.asm(ir.FunctionType(x.type, [x.type]), "", "=r,0", [x], side_effect=False)
        case "bits" | "from_bits":
            # `t` is the result type: the same bits, reinterpreted.
            return bld.bitcast(x, with_lanes(reg_type(t), lanes_of_type(x.type)))
        case "rsqrt" if t.is_float:
            root = _call1(cx, "llvm.sqrt", x)
            return bld.fdiv(float_const(x.type, 1.0), root, flags=cx.fmf)
    if t.is_float and op in _FLOAT_INTRINSICS:
        return _call1(cx, _FLOAT_INTRINSICS[op], x)
    if t.is_float and op in _LIBM and t.bits in _LIBM[op]:
        scalar = scalar_of(x.type)
        fn = cx.declare(_LIBM[op][t.bits], scalar, [scalar])
        if isinstance(x.type, ir.VectorType):
            # No vector erf in libm: one call per lane, for now.
            return per_lane(cx, fn, x)
        return bld.call(fn, [x], fastmath=cx.fmf)
    raise BackendError(f"unary operator {op!r} is not supported on {t}")


def _call1(cx: FunctionContext, base: str, x: ir.Value) -> ir.Value:
    return cx.builder.call(cx.intrinsic(base, x.type, 1), [x], fastmath=cx.fmf)


def emit_fma(cx: FunctionContext, a: ir.Value, b: ir.Value, c: ir.Value) -> ir.Value:
    """a * b + c rounded once (llvm.fma, never split)."""
    return cx.builder.call(cx.intrinsic("llvm.fma", a.type, 3), [a, b, c], fastmath=cx.fmf)


def emit_cast(cx: FunctionContext, v: ir.Value, src: ScalarType, dst: ScalarType,
              in_range: bool = False) -> ir.Value:
    """Convert `v` from `src` to `dst`: float->int saturates (unless `in_range`:
    the caller knows every value truncates into dst, a signed type, as
    float_bounds.fits_integer does), ->bool is `!= 0`."""
    bld = cx.builder
    if src == dst:
        return v
    dty = with_lanes(reg_type(dst), lanes_of_type(v.type))
    if dst.is_bool:
        if src.is_float:
            return bld.fcmp_unordered("!=", v, float_const(v.type, 0.0))
        return bld.icmp_unsigned("!=", v, int_const(v.type, 0))
    if src.is_bool:
        return bld.uitofp(v, dty) if dst.is_float else bld.zext(v, dty)
    if src.is_float and dst.is_float:
        return bld.fpext(v, dty) if dst.bits > src.bits else bld.fptrunc(v, dty)
    if src.is_float and dst.is_signed and in_range:
        return bld.fptosi(v, dty)
    if src.is_float and isinstance(v.type, ir.VectorType):
        return _saturate_lanes(cx, v, dst, dty)
    if src.is_float:
        kind = "fptosi" if dst.is_signed else "fptoui"
        name = f"llvm.{kind}.sat.{intrinsic_suffix(dty)}.{intrinsic_suffix(v.type)}"
        return bld.call(cx.declare(name, dty, [v.type]), [v])
    if dst.is_float:
        return bld.sitofp(v, dty) if src.is_signed else bld.uitofp(v, dty)
    return _int_resize(bld, v, src, dty)


def _int_resize(bld: ir.IRBuilder, v: ir.Value, src: ScalarType, dty: ir.Type) -> ir.Value:
    """int -> int: truncate, or extend by the source's signedness."""
    want, have = scalar_of(dty).width, scalar_of(v.type).width
    if want == have:
        return v
    if want < have:
        return bld.trunc(v, dty)
    return bld.sext(v, dty) if src.is_signed else bld.zext(v, dty)


def _saturate_lanes(cx: FunctionContext, v: ir.Value, dst: ScalarType, dty: ir.Type) -> ir.Value:
    """float vector -> int vector with llvm.fpto[su]i.sat's meaning, as selects
    around a plain conversion: x86 has no saturating vector conversion, and LLVM
    turns the intrinsic on a vector into one branchy scalar conversion per lane.

    Lanes in [lo, hi) convert (truncating); the others are replaced by 0 before
    converting, so the conversion never sees a value out of its range, then get
    MIN (below lo), MAX (at or above hi), or stay 0 (NaN).
    """
    bld = cx.builder
    width = scalar_of(dty).width
    lo, hi = (-(2 ** (width - 1)), 2 ** (width - 1)) if dst.is_signed else (0, 2 ** width)
    below = bld.fcmp_ordered("<", v, float_const(v.type, float(lo)))
    above = bld.fcmp_ordered(">=", v, float_const(v.type, float(hi)))
    inside = bld.and_(bld.fcmp_ordered(">=", v, float_const(v.type, float(lo))),
                      bld.fcmp_ordered("<", v, float_const(v.type, float(hi))))
    safe = bld.select(inside, v, float_const(v.type, 0.0))
    out = bld.fptosi(safe, dty) if dst.is_signed else bld.fptoui(safe, dty)
    out = bld.select(above, int_const(dty, hi - 1), out)
    return bld.select(below, int_const(dty, lo), out)
