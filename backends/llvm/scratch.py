"""Scratch buffers (`Alloc`): 64-byte-aligned heap memory, reused across calls.

Fresh memory for every call is slow: a packed GEMM operand of a few hundred
KiB comes from mmap, and touching it page-faults on every call (measured:
256^3 matmul at 57 GFLOP/s instead of 90). So each `Alloc` site keeps one
buffer in a global *cache* slot between calls:

    take    the call swaps the cache with null (atomically) and uses what it
            got if that is large enough, else frees it and allocates;
    return  at the function's exit, on every path, the call swaps its buffer
            back into the cache and frees whatever it displaced.

Calls running at once (Python threads, a parallel loop's workers) each end up
with their own buffer, since a buffer in use is never in the cache; at most
one buffer per site stays allocated while no call runs. A buffer starts with
a 64-byte header holding its capacity; the data follow it. Running an `Alloc`
again in the same call keeps the buffer when it is large enough.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Alloc

from .context import FunctionContext, TensorArgs
from .exprs import emit_expr
from .ltypes import I8, I64, PTR, int_const
from .runtime import extern

ALIGN = 64  # a cache line; also the header's size, so the data stay aligned


def emit_alloc(cx: FunctionContext, stmt: Alloc) -> None:
    """Make `stmt.buffer` hold `stmt.size` elements, as a rank-1 unit-stride tensor."""
    bld = cx.builder
    slot, cache = _slot(cx, stmt)
    size = emit_expr(cx, stmt.size)
    need = bld.mul(size, int_const(I64, stmt.buffer.dtype.itemsize), flags=("nsw",))
    name = stmt.buffer.name

    held = bld.load(slot, typ=PTR)
    take, have = cx.new_block(f"{name}.take"), cx.new_block(f"{name}.have")
    before = bld.block
    bld.cbranch(_is_null(bld, held), take, have)
    bld.position_at_end(take)
    taken = bld.atomic_rmw("xchg", cache, ir.Constant(PTR, None), "acq_rel")
    bld.branch(have)

    bld.position_at_end(have)
    buf = bld.phi(PTR)
    buf.add_incoming(held, before)
    buf.add_incoming(taken, take)
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
    bld.cbranch(_is_null(bld, fresh), cx.fail_block(stmt.code), stored)
    bld.position_at_end(stored)
    bld.store(bld.sub(total, int_const(I64, ALIGN)), fresh)
    bld.branch(ready)

    bld.position_at_end(ready)
    final = bld.phi(PTR)
    final.add_incoming(buf, have)
    final.add_incoming(fresh, stored)
    bld.store(final, slot)
    data = bld.gep(final, [int_const(I64, ALIGN)], inbounds=True, source_etype=I8)
    cx.tensors[stmt.buffer] = TensorArgs(stmt.buffer, data, [size], [int_const(I64, 1)])


def release_all(cx: FunctionContext, bld: ir.IRBuilder) -> None:
    """At the exit block: return each buffer held to its cache, freeing what it displaces."""
    for slot, cache in cx.scratch_slots.values():
        held = bld.load(slot, typ=PTR)
        give, done = cx.new_block("scratch.give"), cx.new_block("scratch.given")
        bld.cbranch(_is_null(bld, held), done, give)
        bld.position_at_end(give)
        displaced = bld.atomic_rmw("xchg", cache, held, "acq_rel")
        bld.call(_libc(cx, "free"), [displaced])
        bld.branch(done)
        bld.position_at_end(done)


def _slot(cx: FunctionContext, stmt: Alloc) -> tuple[ir.AllocaInstr, ir.GlobalVariable]:
    """The function's pointer slot for `stmt.buffer` (null at entry) and its site's cache."""
    found = cx.scratch_slots.get(stmt.buffer)
    if found is None:
        slot = cx.alloca_builder.alloca(PTR, name=f"{stmt.buffer.name}.ptr")
        slot.type = PTR
        cx.alloca_builder.store(ir.Constant(PTR, None), slot)
        name = f"{cx.func.name}.{stmt.buffer.name}.cache"
        n = 0
        while f"{name}{n}" in cx.module.globals:
            n += 1
        cache = ir.GlobalVariable(cx.module, PTR, f"{name}{n}")
        cache.linkage = "internal"
        cache.initializer = ir.Constant(PTR, None)
        cache.align = 8
        found = cx.scratch_slots[stmt.buffer] = (slot, cache)
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
