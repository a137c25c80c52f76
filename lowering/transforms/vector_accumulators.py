"""Vector accumulators: a reduction over a vectorized loop combines its lanes once.

After `vectorize(i, w)` a reduction reads, in the loop over blocks,

    for i.outer in ...:                      acc.v = 0                (w lanes)
        acc = acc + hreduce_sum(x[..])  -->  for i.outer in ...:
                                                 acc.v = acc.v + x[..]
                                             acc = acc + hreduce_sum(acc.v)

so each step is one vector add (an FMA with a product) instead of a
horizontal reduction, and the lanes are combined after the loop. This
reorders the sum further than the horizontal form already did: the
vectorizer only emits it under `@options(reassociate=True)`.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..loops import identity
from ..rewrite import stmt_exprs, walk_expr, walk_stmts
from ..vector import lanes_of

# The reduction each update operator makes (the name `loops.identity` knows).
REDUCTION_OF = {"+": "sum", "*": "prod", "min": "min", "max": "max"}


def accumulate_in_vectors(outer: ir.For) -> list[ir.Stmt]:
    """`outer` with its top-level `acc = acc op hreduce(v)` updates kept in
    vector locals, plus the statements before and after it."""
    before: list[ir.Stmt] = []
    after: list[ir.Stmt] = []
    body = list(outer.body)
    for k, s in enumerate(body):
        found = _update(s)
        if found is None or _read_elsewhere(outer, s, found[0]):
            continue
        sym, op, value = found
        lanes = lanes_of(value)
        vector = ir.Sym(f"{sym.name}.v", sym.type, "local", lanes=lanes)
        start = ir.Const(identity(REDUCTION_OF[op], sym.type), sym.type, s.span)
        before.append(ir.Assign(vector, start, s.span))
        body[k] = ir.Assign(vector, ir.Binary(op, ir.Var(vector), value, sym.type, s.span), s.span)
        total = ir.HReduce(op, ir.Var(vector), sym.type, s.span)
        after.append(ir.Assign(sym, ir.Binary(op, ir.Var(sym), total, sym.type, s.span), s.span))
    return [*before, replace(outer, body=tuple(body)), *after]


def _update(s: ir.Stmt):
    """(acc, op, v) for `acc = acc op hreduce_op(v)`."""
    match s:
        case ir.Assign(sym, ir.Binary(op, ir.Var(acc), ir.HReduce(op2, value))) if acc is sym and op == op2 \
                and op in REDUCTION_OF:
            return sym, op, value
    return None


def _read_elsewhere(outer: ir.For, update: ir.Stmt, sym: ir.Sym) -> bool:
    """Is `sym` read or written in `outer` other than by `update`?"""
    return touched_elsewhere(outer.body, {id(update)}, sym)


def touched_elsewhere(body, updates: set[int], sym: ir.Sym) -> bool:
    """Is `sym` read or assigned in `body` by a statement not in `updates` (ids)?"""
    for s in walk_stmts(body):
        if id(s) in updates:
            continue
        if isinstance(s, ir.Assign) and s.sym is sym:
            return True
        if any(isinstance(n, ir.Var) and n.sym is sym for e in stmt_exprs(s) for n in walk_expr(e)):
            return True
    return False
