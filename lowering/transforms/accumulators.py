"""Register accumulators: the copies of an unrolled reduction sum separately.

After `unroll(i, f)` the f copies of `acc = acc + e(i)` form one chain of
dependent additions, as slow as the add's latency. Giving each copy its own
accumulator lets them run in parallel; they are combined after the loop:

    for i.outer in ...:                    acc.r1 = 0.0
        acc = acc + e(2*i.outer)     -->   for i.outer in ...:
        acc = acc + e(2*i.outer + 1)           acc = acc + e(2*i.outer)
                                               acc.r1 = acc.r1 + e(2*i.outer + 1)
                                           acc = acc + acc.r1

This reorders the reduction, so it applies where that changes nothing (integer
`+ *`, `min`/`max`) or the kernel allows it (`@options(reassociate=True)`),
and only to a local that the loop touches through these updates alone.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..loops import identity
from ..rewrite import walk_expr
from .vector_accumulators import REDUCTION_OF, touched_elsewhere


def split_accumulators(loop: ir.For, reassociate: bool) -> list[ir.Stmt]:
    """`loop` with each eligible reduction spread over one accumulator per
    update, with the initializations before and the combination after it."""
    updates: dict[ir.Sym, list[int]] = {}
    for k, s in enumerate(loop.body):
        found = _update(s)
        if found is not None:
            updates.setdefault(found[0], []).append(k)
    before: list[ir.Stmt] = []
    after: list[ir.Stmt] = []
    body = list(loop.body)
    for sym, positions in updates.items():
        op = _update(body[positions[0]])[1]
        if len(positions) < 2 or not _eligible(loop, sym, positions, op, reassociate):
            continue
        total: ir.Expr = ir.Var(sym)
        for n, k in enumerate(positions[1:], start=1):
            part = ir.Sym(f"{sym.name}.r{n}", sym.type, "local", lanes=sym.lanes)
            s = body[k]
            start = ir.Const(identity(REDUCTION_OF[op], sym.type), sym.type, s.span)
            before.append(ir.Assign(part, start, s.span))
            body[k] = ir.Assign(part, replace(s.value, lhs=ir.Var(part)), s.span)
            total = ir.Binary(op, total, ir.Var(part), sym.type, s.span)
        after.append(ir.Assign(sym, total, loop.span))
    if not after:
        return [loop]
    return [*before, replace(loop, body=tuple(body)), *after]


def _update(s: ir.Stmt):
    """(acc, op) for `acc = acc op e` where `e` does not read `acc`."""
    match s:
        case ir.Assign(sym, ir.Binary(op, ir.Var(acc), value)) if acc is sym and op in REDUCTION_OF:
            if not any(isinstance(n, ir.Var) and n.sym is sym for n in walk_expr(value)):
                return sym, op
    return None


def _eligible(loop: ir.For, sym: ir.Sym, positions: list[int], op: str, reassociate: bool) -> bool:
    exact = op in ("min", "max") or (op in ("+", "*") and not sym.type.is_float)
    if not (exact or reassociate):
        return False
    if any(_update(loop.body[k])[1] != op for k in positions):
        return False
    return not touched_elsewhere(loop.body, {id(loop.body[k]) for k in positions}, sym)
