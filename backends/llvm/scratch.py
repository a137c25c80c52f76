"""Scratch buffers (`Alloc`): 64-byte-aligned heap memory, reused across calls.

Fresh memory for every call is slow: a packed GEMM operand of a few hundred
KiB comes from mmap, and touching it page-faults on every call (measured:
256^3 matmul at 57 GFLOP/s instead of 90). So each `Alloc` site keeps its
buffers between calls in a global *cache* of WAYS slots:

    take    the call swaps a full slot with null (atomically), the first it
            finds, and uses what it got if that is large enough, else frees
            it and allocates;
    return  at the function's exit, on every path, the call puts its buffer
            in an empty slot (compare-and-swap), or frees it when none is.

Calls running at once (Python threads, a parallel loop's workers) each end up
with their own buffer, since a buffer in use is never in the cache; at most
WAYS buffers per site stay allocated while no call runs. (With one slot, a
site that two workers of a team both run, a column part's packed operands,
kept one buffer and page-faulted the other's 1 MiB on every call.) A buffer
starts with a 64-byte header holding its capacity; the data follow it.
Running an `Alloc` again in the same call keeps the buffer when it is large
enough.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Alloc, TensorParam

from .context import FunctionContext, TensorArgs
from .exprs import emit_expr
from .ltypes import I8, I64, PTR, int_const
from .runtime import extern

ALIGN = 64  # a cache line; also the header's size, so the data stay aligned
WAYS = 8  # buffers a site keeps between calls: one per worker of a team of up to 8
_CACHE = ir.ArrayType(PTR, WAYS)


def emit_alloc(cx: FunctionContext, stmt: Alloc) -> None:
    """Make `stmt.buffer` hold `stmt.size` elements, as a rank-1 unit-stride tensor."""
    size = emit_expr(cx, stmt.size)
    data = allocate(cx, stmt.buffer, size, stmt.code)
    cx.tensors[stmt.buffer] = TensorArgs(stmt.buffer, data, [size], [int_const(I64, 1)])


def allocate(cx: FunctionContext, buffer: TensorParam, size: ir.Value, code: int) -> ir.Value:
    """The data of scratch `buffer`, room for `size` elements on a line (its
    site's cache keyed by `buffer`); out of memory stops with check `code`."""
    bld = cx.builder
    slot, cache = _slot(cx, buffer)
    need = bld.mul(size, int_const(I64, buffer.dtype.itemsize), flags=("nsw",))
    name = buffer.name

    held = bld.load(slot, typ=PTR)
    have = cx.new_block(f"{name}.have")
    incoming = [(held, bld.block)]
    # Held already (this Alloc ran before in this call), else the first full way.
    for way in range(WAYS):
        look = cx.new_block(f"{name}.look{way}")
        bld.cbranch(_is_null(bld, incoming[-1][0]), look, have)
        bld.position_at_end(look)
        at = _way(bld, cache, way)
        seen, swap = bld.load(at, typ=PTR), cx.new_block(f"{name}.take{way}")
        after = cx.new_block(f"{name}.next{way}")
        bld.cbranch(_is_null(bld, seen), after, swap)
        bld.position_at_end(swap)
        taken = bld.atomic_rmw("xchg", at, ir.Constant(PTR, None), "acq_rel")
        bld.branch(after)
        bld.position_at_end(after)
        got = bld.phi(PTR)
        got.add_incoming(ir.Constant(PTR, None), look)
        got.add_incoming(taken, swap)
        incoming.append((got, after))
    bld.branch(have)

    bld.position_at_end(have)
    buf = bld.phi(PTR)
    for value, block in incoming:
        buf.add_incoming(value, block)
    # An empty slot has capacity 0: read it from a constant instead of branching.
    capacity = bld.load(bld.select(_is_null(bld, buf), _zero(cx), buf), typ=I64)
    grow, ready = cx.new_block(f"{name}.grow"), cx.new_block(f"{name}.ready")
    bld.cbranch(bld.icmp_signed(">=", capacity, need), ready, grow)

    bld.position_at_end(grow)
    bld.call(_libc(cx, "free"), [buf])
    bld.store(ir.Constant(PTR, None), slot)  # a failure below must not return it to the cache
    total = bld.add(bld.and_(bld.add(need, int_const(I64, ALIGN - 1)), int_const(I64, -ALIGN)),
                    int_const(I64, ALIGN))
    fresh = bld.call(_libc(cx, "aligned_alloc"), [int_const(I64, ALIGN), total])
    stored = cx.new_block(f"{name}.allocated")
    bld.cbranch(_is_null(bld, fresh), cx.fail_block(code), stored)
    bld.position_at_end(stored)
    bld.store(bld.sub(total, int_const(I64, ALIGN)), fresh)
    bld.branch(ready)

    bld.position_at_end(ready)
    final = bld.phi(PTR)
    final.add_incoming(buf, have)
    final.add_incoming(fresh, stored)
    bld.store(final, slot)
    return bld.gep(final, [int_const(I64, ALIGN)], inbounds=True, source_etype=I8)


def release_all(cx: FunctionContext, bld: ir.IRBuilder) -> None:
    """At the exit block: put each buffer held in an empty way of its cache, or free it."""
    for slot, cache in cx.scratch_slots.values():
        held = bld.load(slot, typ=PTR)
        done = cx.new_block("scratch.given")
        for way in range(WAYS):
            give = cx.new_block(f"scratch.give{way}")
            bld.cbranch(_is_null(bld, held), done, give) if way == 0 else bld.branch(give)
            bld.position_at_end(give)
            put = bld.cmpxchg(_way(bld, cache, way), ir.Constant(PTR, None), held, "acq_rel", "monotonic")
            full = cx.new_block(f"scratch.full{way}")
            bld.cbranch(bld.extract_value(put, 1), done, full)
            bld.position_at_end(full)
        bld.call(_libc(cx, "free"), [held])
        bld.branch(done)
        bld.position_at_end(done)


def _way(bld: ir.IRBuilder, cache: ir.GlobalVariable, way: int) -> ir.Value:
    return bld.gep(cache, [int_const(I64, 0), int_const(I64, way)], inbounds=True, source_etype=_CACHE)


def _slot(cx: FunctionContext, buffer: TensorParam) -> tuple[ir.AllocaInstr, ir.GlobalVariable]:
    """The function's pointer slot for `buffer` (null at entry) and its site's cache."""
    found = cx.scratch_slots.get(buffer)
    if found is None:
        slot = cx.alloca_builder.alloca(PTR, name=f"{buffer.name}.ptr")
        slot.type = PTR
        cx.alloca_builder.store(ir.Constant(PTR, None), slot)
        name = f"{cx.func.name}.{buffer.name}.cache"
        n = 0
        while f"{name}{n}" in cx.module.globals:
            n += 1
        cache = ir.GlobalVariable(cx.module, _CACHE, f"{name}{n}")
        cache.linkage = "internal"
        cache.initializer = ir.Constant(_CACHE, [ir.Constant(PTR, None)] * WAYS)
        cache.align = 64
        found = cx.scratch_slots[buffer] = (slot, cache)
    return found


def _is_null(bld: ir.IRBuilder, p: ir.Value) -> ir.Value:
    return bld.icmp_unsigned("==", p, ir.Constant(PTR, None))


def _zero(cx: FunctionContext) -> ir.GlobalVariable:
    g = cx.module.globals.get("__dsl_zero_capacity")
    if g is None:
        g = ir.GlobalVariable(cx.module, I64, "__dsl_zero_capacity")
        g.linkage = "internal"
        g.global_constant = True
        g.initializer = int_const(I64, 0)
    return g


def _libc(cx: FunctionContext, name: str) -> ir.Function:
    """free or aligned_alloc (not `cx.declare`, which is for functions that touch no memory)."""
    if name == "free":
        return extern(cx.module, name, ir.VoidType(), [PTR])
    fn = extern(cx.module, name, PTR, [I64, I64])
    if "noalias" not in fn.return_value.attributes:
        fn.return_value.attributes.add("noalias")
    return fn
