"""Recognize a contraction in loop IR: the nest index notation gives a matmul.

    for m in range(0, M):                 C[m, n] = sum(A[m, k] * B[k, n])
        for n in range(0, N):             lowers to this nest (the two outer
            sum = 0                       loops in either order, any index
            for k in range(0, K):         expressions and strides)
                sum = sum + A[..] * B[..]
            C[..] = sum

Each loop index is classified as in the seeds' tensor backend: M (in A and C),
N (in B and C), K (in A and B, reduced). N is the one that indexes C's last
axis, so the micro-kernel's vectors run along C's rows. `match_nest` returns a
`Contraction`, or a sentence saying why the nest is not one (for `--remarks`
and for the `contract` directive's diagnostic).
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import ir
from ..rewrite import walk_expr
from ..types import F32, F64, ScalarType, value_type


@dataclass(frozen=True)
class Contraction:
    nest: ir.For  # the outer loop: the whole nest is replaced
    m: ir.For
    n: ir.For
    k: ir.For
    a: ir.Load  # indexed by m and k
    b: ir.Load  # indexed by k and n
    store: ir.Store  # C[..] = the sum
    dtype: ScalarType  # of the sum (f32 or f64); operands may be stored narrower


def match_nest(loop: ir.For) -> Contraction | str:
    """The contraction `loop` computes, or why it is not one."""
    shape = _shape(loop)
    if isinstance(shape, str):
        return shape
    outer, inner, k, acc, x, y, store = shape
    dtype = acc.type
    if dtype not in (F32, F64):
        return f"the sum is {dtype}; the micro-kernel handles f32 and f64"
    # Storage may differ (f16 operands are read as f32); the values may not.
    for tensor, read_as in ((x.tensor, x.type), (y.tensor, y.type), (store.tensor, value_type(store.tensor.dtype))):
        if read_as != dtype:
            return f"'{tensor.name}' holds {tensor.dtype}, the sum is {dtype}: mixed types"
    if not (x.safe and y.safe and store.safe):
        return "an access is not proven in bounds"
    if store.tensor in (x.tensor, y.tensor):
        return f"the sum reads '{store.tensor.name}', which it writes"
    loop_vars = {outer.var, inner.var, k.var}
    for bound in (outer.stop, inner.stop, k.stop):
        if _uses(bound) & (loop_vars | {acc}):
            return "a loop bound depends on another loop of the nest"
    if _uses(store.indices) & {k.var, acc} or (_uses(x.indices) | _uses(y.indices)) & {acc}:
        return "an index depends on the sum"
    last = _uses(store.indices[-1:]) if store.indices else set()
    n, m = (outer, inner) if outer.var in last and inner.var not in last else (inner, outer)
    a, b = _operands(x, y, m.var, n.var)
    if a is None:
        return "each operand must use one of the two output loops, not both"
    return Contraction(loop, m, n, k, a, b, store, dtype)


def _shape(loop: ir.For):
    """(outer, inner, k, acc, x, y, store) when `loop` has the nest's shape, else a reason."""
    if not _plain(loop) or len(loop.body) != 1 or not isinstance(loop.body[0], ir.For):
        return "not a perfect nest of two loops around a sum"
    inner = loop.body[0]
    if not _plain(inner):
        return "not a perfect nest of two loops around a sum"
    match inner.body:
        case (ir.Assign(acc, ir.Const(value=0)), ir.For() as k, ir.Store(value=ir.Var(sym)) as store) \
                if sym is acc and _plain(k) and store.mask is None:
            pass
        case _:
            return "the inner loop is not `sum = 0; for k: sum = sum + a * b; C[..] = sum`"
    match k.body:
        case (ir.Assign(sym, ir.Binary("+", ir.Var(s2), ir.Binary("*", ir.Load() as x, ir.Load() as y))),) \
                if sym is acc and s2 is acc and x.mask is None and y.mask is None:
            return loop, inner, k, acc, x, y, store
    return "the reduction is not a sum of products of two tensor elements"


def _plain(loop: ir.For) -> bool:
    start = loop.start
    return loop.kind == "serial" and loop.step == 1 and isinstance(start, ir.Const) and start.value == 0


def _operands(x: ir.Load, y: ir.Load, m: ir.Sym, n: ir.Sym):
    """(A, B): the operand that uses m but not n, and the one that uses n but not m."""
    xs, ys = _uses(x.indices), _uses(y.indices)
    for a, b, au, bu in ((x, y, xs, ys), (y, x, ys, xs)):
        if m in au and n not in au and n in bu and m not in bu:
            return a, b
    return None, None


def _uses(exprs) -> set[ir.Sym]:
    if not isinstance(exprs, tuple):
        exprs = (exprs,)
    return {e.sym for top in exprs for e in walk_expr(top) if isinstance(e, ir.Var)}
