"""How language types map to LLVM types: in registers, in memory, in the C ABI.

bool is i1 in registers but a byte (i8) in memory and in the C ABI; f16 is
`half` in memory only (it computes as f32). A vector value of L lanes is an
LLVM `<L x T>` of the scalar type T (bool -> `<L x i1>`); the helpers below
work on scalar and vector types alike.
"""

from __future__ import annotations

import llvmlite.ir as ir
import numpy as np

from dsl.lowering.types import ScalarType

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
_NP_FLOATS = {16: np.float16, 32: np.float32, 64: np.float64}
_FLOATS = {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}


def reg_type(t: ScalarType) -> ir.Type:
    """The LLVM type of a value of type `t` in registers (bool -> i1)."""
    if t.is_float:
        return _FLOATS[t.bits]
    return ir.IntType(t.bits)


def mem_type(t: ScalarType) -> ir.Type:
    """The LLVM type of one tensor element of dtype `t` (bool -> i8, f16 -> half)."""
    if t.is_bool:
        return I8
    return reg_type(t)


def abi_type(t: ScalarType) -> ir.Type:
    """The LLVM type of a scalar argument of type `t` (bool travels as a byte)."""
    return mem_type(t)


def const(t: ScalarType, value: int | float | bool) -> ir.Constant:
    """An LLVM constant of type `t`; ints are wrapped to the type's width.

    >>> str(const(U8, 255))
    'i8 -1'
    """
    if t.is_float:
        # Round to the type first (llvmlite rejects doubles that overflow f32).
        rounded = float(_NP_FLOATS[t.bits](value))
        return ir.Constant(reg_type(t), rounded)
    if t.is_bool:
        return ir.Constant(I1, int(bool(value)))
    bits = t.bits
    v = int(value) & ((1 << bits) - 1)
    if v >= 1 << (bits - 1):
        v -= 1 << bits
    return ir.Constant(ir.IntType(bits), v)


def int_const(typ: ir.Type, value: int) -> ir.Constant:
    """An integer constant of LLVM type `typ` (or a splat of one, if `typ` is a
    vector type), wrapped to its width.

    >>> str(int_const(ir.VectorType(I8, 2), 255))
    '<2 x i8> <i8 -1, i8 -1>'
    """
    bits = scalar_of(typ).width
    v = value & ((1 << bits) - 1)
    if v >= 1 << (bits - 1) and bits > 1:
        v -= 1 << bits
    return ir.Constant(typ, v)


def float_const(typ: ir.Type, value: float) -> ir.Constant:
    """A float constant of LLVM type `typ`, splatted if `typ` is a vector type."""
    return ir.Constant(typ, value)


def lanes_of_type(typ: ir.Type) -> int:
    """The lane count of an LLVM type: its length for a vector, else 1."""
    return typ.count if isinstance(typ, ir.VectorType) else 1


def scalar_of(typ: ir.Type) -> ir.Type:
    """The element type of a vector type; a scalar type itself."""
    return typ.element if isinstance(typ, ir.VectorType) else typ


def with_lanes(typ: ir.Type, lanes: int) -> ir.Type:
    """`typ`'s scalar type with `lanes` lanes: `<lanes x T>`, or T when lanes is 1.

    >>> str(with_lanes(I32, 8)), str(with_lanes(ir.VectorType(I32, 8), 1))
    ('<8 x i32>', 'i32')
    """
    scalar = scalar_of(typ)
    return ir.VectorType(scalar, lanes) if lanes > 1 else scalar
