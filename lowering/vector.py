"""Vector values in the loop IR: how many lanes an expression has, and the
constant offsets of an index's lanes (`lane_constants`, `ramp_parts`).

A `Ramp` or `Broadcast` has its own lane count, a `Var` that of its symbol, a
`Shuffle` that of its mask, and any other operation that of its widest
operand (every vector operand of one operation has the same count; scalar
operands are broadcast implicitly). An
`HReduce`, a `Shape` and a constant are scalars.
"""

from __future__ import annotations

from typing import Callable

from . import ir
from .rewrite import child_exprs
from .types import I64 as INDEX


def lanes_of(e: ir.Expr) -> int:
    return _lanes(e, lanes_of)


def lanes_counter() -> Callable[[ir.Expr], int]:
    """`lanes_of` that remembers each node's count (by identity; the node is
    kept alive with it), for a walk that asks about every node of a tree:
    each subtree is then counted once, not once per node above it."""
    memo: dict[int, tuple[ir.Expr, int]] = {}

    def count(e: ir.Expr) -> int:
        hit = memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        n = _lanes(e, count)
        memo[id(e)] = (e, n)
        return n

    return count


def _lanes(e: ir.Expr, recurse: Callable[[ir.Expr], int]) -> int:
    match e:
        case ir.Ramp(lanes=lanes) | ir.Broadcast(lanes=lanes):
            return lanes
        case ir.Var(sym):
            return sym.lanes
        case ir.Shuffle(mask=mask):
            return len(mask)
        case ir.HReduce() | ir.Const() | ir.Shape() | ir.Overlaps() | ir.Threads() | ir.UnitStrides() | ir.AlignGap():
            return 1
    return max((recurse(c) for c in child_exprs(e)), default=1)


def is_vector(e: ir.Expr) -> bool:
    return lanes_of(e) > 1


def prefix_count(mask: ir.Expr) -> ir.Expr | None:
    """n when `mask` is `ramp(0, 1, L) < n` with a scalar n (lanes below n
    on: a masked step's head or tail), else None."""
    match mask:
        case ir.Binary(op="<", lhs=ir.Ramp(base=ir.Const(value=0), stride=1), rhs=count) if lanes_of(count) == 1:
            return count
    return None


def ramp_parts(e: ir.Expr) -> tuple[tuple[ir.Expr, ...], int] | None:
    """(scalars, k) when `e` is sum(scalars) + (0, k, 2k, ...) lane-wise, else None:
    `lane_constants` when its offsets step evenly.

    >>> ramp_parts(ir.Binary("-", ir.Var(n), ir.Ramp(ir.Var(b), 1, 8), I64))   # doctest: +SKIP
    ((ir.Var(n), ir.Unary('neg', ir.Var(b))), -1)
    """
    lanes = lanes_of(e)
    parts = lane_constants(e, lanes)
    if parts is None:
        return None
    scalars, offsets = parts
    step = offsets[1] - offsets[0] if lanes > 1 else 0
    if any(o != offsets[0] + step * k for k, o in enumerate(offsets)):
        return None
    return ((*scalars, ir.Const(offsets[0], INDEX)) if offsets[0] or not scalars else scalars), step


def lane_constants(e: ir.Expr, lanes: int) -> tuple[tuple[ir.Expr, ...], tuple[int, ...]] | None:
    """(scalars, offsets) when `e` is sum(scalars) + offsets[lane] with constant
    offsets, else None. Beyond `ramp_parts`, lanes computed from constant ramps
    alone by `//`, `%`, `>>`, `&` with a constant (on non-negative lanes) count:

    >>> lane_constants(ir.Binary("//", ir.Ramp(ir.Const(0), 1, 8), ir.Const(4)), 8)   # doctest: +SKIP
    ((), (0, 0, 0, 0, 1, 1, 1, 1))
    """
    if lanes_of(e) == 1:
        return (e,), (0,) * lanes
    match e:
        case ir.Ramp(base=ir.Const(value=int() as b), stride=k):
            return (), tuple(b + k * i for i in range(lanes))
        case ir.Ramp(base=base, stride=k):
            return (base,), tuple(k * i for i in range(lanes))
        case ir.Broadcast(value=value):
            return (value,), (0,) * lanes
        case ir.Binary(op="+" | "-" as op, lhs=lhs, rhs=rhs):
            a, b = lane_constants(lhs, lanes), lane_constants(rhs, lanes)
            if a is None or b is None:
                return None
            sign = 1 if op == "+" else -1
            right = b[0] if sign == 1 else tuple(ir.Unary("neg", x, x.type) for x in b[0])
            return (*a[0], *right), tuple(x + sign * y for x, y in zip(a[1], b[1]))
        case (ir.Binary(op="*", lhs=ir.Const(value=int() as c), rhs=x)
              | ir.Binary(op="*", lhs=x, rhs=ir.Const(value=int() as c))):
            parts = lane_constants(x, lanes)
            if parts is not None:
                scale = ir.Const(c, x.type)
                return tuple(ir.Binary("*", s, scale, s.type) for s in parts[0]), tuple(o * c for o in parts[1])
        case ir.Binary(op="//" | "%" | ">>" | "&" as op, lhs=lhs, rhs=ir.Const(value=int() as c)) if c > 0:
            parts = lane_constants(lhs, lanes)
            if parts is None or parts[0] or min(parts[1]) < 0:
                return None
            fold = {"//": lambda o: o // c, "%": lambda o: o % c, ">>": lambda o: o >> c, "&": lambda o: o & c}[op]
            return (), tuple(fold(o) for o in parts[1])
    return None
