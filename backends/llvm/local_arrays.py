"""Local arrays (`LocalArray`): stack memory of the running function, zeroed.

One `alloca` per array and function, in the entry block, so a declaration in a
loop reuses it; the statement itself only stores zeros. A small array that is
written and read at constant offsets (after unrolling) is then promoted by
LLVM's SROA to registers, and the zeroing vanishes where every element is
written before it is read.
"""

from __future__ import annotations

import math

import llvmlite.ir as ir

from dsl.lowering.ir import LocalArray, TensorParam

from .context import FunctionContext, TensorArgs, row_major_strides
from .ltypes import I64, PTR, int_const, mem_type

ALIGN = 64  # a cache line: whole-vector loads and stores never split one


def emit_local_array(cx: FunctionContext, stmt: LocalArray) -> None:
    buffer = stmt.buffer
    array_type = ir.ArrayType(mem_type(buffer.dtype), math.prod(buffer.dims))
    slot = cx.local_arrays.get(buffer)
    if slot is None:
        slot = cx.local_arrays[buffer] = cx.alloca_builder.alloca(array_type, name=buffer.name)
        slot.type = PTR  # llvmlite would print a typed pointer
        slot.align = ALIGN
    cx.builder.store(ir.Constant(array_type, None), slot)
    cx.tensors[buffer] = local_array_args(buffer, slot)


def local_array_args(buffer: TensorParam, data: ir.Value) -> TensorArgs:
    """The tensor `buffer` at `data`: its dims and row-major strides, all constants."""
    return TensorArgs(buffer, data, [int_const(I64, d) for d in buffer.dims],
                      [int_const(I64, s) for s in row_major_strides(buffer.dims)])
