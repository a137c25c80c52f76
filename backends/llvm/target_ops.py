"""Target intrinsics (lowering/target_ops.py) as the LLVM intrinsics of their instructions.

A vector `TargetOp` of L lanes with k values per lane (a pair for vpmaddubsw)
gets each operand as one `<k*L x T>` vector in the instruction's order: one
wide expression where `lowering.interleave` finds it (adjacent elements in
memory: a single contiguous load), else the L-lane vectors shuffled together.
The wide operands are cut into the instruction's register width (AVX2: 32
bytes -> 16 i16 lanes; NEON sdot: 16 bytes -> 4 i32 lanes), padded with zero
lanes when L is not a multiple, and the results are joined back to L lanes.
A scalar `TargetOp` is its plain-arithmetic fallback: one lane gains nothing
from the instruction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import llvmlite.ir as ir

from dsl.lowering.interleave import interleave
from dsl.lowering.ir import Expr, TargetOp
from dsl.lowering.target_ops import SPECS, fallback
from dsl.lowering.vector import lanes_of

from .context import FunctionContext
from .ltypes import I32, reg_type
from .vectors import splat

Emit = Callable[[FunctionContext, Expr], ir.Value]


@dataclass(frozen=True)
class Instruction:
    intrinsic: str
    operand_lanes: int  # elements of each operand register
    result_lanes: int


INSTRUCTIONS = {
    "x86.maddubs": Instruction("llvm.x86.avx2.pmadd.ub.sw", 32, 16),
    "x86.madd": Instruction("llvm.x86.avx2.pmadd.wd", 16, 8),
    "x86.sign": Instruction("llvm.x86.avx2.psign.b", 32, 32),
    "arm.sdot": Instruction("llvm.aarch64.neon.sdot.v4i32.v16i8", 16, 4),
}


def emit_target_op(cx: FunctionContext, e: TargetOp, emit: Emit) -> ir.Value:
    """The value of `e`: its instruction on vectors, its fallback on scalars."""
    lanes = lanes_of(e)
    if lanes == 1:
        return emit(cx, fallback(e))
    spec, ins = SPECS[e.name], INSTRUCTIONS[e.name]
    a_parts, b_parts = spec.pairs(e.args)
    pieces = -(-lanes // ins.result_lanes)
    width = pieces * ins.operand_lanes  # operand lanes, padded to whole registers
    a = _pad(cx, _wide_operand(cx, list(a_parts), lanes, emit), width)
    b = _pad(cx, _wide_operand(cx, list(b_parts), lanes, emit), width)
    result_type = ir.VectorType(reg_type(e.type), ins.result_lanes)
    operand_type = ir.VectorType(a.type.element, ins.operand_lanes)
    acc = None
    if spec.accumulates:
        acc = _pad(cx, splat(cx, emit(cx, e.args[0]), lanes), pieces * ins.result_lanes)
    args_types = [operand_type, operand_type] if acc is None else [result_type, operand_type, operand_type]
    fn = cx.declare(ins.intrinsic, result_type, args_types)
    out = []
    for p in range(pieces):
        args = [_slice(cx, a, p * ins.operand_lanes, ins.operand_lanes),
                _slice(cx, b, p * ins.operand_lanes, ins.operand_lanes)]
        if acc is not None:
            args.insert(0, _slice(cx, acc, p * ins.result_lanes, ins.result_lanes))
        out.append(cx.builder.call(fn, args))
    return _slice(cx, _concat(cx, out), 0, lanes)


def _wide_operand(cx: FunctionContext, parts: list[Expr], lanes: int, emit: Emit) -> ir.Value:
    """`<k*L x T>`: lane l*k + j is lane l of parts[j]."""
    wide = interleave(parts)
    if wide is not None:
        return splat(cx, emit(cx, wide), len(parts) * lanes)
    values = [splat(cx, emit(cx, p), lanes) for p in parts]
    joined = _concat(cx, values)
    k = len(parts)
    return _shuffle(cx, joined, [j * lanes + lane for lane in range(lanes) for j in range(k)])


def _shuffle(cx: FunctionContext, v: ir.Value, picks: list[int | None]) -> ir.Value:
    """The lanes `picks` of `v` (None: a zero lane)."""
    count = v.type.count
    zero = ir.Constant(v.type, None)
    mask = [count if k is None else k for k in picks]  # lane `count` is the first zero lane
    return cx.builder.shuffle_vector(v, zero, ir.Constant(ir.VectorType(I32, len(mask)), mask))


def _slice(cx: FunctionContext, v: ir.Value, start: int, count: int) -> ir.Value:
    if start == 0 and count == v.type.count:
        return v
    return _shuffle(cx, v, list(range(start, start + count)))


def _pad(cx: FunctionContext, v: ir.Value, count: int) -> ir.Value:
    """`v` extended with zero lanes to `count` lanes."""
    have = v.type.count
    return v if have == count else _shuffle(cx, v, [*range(have), *[None] * (count - have)])


def _concat(cx: FunctionContext, values: list[ir.Value]) -> ir.Value:
    out = values[0]
    for v in values[1:]:
        have, more = out.type.count, v.type.count
        both = have + more
        out, v = _pad(cx, out, both), _pad(cx, v, both)
        mask = ir.Constant(ir.VectorType(I32, both), [*range(have), *range(both, both + more)])
        out = cx.builder.shuffle_vector(out, v, mask)
    return out
