"""Scratch buffers (`Alloc`): 64-byte-aligned heap memory owned by one call.

Each buffer has a pointer slot, null until its `Alloc` runs. Running the
`Alloc` again frees the old buffer first; the function's exit block frees
every slot (`free(NULL)` is a no-op), so no path leaks, failed checks included.
Inside a parallel loop's outlined body the slots belong to the body function:
each thread allocates and frees its own.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Alloc

from .context import FunctionContext, TensorArgs
from .exprs import emit_expr
from .ltypes import I64, PTR, int_const

ALIGN = 64  # a cache line; also what AVX-512 loads would want


def emit_alloc(cx: FunctionContext, stmt: Alloc) -> None:
    """Allocate `stmt.buffer` and make it addressable as a rank-1 unit-stride tensor."""
    bld = cx.builder
    slot = _slot(cx, stmt)
    bld.call(_libc(cx, "free", ir.VoidType(), [PTR]), [bld.load(slot, typ=PTR)])
    size = emit_expr(cx, stmt.size)
    nbytes = bld.mul(size, int_const(I64, stmt.buffer.dtype.itemsize), flags=("nsw",))
    # aligned_alloc wants a multiple of the alignment; 0 bytes may give NULL, so at least one line.
    rounded = bld.and_(bld.add(nbytes, int_const(I64, ALIGN - 1)), int_const(I64, -ALIGN))
    rounded = bld.select(bld.icmp_signed(">", rounded, int_const(I64, 0)), rounded, int_const(I64, ALIGN))
    alloc = _libc(cx, "aligned_alloc", PTR, [I64, I64])
    ptr = bld.call(alloc, [int_const(I64, ALIGN), rounded])
    bld.store(ptr, slot)
    ok = cx.new_block(f"{stmt.buffer.name}.allocated")
    bld.cbranch(bld.icmp_unsigned("!=", ptr, ir.Constant(PTR, None)), ok, cx.fail_block(stmt.code))
    bld.position_at_end(ok)
    cx.tensors[stmt.buffer] = TensorArgs(stmt.buffer, ptr, [size], [int_const(I64, 1)])


def free_all(cx: FunctionContext, bld: ir.IRBuilder) -> None:
    """Free every scratch buffer of the function (at its exit block)."""
    free = _libc(cx, "free", ir.VoidType(), [PTR])
    for slot in cx.scratch_slots.values():
        bld.call(free, [bld.load(slot, typ=PTR)])


def _slot(cx: FunctionContext, stmt: Alloc) -> ir.AllocaInstr:
    slot = cx.scratch_slots.get(stmt.buffer)
    if slot is None:
        slot = cx.alloca_builder.alloca(PTR, name=f"{stmt.buffer.name}.ptr")
        slot.type = PTR
        cx.alloca_builder.store(ir.Constant(PTR, None), slot)
        cx.scratch_slots[stmt.buffer] = slot
    return slot


def _libc(cx: FunctionContext, name: str, ret: ir.Type, args: list[ir.Type]) -> ir.Function:
    """A libc allocation function (not `cx.declare`: these touch memory)."""
    fn = cx.module.globals.get(name)
    if fn is None:
        fn = ir.Function(cx.module, ir.FunctionType(ret, args), name=name)
        fn.attributes.add("nounwind")
        if name == "aligned_alloc":
            fn.return_value.attributes.add("noalias")
    return fn
