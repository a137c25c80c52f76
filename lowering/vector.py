"""Vector values in the loop IR: how many lanes an expression has.

A `Ramp` or `Broadcast` has its own lane count, a `Var` that of its symbol, a
`Shuffle` that of its mask, and any other operation that of its widest
operand (every vector operand of one operation has the same count; scalar
operands are broadcast implicitly). An
`HReduce`, a `Shape` and a constant are scalars.
"""

from __future__ import annotations

from . import ir
from .rewrite import child_exprs


def lanes_of(e: ir.Expr) -> int:
    match e:
        case ir.Ramp(lanes=lanes) | ir.Broadcast(lanes=lanes):
            return lanes
        case ir.Var(sym):
            return sym.lanes
        case ir.Shuffle(mask=mask):
            return len(mask)
        case ir.HReduce() | ir.Const() | ir.Shape() | ir.Overlaps() | ir.Threads() | ir.AlignGap():
            return 1
    return max((lanes_of(c) for c in child_exprs(e)), default=1)


def is_vector(e: ir.Expr) -> bool:
    return lanes_of(e) > 1


def prefix_count(mask: ir.Expr) -> ir.Expr | None:
    """n when `mask` is `ramp(0, 1, L) < n` with a scalar n (lanes below n
    on: a masked step's head or tail), else None."""
    match mask:
        case ir.Binary(op="<", lhs=ir.Ramp(base=ir.Const(value=0), stride=1), rhs=count) if lanes_of(count) == 1:
            return count
    return None
