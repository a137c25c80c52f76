"""Vector loads and stores: contiguous where possible, else gather/scatter.

An access whose innermost index is a unit-stride ramp (`ramp(b, 1, L)` or
`s + ramp(b, 1, L)`, the other indices scalar) into a tensor whose innermost
stride is the constant 1 (the `__unit` body, see versions.py) touches L
adjacent elements: one `load <L x T>` / `store <L x T>`, or `llvm.masked.load`
/ `llvm.masked.store` under a mask. Anything else computes L addresses and uses
`llvm.masked.gather` / `llvm.masked.scatter` (the scatter writes lanes in
increasing order, so on a collision the highest lane wins, as in the
interpreter). Masked-off lanes are never touched (LLVM's masked intrinsics
promise that); a masked load gives zero in them.

Alignment is the element size, never more: numpy buffers promise nothing else.
LLVM 22's masked intrinsics take it as an `align` attribute on the pointer.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from dsl.lowering.ir import Binary, Broadcast, Expr, Load, Ramp, Store
from dsl.lowering.vector import lanes_of

from ..errors import BackendError
from .context import FunctionContext, TensorArgs, intrinsic_suffix
from .ltypes import I1, PTR, mem_type
from .memory import element_pointer, from_memory, to_memory
from .vectors import splat, widen

Emit = Callable[[FunctionContext, Expr], ir.Value]
_NSW = ("nsw",)


def vector_load(cx: FunctionContext, e: Load, emit: Emit) -> ir.Value:
    """The `<L x T>` value of a vector `Load` (L = lanes_of(e)), as its value type."""
    t = cx.tensor(e.tensor)
    lanes = lanes_of(e)
    dtype = t.param.dtype
    vty = ir.VectorType(mem_type(dtype), lanes)
    base = _contiguous_base(cx, t, e.indices, emit, masked=e.mask is not None)
    if base is None:
        ptrs = _addresses(cx, t, e.indices, lanes, emit)
    mask = _mask(cx, e.mask, lanes, emit)
    if base is not None and mask is None:
        raw = cx.builder.load(base, typ=vty, align=dtype.itemsize)
    elif base is not None:
        raw = _masked_call(cx, "load", vty, [base, mask, ir.Constant(vty, None)], dtype.itemsize)
    else:
        mask = mask if mask is not None else _all_true(lanes)
        raw = _masked_call(cx, "gather", vty, [ptrs, mask, ir.Constant(vty, None)], dtype.itemsize)
    return from_memory(cx.builder, raw, dtype)


def vector_store(cx: FunctionContext, s: Store, emit: Emit) -> None:
    """A `Store` of a vector value, or at vector indices (a scalar value is splatted)."""
    t = cx.tensor(s.tensor)
    lanes = max(lanes_of(x) for x in (*s.indices, s.value, *([s.mask] if s.mask is not None else [])))
    dtype = t.param.dtype
    if all(lanes_of(i) == 1 for i in s.indices):
        raise BackendError(f"{cx.kernel.name}: a vector value stored at a scalar index of '{t.param.name}'")
    base = _contiguous_base(cx, t, s.indices, emit, masked=s.mask is not None)
    if base is None:
        ptrs = _addresses(cx, t, s.indices, lanes, emit)
    value = to_memory(cx.builder, splat(cx, emit(cx, s.value), lanes), dtype)
    mask = _mask(cx, s.mask, lanes, emit)
    if base is not None and mask is None:
        cx.builder.store(value, base, align=dtype.itemsize)
    elif base is not None:
        _masked_call(cx, "store", None, [value, base, mask], dtype.itemsize)
    else:
        mask = mask if mask is not None else _all_true(lanes)
        _masked_call(cx, "scatter", None, [value, ptrs, mask], dtype.itemsize)


def unit_ramp_parts(e: Expr) -> tuple[Expr, ...] | None:
    """Scalar expressions whose sum is lane 0 of `e`, if `e` is lane 0 + (0, 1, 2, ...).

    >>> unit_ramp_parts(Binary("+", b, Ramp(Const(0), 1, 8), I64))   # doctest: +SKIP
    (b, Const(0))
    """
    match e:
        case Ramp(base=base, stride=1):
            return (base,)
        case Binary(op="+", lhs=lhs, rhs=rhs):
            for scalar, rest in ((lhs, rhs), (rhs, lhs)):
                if lanes_of(scalar) == 1:
                    parts = unit_ramp_parts(rest)
                    if parts is not None:
                        return (scalar, *parts)
    return None


def _scalar_index(e: Expr) -> Expr | None:
    """`e` if it is the same in every lane (a scalar or a broadcast), else None."""
    if isinstance(e, Broadcast):
        return e.value
    return e if lanes_of(e) == 1 else None


def _contiguous_base(cx: FunctionContext, t: TensorArgs, indices: tuple[Expr, ...], emit: Emit,
                     masked: bool) -> ir.Value | None:
    """The address of lane 0 when the access is contiguous (see the module doc), else None."""
    stride = t.strides[-1] if t.strides else None
    if not (isinstance(stride, ir.Constant) and stride.constant == 1):
        return None
    outer = [_scalar_index(i) for i in indices[:-1]]
    inner = unit_ramp_parts(indices[-1])
    if inner is None or any(i is None for i in outer):
        return None
    bld = cx.builder
    values = [emit(cx, i) for i in outer]
    first = emit(cx, inner[0])
    for part in inner[1:]:
        first = bld.add(first, emit(cx, part), flags=_NSW)
    return element_pointer(cx, t, [*values, first], inbounds=not masked)


def _addresses(cx: FunctionContext, t: TensorArgs, indices: tuple[Expr, ...], lanes: int,
               emit: Emit) -> ir.Value:
    """The `<L x ptr>` of the elements data + sum(index[k] * stride[k]), lane-wise."""
    bld = cx.builder
    offset = None
    for index, stride in zip(indices, t.strides, strict=True):
        term = bld.mul(*widen(cx, emit(cx, index), stride), flags=_NSW)
        offset = term if offset is None else bld.add(*widen(cx, offset, term), flags=_NSW)
    offset = splat(cx, offset, lanes)
    # No `inbounds`: the address of a masked-off lane may lie outside the tensor.
    ptrs = bld.gep(t.data, [offset], source_etype=mem_type(t.param.dtype))
    ptrs.type = ir.VectorType(PTR, lanes)  # llvmlite types a GEP by its base pointer
    return ptrs


def _mask(cx: FunctionContext, mask: Expr | None, lanes: int, emit: Emit) -> ir.Value | None:
    return None if mask is None else splat(cx, emit(cx, mask), lanes)


def _all_true(lanes: int) -> ir.Constant:
    return ir.Constant(ir.VectorType(I1, lanes), 1)


def _masked_call(cx: FunctionContext, kind: str, result: ir.Type | None, args: list[ir.Value],
                 align: int) -> ir.Value:
    """Call `llvm.masked.<kind>` (load, store, gather, scatter) with `align` on its pointer.

    Loads take (pointer(s), mask, passthru); stores take (value, pointer(s), mask).
    """
    ptr_index = 0 if result is not None else 1
    data_type = result if result is not None else args[0].type
    name = f"llvm.masked.{kind}.{intrinsic_suffix(data_type)}.{intrinsic_suffix(args[ptr_index].type)}"
    ret = result if result is not None else ir.VoidType()
    fn = cx.declare(name, ret, [a.type for a in args])
    call = cx.builder.call(fn, args)
    attrs = ir.values.ArgumentAttributes()
    attrs.align = align
    call.arg_attributes[ptr_index] = attrs
    return call
