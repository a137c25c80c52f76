"""Tensor element access and the overlap test used by entry checks.

Element address = data + sum(index[k] * stride[k]) elements. Accesses are
aligned to the element size only: numpy buffers promise nothing more.
"""

from __future__ import annotations

import llvmlite.ir as ir

from .context import FunctionContext, TensorArgs
from .ltypes import I64, int_const, mem_type

# Index arithmetic is bounds-checked before it runs, so it cannot overflow;
# `nsw` lets SCEV and the vectorizer reason about the addresses.
_NSW = ("nsw",)


def element_pointer(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value]) -> ir.Value:
    """The address of element `indices` of tensor `t`."""
    bld = cx.builder
    offset = None
    for index, stride in zip(indices, t.strides, strict=True):
        term = bld.mul(index, stride, flags=_NSW)
        offset = term if offset is None else bld.add(offset, term, flags=_NSW)
    if offset is None:
        return t.data
    etype = mem_type(t.param.dtype)
    return bld.gep(t.data, [offset], inbounds=True, source_etype=etype)


def load_element(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value]) -> ir.Value:
    """Load one element as its value type: f16 -> f32, bool byte -> i1."""
    bld = cx.builder
    dtype = t.param.dtype
    etype = mem_type(dtype)
    raw = bld.load(element_pointer(cx, t, indices), typ=etype, align=dtype.itemsize)
    if dtype.is_bool:
        # Any nonzero byte is true, as numpy reads a bool.
        return bld.icmp_unsigned("!=", raw, int_const(etype, 0))
    if dtype.is_float and dtype.bits == 16:
        return bld.fpext(raw, ir.FloatType())
    return raw


def store_element(cx: FunctionContext, t: TensorArgs, indices: list[ir.Value], value: ir.Value) -> None:
    """Store `value` (of the tensor's value type) into one element."""
    bld = cx.builder
    dtype = t.param.dtype
    ptr = element_pointer(cx, t, indices)
    if dtype.is_bool:
        value = bld.zext(value, mem_type(dtype))
    elif dtype.is_float and dtype.bits == 16:
        value = bld.fptrunc(value, mem_type(dtype))  # round to nearest even
    bld.store(value, ptr, align=dtype.itemsize)


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

