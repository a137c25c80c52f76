"""Vector loads and stores: contiguous where possible, else gather/scatter.

Each index is split into a scalar part and a lane part: `s + ramp(b, k, L)` is
(s + b) + (0, k, ..., (L-1)k), a scalar or a broadcast has no lane part. An
access whose innermost index steps by 1 across lanes, the others not at all,
into a tensor whose innermost stride is the constant 1 (the `__unit` body, see
versions.py) touches L adjacent elements: one `load <L x T>` / `store <L x T>`,
or `llvm.masked.load` / `llvm.masked.store` under a mask. An unmasked load whose
innermost index moves by constants per lane, not by 1 (`s[2 + l // 4]`: the
lanes' scale of a quantized block), reads the window of elements between
its first and last lane, which are in bounds, with one load and a shuffle.
Anything else uses `llvm.masked.gather` / `llvm.masked.scatter` (the scatter writes lanes in
increasing order, so on a collision the highest lane wins, as in the
interpreter) on the addresses base + lane offsets, where the lane offsets of
ramps, (0, k, ...) * stride, do not change inside the loop (LLVM hoists them).
Masked-off lanes are never touched (LLVM's masked intrinsics promise that); a
masked load gives zero in them.

Alignment is the element size, never more: numpy buffers promise nothing else.
LLVM 22's masked intrinsics take it as an `align` attribute on the pointer.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from dsl.lowering.ir import Binary, Broadcast, Const, Expr, Load, Ramp, Store, Unary
from dsl.lowering.types import I64 as INDEX
from dsl.lowering.vector import lanes_of, prefix_count

from ..errors import BackendError
from .context import FunctionContext, TensorArgs, intrinsic_suffix
from .ltypes import I1, I32, I64, PTR, int_const, mem_type
from .memory import element_pointer, from_memory, to_memory
from .streaming import nontemporal_store, store_prefix
from .vectors import ramp, splat, widen

Emit = Callable[[FunctionContext, Expr], ir.Value]
_NSW = ("nsw",)


def vector_load(cx: FunctionContext, e: Load, emit: Emit) -> ir.Value:
    """The `<L x T>` value of a vector `Load` (L = lanes_of(e)), as its value type."""
    t = cx.tensor(e.tensor)
    lanes = lanes_of(e)
    dtype = t.param.dtype
    vty = ir.VectorType(mem_type(dtype), lanes)
    window = _window(cx, t, e.indices, lanes, emit) if e.mask is None else None
    if window is not None:
        first, offsets = window
        span = ir.VectorType(mem_type(dtype), max(offsets) + 1)
        loaded = cx.builder.load(first, typ=span, align=dtype.itemsize)
        pick = ir.Constant(ir.VectorType(I32, lanes), [int_const(I32, o) for o in offsets])
        return from_memory(cx.builder, cx.builder.shuffle_vector(loaded, ir.Constant(span, None), pick), dtype)
    contiguous, ptr = _address(cx, t, e.indices, lanes, emit, masked=e.mask is not None)
    mask = _mask(cx, e.mask, lanes, emit)
    passthru = ir.Constant(vty, None)
    if contiguous and mask is None:
        raw = cx.builder.load(ptr, typ=vty, align=dtype.itemsize)
    elif contiguous:
        raw = _masked_call(cx, "load", vty, [ptr, mask, passthru], dtype.itemsize)
    else:
        mask = mask if mask is not None else _all_true(lanes)
        raw = _masked_call(cx, "gather", vty, [ptr, mask, passthru], dtype.itemsize)
    return from_memory(cx.builder, raw, dtype)


def vector_store(cx: FunctionContext, s: Store, emit: Emit) -> None:
    """A `Store` of a vector value, or at vector indices (a scalar value is splatted)."""
    t = cx.tensor(s.tensor)
    lanes = max(lanes_of(x) for x in (*s.indices, s.value, *([s.mask] if s.mask is not None else [])))
    dtype = t.param.dtype
    if all(lanes_of(i) == 1 for i in s.indices):
        raise BackendError(f"{cx.kernel.name}: a vector value stored at a scalar index of '{t.param.name}'")
    contiguous, ptr = _address(cx, t, s.indices, lanes, emit, masked=s.mask is not None)
    value = to_memory(cx.builder, splat(cx, emit(cx, s.value), lanes), dtype)
    mask = _mask(cx, s.mask, lanes, emit)
    if contiguous and mask is None and s.nontemporal:
        nontemporal_store(cx, t, value, ptr, lanes)
    elif contiguous and s.nontemporal and lanes & (lanes - 1) == 0:  # a stream's head or tail
        store_prefix(cx, value, ptr, emit(cx, prefix_count(s.mask)), lanes, dtype.itemsize)
    elif contiguous and mask is None:
        cx.builder.store(value, ptr, align=dtype.itemsize)
    elif contiguous:
        _masked_call(cx, "store", None, [value, ptr, mask], dtype.itemsize)
    else:
        mask = mask if mask is not None else _all_true(lanes)
        _masked_call(cx, "scatter", None, [value, ptr, mask], dtype.itemsize)


def ramp_parts(e: Expr) -> tuple[tuple[Expr, ...], int] | None:
    """(scalars, k) when `e` is sum(scalars) + (0, k, 2k, ...) lane-wise, else None:
    `lane_constants` when its offsets step evenly.

    >>> ramp_parts(Binary("-", Var(n), Ramp(Var(b), 1, 8), I64))   # doctest: +SKIP
    ((Var(n), Unary('neg', Var(b))), -1)
    """
    lanes = lanes_of(e)
    parts = lane_constants(e, lanes)
    if parts is None:
        return None
    scalars, offsets = parts
    step = offsets[1] - offsets[0] if lanes > 1 else 0
    if any(o != offsets[0] + step * k for k, o in enumerate(offsets)):
        return None
    return ((*scalars, Const(offsets[0], INDEX)) if offsets[0] or not scalars else scalars), step


_WINDOW_MAX = 64  # elements: beyond, a gather touches less memory


def lane_constants(e: Expr, lanes: int) -> tuple[tuple[Expr, ...], tuple[int, ...]] | None:
    """(scalars, offsets) when `e` is sum(scalars) + offsets[lane] with constant
    offsets, else None. Beyond `ramp_parts`, lanes computed from constant ramps
    alone by `//`, `%`, `>>`, `&` with a constant (on non-negative lanes) count:

    >>> lane_constants(Binary("//", Ramp(Const(0), 1, 8), Const(4)), 8)   # doctest: +SKIP
    ((), (0, 0, 0, 0, 1, 1, 1, 1))
    """
    if lanes_of(e) == 1:
        return (e,), (0,) * lanes
    match e:
        case Ramp(base=Const(value=int() as b), stride=k):
            return (), tuple(b + k * i for i in range(lanes))
        case Ramp(base=base, stride=k):
            return (base,), tuple(k * i for i in range(lanes))
        case Broadcast(value=value):
            return (value,), (0,) * lanes
        case Binary(op="+" | "-" as op, lhs=lhs, rhs=rhs):
            a, b = lane_constants(lhs, lanes), lane_constants(rhs, lanes)
            if a is None or b is None:
                return None
            sign = 1 if op == "+" else -1
            right = b[0] if sign == 1 else tuple(Unary("neg", x, x.type) for x in b[0])
            return (*a[0], *right), tuple(x + sign * y for x, y in zip(a[1], b[1]))
        case Binary(op="*", lhs=Const(value=int() as c), rhs=x) | Binary(op="*", lhs=x, rhs=Const(value=int() as c)):
            parts = lane_constants(x, lanes)
            if parts is not None:
                scale = Const(c, x.type)
                return tuple(Binary("*", s, scale, s.type) for s in parts[0]), tuple(o * c for o in parts[1])
        case Binary(op="//" | "%" | ">>" | "&" as op, lhs=lhs, rhs=Const(value=int() as c)) if c > 0:
            parts = lane_constants(lhs, lanes)
            if parts is None or parts[0] or min(parts[1]) < 0:
                return None
            fold = {"//": lambda o: o // c, "%": lambda o: o % c, ">>": lambda o: o >> c, "&": lambda o: o & c}[op]
            return (), tuple(fold(o) for o in parts[1])
    return None


def _window(cx: FunctionContext, t: TensorArgs, indices: tuple[Expr, ...], lanes: int,
            emit: Emit) -> tuple[ir.Value, tuple[int, ...]] | None:
    """(address of the window's first element, each lane's offset in it) for a
    load whose innermost index moves by constants per lane and the others not
    at all, at innermost stride 1; None otherwise. Every element of the window
    lies between two elements the lanes read, in the same row."""
    stride = t.strides[-1] if t.strides else None
    if not (isinstance(stride, ir.Constant) and stride.constant == 1):
        return None
    outer = [ramp_parts(i) for i in indices[:-1]]
    inner = lane_constants(indices[-1], lanes)
    if inner is None or any(p is None or p[1] != 0 for p in outer):
        return None
    low, high = min(inner[1]), max(inner[1])
    contiguous = all(o == inner[1][0] + k for k, o in enumerate(inner[1]))
    if contiguous or low == high or high - low >= _WINDOW_MAX:
        return None
    firsts = [_sum(cx, [emit(cx, x) for x in scalars]) for scalars, _ in outer]
    start = [emit(cx, x) for x in inner[0]] + [int_const(I64, low)]
    return element_pointer(cx, t, [*firsts, _sum(cx, start)], inbounds=True), tuple(o - low for o in inner[1])


def _address(cx: FunctionContext, t: TensorArgs, indices: tuple[Expr, ...], lanes: int, emit: Emit,
             masked: bool) -> tuple[bool, ir.Value]:
    """(True, address of lane 0) for a contiguous access, else (False, `<L x ptr>`)."""
    parts = [ramp_parts(i) for i in indices]
    if _is_contiguous(t, parts):
        firsts = [_sum(cx, [emit(cx, x) for x in scalars]) for scalars, _ in parts]
        return True, element_pointer(cx, t, firsts, inbounds=not masked)
    bld = cx.builder
    scalar_offset, lane_offset, lane_step = [], [], []
    for index, part, stride in zip(indices, parts, t.strides, strict=True):
        if part is None:
            lane_offset.append(bld.mul(*widen(cx, emit(cx, index), stride), flags=_NSW))
            continue
        scalars, step = part
        scalar_offset.append(bld.mul(_sum(cx, [emit(cx, x) for x in scalars]), stride, flags=_NSW))
        if step != 0:
            lane_step.append(bld.mul(stride, int_const(I64, step), flags=_NSW))
    etype = mem_type(t.param.dtype)
    # No `inbounds`: the address of a masked-off lane may lie outside the tensor.
    base = bld.gep(t.data, [_sum(cx, scalar_offset)], source_etype=etype) if scalar_offset else t.data
    if not lane_offset:
        step = _sum(cx, lane_step) if lane_step else int_const(I64, 0)
        return False, _strided_pointers(cx, base, step, lanes, etype)
    for step in lane_step:
        lane_offset.append(bld.mul(ramp(cx, int_const(I64, 0), 1, lanes), splat(cx, step, lanes)))
    ptrs = bld.gep(base, [splat(cx, _sum(cx, lane_offset), lanes)], source_etype=etype)
    ptrs.type = ir.VectorType(PTR, lanes)  # llvmlite types a GEP by its base pointer
    return False, ptrs


def _strided_pointers(cx: FunctionContext, base: ir.Value, step: ir.Value, lanes: int,
                      etype: ir.Type) -> ir.Value:
    """The `<L x ptr>` (base, base + step, base + 2 step, ...), built from scalar
    addresses: when LLVM scalarizes the gather (as on Zen 3), each lane's load
    then uses its scalar address, with no vector multiply or extraction (3x
    faster than a vector GEP for a strided saxpy)."""
    bld = cx.builder
    ptrs = ir.Constant(ir.VectorType(PTR, lanes), None)
    ptr = base
    for k in range(lanes):
        if k:
            ptr = bld.gep(ptr, [step], source_etype=etype)
        ptrs = bld.insert_element(ptrs, ptr, int_const(I32, k))
    return ptrs


def _is_contiguous(t: TensorArgs, parts) -> bool:
    """Lanes step by one element: the innermost index by 1, the others by 0, at stride 1."""
    stride = t.strides[-1] if t.strides else None
    if not (isinstance(stride, ir.Constant) and stride.constant == 1) or any(p is None for p in parts):
        return False
    return parts[-1][1] == 1 and all(step == 0 for _, step in parts[:-1])


def _sum(cx: FunctionContext, values: list[ir.Value]) -> ir.Value:
    total = values[0]
    for v in values[1:]:
        total = cx.builder.add(*widen(cx, total, v), flags=_NSW)
    return total


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
