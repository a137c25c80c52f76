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

A float max or min is kept as integer keys instead (`_float_extreme`): the
IEEE maximum a vector max is (NaN wins, -0 < +0) costs x86 six dependent
instructions per vector, where a signed integer max of the key is one
(64 x 1024 rows in L1, AVX-512: 14.8 -> 4.5 us on one accumulator).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..loops import identity
from ..rewrite import stmt_exprs, walk_expr, walk_stmts
from ..types import BOOL, I32, I64
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
        if sym.type.is_float and op in ("min", "max"):
            start, body[k], end = _float_extreme(sym, op, value, s.span)
            before.extend(start)
            after.extend(end)
            continue
        lanes = lanes_of(value)
        vector = ir.Sym(f"{sym.name}.v", sym.type, "local", lanes=lanes)
        start = ir.Const(identity(REDUCTION_OF[op], sym.type), sym.type, s.span)
        before.append(ir.Assign(vector, start, s.span))
        body[k] = ir.Assign(vector, ir.Binary(op, ir.Var(vector), value, sym.type, s.span), s.span)
        total = ir.HReduce(op, ir.Var(vector), sym.type, s.span)
        after.append(ir.Assign(sym, ir.Binary(op, ir.Var(sym), total, sym.type, s.span), s.span))
    return [*before, replace(outer, body=_flat(body)), *after]


def _flat(body: list) -> tuple[ir.Stmt, ...]:
    """`body` with the statement lists some updates became spliced in."""
    return tuple(x for s in body for x in (s if isinstance(s, list) else [s]))


def _float_extreme(sym: ir.Sym, op: str, value: ir.Expr, span):
    """(before, update, after) statements for `sym = sym op hreduce_op(value)`,
    op min or max of floats, through integer keys.

    The key of a float's bits b, `b ^ ((b >> w-1) & M)` with M the magnitude
    mask, orders as signed integers the way the floats do, -0 below +0, so
    the integer max (min) of the keys is the key of the float max (min), and
    the key maps back to the bits by the same formula. NaN keys land at
    either end, so NaN is told apart: a lane's largest `b & M` above the
    infinity's bits is a NaN, and then the result is that NaN.
    """
    t = sym.type
    it = I32 if t.bits == 32 else I64
    lanes = lanes_of(value)
    magnitude, inf_bits = (1 << (t.bits - 1)) - 1, (0x7f800000 if t.bits == 32 else 0x7ff0000000000000)

    def const(v):
        return ir.Const(v, it, span)

    def binary(o, a, b, typ=it):
        return ir.Binary(o, a, b, typ, span)

    def key(b: ir.Sym) -> ir.Expr:
        return binary("^", ir.Var(b), binary("&", binary(">>", ir.Var(b), const(t.bits - 1)), const(magnitude)))

    b = ir.Sym(f"{sym.name}.bits", it, "local", lanes=lanes)
    keys = ir.Sym(f"{sym.name}.keys", it, "local", lanes=lanes)
    nans = ir.Sym(f"{sym.name}.nans", it, "local", lanes=lanes)
    # Start from the key of the float identity, +-inf, so that an empty loop
    # gives it back; a negative float's key is the complement of its
    # magnitude's.
    before = [ir.Assign(keys, const(inf_bits if op == "min" else ~inf_bits), span), ir.Assign(nans, const(0), span)]
    update = [ir.Assign(b, ir.Unary("bits", value, it, span), span),
              ir.Assign(keys, binary(op, ir.Var(keys), key(b)), span),
              ir.Assign(nans, binary("max", ir.Var(nans), binary("&", ir.Var(b), const(magnitude))), span)]
    best = ir.Sym(f"{sym.name}.best", it, "local")
    worst = ir.Sym(f"{sym.name}.nan", it, "local")
    total = ir.Select(binary(">", ir.Var(worst), const(inf_bits), BOOL),
                      ir.Unary("from_bits", ir.Var(worst), t, span), ir.Unary("from_bits", key(best), t, span), t, span)
    after = [ir.Assign(best, ir.HReduce(op, ir.Var(keys), it, span), span),
             ir.Assign(worst, ir.HReduce("max", ir.Var(nans), it, span), span),
             ir.Assign(sym, ir.Binary(op, ir.Var(sym), total, t, span), span)]
    return before, update, after


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
