"""Statement code generation: loops, ifs, assignments, stores and checks."""

from __future__ import annotations

from collections.abc import Sequence

import llvmlite.ir as ir

from dsl.lowering.ir import Alloc, Assign, Check, For, If, LocalArray, Prefetch, Realign, Stmt, Store
from dsl.lowering.vector import lanes_of

from ..errors import BackendError
from .context import FunctionContext
from .exprs import emit_expr
from .ltypes import I32, PTR, int_const

VOID = ir.VoidType()
from .parallel import emit_parallel_for
from .local_arrays import emit_local_array
from .scratch import emit_alloc
from .realign import emit_realign
from .memory import element_pointer, store_element
from .vector_memory import vector_store
from .vectors import splat


def emit_block(cx: FunctionContext, body: Sequence[Stmt]) -> None:
    """Emit `body` in order at the builder's position."""
    for stmt in body:
        emit_stmt(cx, stmt)


def emit_stmt(cx: FunctionContext, stmt: Stmt) -> None:
    """Emit one loop-IR statement."""
    match stmt:
        case Assign(sym=sym, value=value):
            cx.store_var(sym, splat(cx, emit_expr(cx, value), sym.lanes))
        case Store() if stmt.mask is not None or any(lanes_of(x) > 1 for x in (*stmt.indices, stmt.value)):
            vector_store(cx, stmt, emit_expr)
        case Store(tensor=tensor, indices=indices, value=value):
            index_values = [emit_expr(cx, i) for i in indices]
            store_element(cx, cx.tensor(tensor), index_values, emit_expr(cx, value))
        case Check(cond=cond, code=code):
            ok = cx.new_block(f"check{code}.ok")
            cx.builder.cbranch(emit_expr(cx, cond), ok, cx.fail_block(code))
            cx.builder.position_at_end(ok)
        case Alloc():
            emit_alloc(cx, stmt)
        case LocalArray():
            emit_local_array(cx, stmt)
        case Prefetch():
            emit_prefetch(cx, stmt)
        case Realign():
            emit_realign(cx, stmt)
        case If():
            _emit_if(cx, stmt)
        case For(kind="parallel"):
            emit_parallel_for(cx, stmt, _emit_for)
        case For():
            _emit_for(cx, stmt)
        case _:
            raise BackendError(f"cannot compile statement {type(stmt).__name__} "
                               f"in {cx.kernel.name} (not lowered to loops?)")


def emit_prefetch(cx: FunctionContext, stmt: Prefetch) -> None:
    """`llvm.prefetch` of the element's address (not `inbounds`: it may lie
    outside), its locality 3 for the first-level cache, 2 and 1 for the outer
    ones (x86's prefetcht0, t1, t2)."""
    ptr = element_pointer(cx, cx.tensor(stmt.tensor), [emit_expr(cx, i) for i in stmt.indices], inbounds=False)
    fn = cx.declare("llvm.prefetch.p0", VOID, [PTR, I32, I32, I32])
    rw = 1 if stmt.write else 0
    locality = 4 - stmt.level
    cx.builder.call(fn, [ptr, int_const(I32, rw), int_const(I32, locality), int_const(I32, 1)])  # data


def _emit_if(cx: FunctionContext, stmt: If) -> None:
    bld = cx.builder
    cond = emit_expr(cx, stmt.cond)
    then_block, join = cx.new_block("if.then"), cx.new_block("if.end")
    else_block = cx.new_block("if.else") if stmt.orelse else join
    bld.cbranch(cond, then_block, else_block)
    bld.position_at_end(then_block)
    emit_block(cx, stmt.then)
    bld.branch(join)
    if stmt.orelse:
        bld.position_at_end(else_block)
        emit_block(cx, stmt.orelse)
        bld.branch(join)
    bld.position_at_end(join)


def _emit_for(cx: FunctionContext, loop: For) -> None:
    """`for var in range(start, stop, step)` with start/stop evaluated once.

    The induction variable is a phi (what SCEV and the vectorizer want); it is
    copied into `var`'s slot each iteration, so a body that assigns to `var`
    cannot change the trip count.
    """
    bld = cx.builder
    start = emit_expr(cx, loop.start)
    stop = emit_expr(cx, loop.stop)
    preheader = bld.block
    header, body = cx.new_block(f"{loop.name}.head"), cx.new_block(f"{loop.name}.body")
    exit_block = cx.new_block(f"{loop.name}.exit")
    bld.branch(header)

    bld.position_at_end(header)
    iv = bld.phi(start.type, name=loop.var.name)
    iv.add_incoming(start, preheader)
    keep_going = bld.icmp_signed("<" if loop.step > 0 else ">", iv, stop)
    bld.cbranch(keep_going, body, exit_block)

    bld.position_at_end(body)
    cx.store_var(loop.var, iv)
    emit_block(cx, loop.body)
    # var + step cannot overflow: it stays within [start, stop + step) of a sized loop.
    following = bld.add(iv, int_const(iv.type, loop.step), flags=("nsw",))
    iv.add_incoming(following, bld.block)
    latch = bld.branch(header)
    if loop.span is not None or loop.unroll:
        latch.set_metadata("llvm.loop", loop_id(cx.module, loop))
    bld.position_at_end(exit_block)


LOOP_TAG = "dsl.loop"


def loop_id(module: ir.Module, loop: For) -> ir.MDValue:
    """`!{!self, !{!"dsl.loop", !"i", line, col}}`: names the source loop, so
    the optimized module can say which loops LLVM vectorized (`--remarks`);
    and `!{!"llvm.loop.unroll.count", n}` for the loop's `unroll` hint.
    LLVM keeps a loop's hints on the loops it makes from it."""
    hints = []
    if loop.span is not None:
        hints.append(module.add_metadata([ir.MetaDataString(module, LOOP_TAG), ir.MetaDataString(module, loop.name),
                                          ir.Constant(ir.IntType(32), loop.span.line),
                                          ir.Constant(ir.IntType(32), loop.span.col)]))
    if loop.unroll:
        hints.append(module.add_metadata([ir.MetaDataString(module, "llvm.loop.unroll.count"),
                                          ir.Constant(ir.IntType(32), loop.unroll)]))
    # A node of its own (unique placeholder content), then made self-referential.
    node = module.add_metadata([ir.MetaDataString(module, f"{LOOP_TAG}.{len(module.metadata)}")])
    node.operands = (node, *hints)
    return node
