"""Tensor element access and the overlap test used by entry checks.

Element address = data + sum(index[k] * stride[k]) elements. Accesses are
aligned to the element size only: numpy buffers promise nothing more.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.types import ScalarType

from .context import FunctionContext, TensorArgs
from .ltypes import I64, int_const, lanes_of_type, mem_type, with_lanes

# Index arithmetic is bounds-checked before it runs, so it cannot overflow;
# `nsw` lets SCEV and the vectorizer reason about the addresses.
_NSW = ("nsw",)


def element_pointer(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value],
                    inbounds: bool = True) -> ir.Value:
    """The address of element `indices` of tensor `t`.

    `inbounds=False` for the base of a masked vector access, which need not
    point into the tensor when every lane is masked off.
    """
    bld = cx.builder
    offset = None
    for index, stride in zip(indices, t.strides, strict=True):
        if _constant(index) == 0:
            continue
        if _constant(stride) != 1:
            index = cx.reuse("mul nsw", index, stride, lambda i=index, s=stride: bld.mul(i, s, flags=_NSW))
        offset = index if offset is None else cx.reuse(
            "add nsw", offset, index, lambda o=offset, i=index: bld.add(o, i, flags=_NSW))
    if offset is None:
        return t.data
    etype = mem_type(t.param.dtype)
    return bld.gep(t.data, [offset], inbounds=inbounds, source_etype=etype)


def _constant(value: ir.Value):
    """The integer a constant operand holds, else None. Leaving out `* 1` and
    `0 *` keeps the IR LLVM parses smaller (matmul_f32: 2540 of its 48k lines
    multiplied by a unit stride)."""
    return value.constant if isinstance(value, ir.Constant) else None


def load_element(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value]) -> ir.Value:
    """Load one element as its value type: f16 -> f32, bool byte -> i1."""
    dtype = t.param.dtype
    ptr = element_pointer(cx, t, indices)
    raw = cx.builder.load(ptr, typ=mem_type(dtype), align=dtype.itemsize)
    return from_memory(cx.builder, raw, dtype)


def store_element(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value], value: ir.Value) -> None:
    """Store `value` (of the tensor's value type) into one element."""
    dtype = t.param.dtype
    ptr = element_pointer(cx, t, indices)
    cx.builder.store(to_memory(cx.builder, value, dtype), ptr, align=dtype.itemsize)


def from_memory(bld: ir.IRBuilder, raw: ir.Value, dtype: ScalarType) -> ir.Value:
    """A loaded element (or vector of elements) as its value type: f16 -> f32, bool -> i1."""
    if dtype.is_bool:
        # Any nonzero byte is true, as numpy reads a bool.
        return bld.icmp_unsigned("!=", raw, int_const(raw.type, 0))
    if dtype.is_float and dtype.bits == 16:
        return bld.fpext(raw, with_lanes(ir.FloatType(), lanes_of_type(raw.type)))
    return raw


def to_memory(bld: ir.IRBuilder, value: ir.Value, dtype: ScalarType) -> ir.Value:
    """A value (or vector) of `dtype`'s value type as stored: f32 -> f16, i1 -> byte."""
    lanes = lanes_of_type(value.type)
    if dtype.is_bool:
        return bld.zext(value, with_lanes(mem_type(dtype), lanes))
    if dtype.is_float and dtype.bits == 16:
        return bld.fptrunc(value, with_lanes(mem_type(dtype), lanes))  # round to nearest even
    return value


def overlaps(cx: FunctionContext, a: TensorArgs, b: TensorArgs) -> ir.Value:
    """i1: both tensors are non-empty and their byte ranges intersect."""
    bld = cx.builder
    a_empty, a_lo, a_hi = _byte_range(cx, a)
    b_empty, b_lo, b_hi = _byte_range(cx, b)
    meet = bld.and_(bld.icmp_unsigned("<=", a_lo, b_hi), bld.icmp_unsigned("<=", b_lo, a_hi))
    empty = bld.or_(a_empty, b_empty)
    return bld.and_(meet, bld.xor(empty, ir.Constant(empty.type, 1)))


def _byte_range(cx: FunctionContext, t: TensorArgs) -> tuple[ir.Value, ir.Value, ir.Value]:
    """(is_empty, first byte, last byte) of the memory tensor `t` can touch."""
    bld = cx.builder
    zero, one = int_const(I64, 0), int_const(I64, 1)
    lo, hi = zero, zero
    empty = ir.Constant(ir.IntType(1), 0)
    for size, stride in zip(t.sizes, t.strides, strict=True):
        empty = bld.or_(empty, bld.icmp_signed("<=", size, zero))
        reach = bld.mul(bld.sub(size, one), stride)
        negative = bld.icmp_signed("<", reach, zero)
        lo = bld.add(lo, bld.select(negative, reach, zero))
        hi = bld.add(hi, bld.select(negative, zero, reach))
    itemsize = int_const(I64, t.param.dtype.itemsize)
    base = bld.ptrtoint(t.data, I64)
    first = bld.add(base, bld.mul(lo, itemsize))
    last = bld.add(base, bld.add(bld.mul(hi, itemsize), bld.sub(itemsize, one)))
    return empty, first, last

