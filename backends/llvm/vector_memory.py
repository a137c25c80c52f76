"""Vector loads and stores: contiguous where possible, else gather/scatter.

Each index is split into a scalar part and a lane part: `s + ramp(b, k, L)` is
(s + b) + (0, k, ..., (L-1)k), a scalar or a broadcast has no lane part. An
access whose innermost index steps by 1 across lanes, the others not at all,
into a tensor whose innermost stride is the constant 1 (the `__unit` body, see
versions.py) touches L adjacent elements: one `load <L x T>` / `store <L x T>`,
or `llvm.masked.load` / `llvm.masked.store` under a mask (on AVX without
AVX-512, a load under `a < b` is AVX's own, by lane signs: see
`_load_by_lane_signs`). An unmasked load whose
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

from dsl.lowering.ir import Binary, Const, Expr, Load, Store
from dsl.lowering.vector import lane_constants, lanes_of, prefix_count, ramp_parts

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
        first, offsets, length = window
        span = ir.VectorType(mem_type(dtype), length)
        loaded = cx.builder.load(first, typ=span, align=dtype.itemsize)
        pick = ir.Constant(ir.VectorType(I32, lanes), [int_const(I32, o) for o in offsets])
        return from_memory(cx.builder, cx.builder.shuffle_vector(loaded, ir.Constant(span, None), pick), dtype)
    contiguous, ptr = _address(cx, t, e.indices, lanes, emit, masked=e.mask is not None)
    signed = contiguous and e.mask is not None and cx.sign_masks
    raw = _load_by_lane_signs(cx, e.mask, ptr, vty, emit) if signed else None
    if raw is not None:
        return from_memory(cx.builder, raw, dtype)
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


_WINDOW_BYTES = 256  # beyond, a gather touches less memory


def _window(cx: FunctionContext, t: TensorArgs, indices: tuple[Expr, ...], lanes: int,
            emit: Emit) -> tuple[ir.Value, tuple[int, ...], int] | None:
    """(address of the window's first element, each lane's offset in it, its
    length) for a load whose innermost index moves by constants per lane and
    the others not at all, at innermost stride 1; None otherwise. Every element
    of the window lies between two elements the lanes read, in the same row,
    or in that row of a constant length."""
    stride = t.strides[-1] if t.strides else None
    if not (isinstance(stride, ir.Constant) and stride.constant == 1):
        return None
    outer = [ramp_parts(i) for i in indices[:-1]]
    inner = lane_constants(indices[-1], lanes)
    if inner is None or any(p is None or p[1] != 0 for p in outer):
        return None
    low, high = min(inner[1]), max(inner[1])
    contiguous = all(o == inner[1][0] + k for k, o in enumerate(inner[1]))
    if contiguous or low == high or (high - low + 1) * t.param.dtype.itemsize > _WINDOW_BYTES:
        return None
    scalars, offsets = inner
    whole = _whole_row(t, inner, high - low + 1)
    if whole is not None:
        scalars, offsets, low, length = (), whole, 0, t.param.dims[-1]
    else:
        length = high - low + 1
    firsts = [_sum(cx, [emit(cx, x) for x in part]) for part, _ in outer]
    start = [emit(cx, x) for x in scalars] + [int_const(I64, low)]
    first = element_pointer(cx, t, [*firsts, _sum(cx, start)], inbounds=True)
    return first, tuple(o - low for o in offsets), length


def _whole_row(t: TensorArgs, inner: tuple, length: int) -> tuple[int, ...] | None:
    """The lanes' offsets from the row's start when a window of `length` is
    most of a row of constant length and the index is a constant: then the
    whole row is read, so that the window is whole registers (1080 x 1920 x 3
    pixels to planes, 1 thread: f16 21 -> 35 GB/s, f32 26 -> 32; LLVM put the
    lanes of a window of 46 floats together one by one). Not for bytes: 20 ->
    10 GB/s, their shuffle out of 3 x 64 lanes is the one then put together
    lane by lane."""
    scalars, offsets = inner
    row, size = (t.param.dims[-1] if t.param.dims else None), t.param.dtype.itemsize
    if not (isinstance(row, int) and size > 1 and row * size <= _WINDOW_BYTES and 2 * length >= row):
        return None
    if not all(isinstance(x, Const) for x in scalars):
        return None
    shift = sum(x.value for x in scalars)
    offsets = tuple(o + shift for o in offsets)
    return offsets if 0 <= min(offsets) and max(offsets) < row else None


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
    faster than a vector GEP for a strided saxpy). A call of the module's
    always-inlined `lane_pointers` helper, so that the back-end writes the
    2L instructions once, not at every access (a general-strides matmul has
    about a thousand such accesses: a third of its instructions)."""
    return cx.builder.call(_lane_pointers(cx.module, lanes, etype), [base, step])


def _lane_pointers(module: ir.Module, lanes: int, etype: ir.Type) -> ir.Function:
    name = f"__dsl.lane_pointers.{lanes}.{intrinsic_suffix(etype)}"
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(ir.VectorType(PTR, lanes), [PTR, I64]), name=name)
    fn.linkage = "internal"
    fn.attributes.add("alwaysinline")
    fn.attributes.add("nounwind")
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    ptr, step = fn.args
    ptrs = ir.Constant(ir.VectorType(PTR, lanes), None)
    for k in range(lanes):
        if k:
            ptr = bld.gep(ptr, [step], source_etype=etype)
        ptrs = bld.insert_element(ptrs, ptr, int_const(I32, k))
    bld.ret(ptrs)
    return fn


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


# x86's AVX masked loads (vmaskmovps/pd) read each lane's mask from its sign
# bit. LLVM's generic masked load takes i1 lanes, which AVX2 keeps as whole
# vectors; where registers run short (AVX2's 6 x 16 tile of 12 sums) it
# spilled them in that form and rebuilt each from its spill with six
# instructions a k step. The intrinsic fed a sign-extended i1 mask is turned
# back into the generic one, so the mask `a < b` is given as the sign of
# a - b (saturated), which LLVM keeps, spills and reloads as it is. znver3
# code (a matmul) on a Zen 4 core against OpenBLAS's AVX2 kernels, 1 thread,
# paired runs: 1000 x 64 x 5 1.07-1.09 -> 1.19-1.24 (its 14 x 8 tiles each
# masked), 200 x 200 x 7 1.47-1.72 -> 1.92-1.99, 61^3 1.14-1.20 -> 1.19,
# 77^3 and 100^3 level.
_SIGN_LOADS = {(4, 4): "llvm.x86.avx.maskload.ps", (4, 8): "llvm.x86.avx.maskload.ps.256",
               (8, 2): "llvm.x86.avx.maskload.pd", (8, 4): "llvm.x86.avx.maskload.pd.256"}


def _load_by_lane_signs(cx: FunctionContext, mask: Expr, ptr: ir.Value, vty: ir.VectorType,
                        emit: Emit) -> ir.Value | None:
    """The masked load of `vty` at `ptr` as AVX's own, its `mask` (`a < b`
    on i64) given as the lanes' signs; None where it does not apply. Lanes
    masked off read as zero."""
    float_bytes = {ir.FloatType(): 4, ir.DoubleType(): 8}.get(vty.element)
    name = _SIGN_LOADS.get((float_bytes, vty.count))
    if name is None or not (isinstance(mask, Binary) and mask.op == "<"):
        return None
    if not (mask.lhs.type.is_signed and mask.lhs.type.bits == 64):  # i64 (indices), compared signed
        return None
    bld, lanes = cx.builder, vty.count
    a, b = (splat(cx, emit(cx, x), lanes) for x in (mask.lhs, mask.rhs))
    diff = bld.call(cx.intrinsic("llvm.ssub.sat", a.type, 2), [a, b])
    if float_bytes == 4:  # within [-2^31, 0], then 32 bits: the same sign
        low, high = (ir.Constant(a.type, [int_const(I64, v)] * lanes) for v in (-(1 << 31), 0))
        diff = bld.call(cx.intrinsic("llvm.smin", a.type, 2), [diff, high])
        diff = bld.call(cx.intrinsic("llvm.smax", a.type, 2), [diff, low])
        diff = bld.trunc(diff, ir.VectorType(I32, lanes))
    return bld.call(cx.declare(name, vty, [PTR, diff.type]), [ptr, diff])


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
