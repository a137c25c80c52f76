"""`Realign`: an input whose rows start inside a cache line, read from an aligned copy.

numpy's arrays start 16 bytes past a line as often as not (a large one is
mmapped memory after malloc's 16-byte header). A micro-kernel that reads such
an operand in place loads each vector from two lines. The copy is made when
the transform's condition holds (the operand is read by enough rows to pay
for it) and, at run time, when it helps and is cheap:

    the data start inside a line, no size is 0, every stride of an axis
    longer than 1 is 1 or a whole number of lines (then the copy puts every
    row on a line; 0 is one), none is negative, and the memory the tensor
    spans is at most twice its elements (a sparse view is not copied whole)
    and at most COPY_LIMIT bytes (the copy's buffer stays allocated between
    calls, for the next one).

The copy keeps the tensor's strides: it is the bytes from its first element
to its last, in a scratch buffer (scratch.py) that starts on a line.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Realign, Sym, TensorParam
from dsl.lowering.types import I64 as I64_TYPE

from .context import FunctionContext, TensorArgs
from .exprs import emit_expr
from .ltypes import I1, I64, PTR, int_const
from .scratch import ALIGN, allocate

VOID = ir.VoidType()
COPY_LIMIT = 16 << 20


def emit_realign(cx: FunctionContext, stmt: Realign) -> None:
    """Point `stmt.tensor` at an aligned copy of its bytes when that is worth it."""
    bld = cx.builder
    t = cx.tensor(stmt.tensor)
    elements = _span_elements(cx, t)
    worth = bld.and_(emit_expr(cx, stmt.when), _copy_helps(cx, t, elements))
    copy_block, done = cx.new_block(f"{t.param.name}.realign"), cx.new_block(f"{t.param.name}.realigned")
    before = bld.block
    bld.cbranch(worth, copy_block, done)

    bld.position_at_end(copy_block)
    copy = allocate(cx, _buffer(cx, stmt.tensor), elements, stmt.code)
    nbytes = bld.mul(elements, int_const(I64, t.param.dtype.itemsize))
    memcpy = cx.declare("llvm.memcpy.p0.p0.i64", VOID, [PTR, PTR, I64, I1])
    bld.call(memcpy, [copy, t.data, nbytes, ir.Constant(I1, 0)])
    copied = bld.block
    bld.branch(done)

    bld.position_at_end(done)
    data = bld.phi(PTR, name=f"{t.param.name}.data")
    data.add_incoming(t.data, before)
    data.add_incoming(copy, copied)
    cx.tensors[stmt.tensor] = TensorArgs(t.param, data, t.sizes, t.strides)


def _span_elements(cx: FunctionContext, t: TensorArgs) -> ir.Value:
    """1 + the sum of (size - 1) x stride: the elements from the first to the last."""
    bld = cx.builder
    one = int_const(I64, 1)
    out = one
    for size, stride in zip(t.sizes, t.strides, strict=True):
        out = bld.add(out, bld.mul(bld.sub(size, one), stride))
    return out


def _copy_helps(cx: FunctionContext, t: TensorArgs, elements: ir.Value) -> ir.Value:
    """i1: the data start inside a line, and the copy puts every row on one
    and is not much larger than the tensor (see the module's docstring)."""
    bld = cx.builder
    zero, one, line = int_const(I64, 0), int_const(I64, 1), int_const(I64, ALIGN - 1)
    itemsize = int_const(I64, t.param.dtype.itemsize)
    inside = bld.icmp_unsigned("!=", bld.and_(bld.ptrtoint(t.data, I64), line), zero)
    ok, count = inside, one
    for size, stride in zip(t.sizes, t.strides, strict=True):
        ok = bld.and_(ok, bld.icmp_signed(">", size, zero))
        whole_lines = bld.icmp_signed("==", bld.and_(bld.mul(stride, itemsize), line), zero)
        fits = bld.or_(bld.icmp_signed("<=", size, one), bld.icmp_signed("==", stride, one))
        ok = bld.and_(ok, bld.or_(fits, bld.and_(whole_lines, bld.icmp_signed(">=", stride, zero))))
        count = bld.mul(count, size)
    small = bld.icmp_signed("<=", elements, int_const(I64, COPY_LIMIT // t.param.dtype.itemsize))
    return bld.and_(bld.and_(ok, small), bld.icmp_signed("<=", elements, bld.mul(count, int_const(I64, 2))))


def _buffer(cx: FunctionContext, tensor: TensorParam) -> TensorParam:
    """The copy's scratch buffer: one per tensor and function, so that two
    Realigns of one tensor share a site (the second finds it aligned)."""
    found = cx.realigned.get(tensor)
    if found is None:
        found = cx.realigned[tensor] = TensorParam(f"{tensor.name}.aligned", tensor.dtype,
                                                   (Sym("size", I64_TYPE, "dim"),), True, tensor.span, scratch=True)
    return found
