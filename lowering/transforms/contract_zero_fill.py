"""Fold `C = 0` followed by a contraction that adds into all of C into `C = sum`.

    for a, b, e, d:  C[a, b, e, d] = 0.0         for a, b, e, d:
    for a, b, e, d:                         ->       sum = 0 ... over c, f
        sum = 0 ... over c, f                        C[a, b, e, d] = sum
        C[a, b, e, d] = C[a, b, e, d] + sum

The seeds' "GEMM" configuration (C zeroed, then a K loop around GEMMs that
add into it) as a user writes it: the zeroing is a pass of its own over C
(4 MiB there), and each C tile is then loaded from memory before the sum
goes on. Both nests must cover all of C, one store per element (each index
a loop variable from 0 to C's size on that axis), with nothing in between;
then every element gets 0 + sum, which is the sum but for the sign of a zero
sum (+0 becomes -0 when every product is -0), and that is what
`@options(reassociate=True)` allows, as it allows the sunk sum's new order.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import stmt_exprs, walk_expr, walk_stmts
from .contract_match import plain_loop

FOLD_REMARK = "the zeroing of '{c}' folded into the contraction after it: each element is written once, the sum"


def fold_zero_fills(body: tuple[ir.Stmt, ...], notes: list[tuple]) -> tuple[ir.Stmt, ...]:
    """`body` (and the bodies of its loops) with each zero fill of a tensor
    that the next statement's contraction adds into folded into it; each
    fold appends (the fill's span, the tensor's name) to `notes`."""
    out: list[ir.Stmt] = []
    changed = False
    for s in body:
        if isinstance(s, ir.For) and out and (tensor := _zero_fill(out[-1])) is not None:
            folded = _without_accumulate(s, tensor)
            if folded is not None:
                notes.append((out[-1].span, tensor.name))
                out[-1] = folded
                changed = True
                continue
        if isinstance(s, ir.For):
            inner = fold_zero_fills(s.body, notes)
            if inner is not s.body:
                s, changed = replace(s, body=inner), True
        out.append(s)
    return tuple(out) if changed else body


def _chain(loop: ir.For) -> tuple[list[ir.For], tuple[ir.Stmt, ...]]:
    """The perfect nest from `loop` (each loop's body one loop) and its innermost body."""
    chain = [loop]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], ir.For):
        chain.append(chain[-1].body[0])
    return chain, chain[-1].body


def _covers(chain: list[ir.For], store: ir.Store) -> bool:
    """Each of the store's indices is its own loop of `chain`, running over
    all of the tensor's axis from 0, and every loop is one of them."""
    tensor = store.tensor
    if len(store.indices) != tensor.rank or len(chain) != tensor.rank:
        return False
    loops = {f.var: f for f in chain}
    for axis, index in enumerate(store.indices):
        loop = loops.pop(index.sym, None) if isinstance(index, ir.Var) else None
        if loop is None or not plain_loop(loop) or not _is_size(loop.stop, tensor, axis):
            return False
    return not loops


def _is_size(stop: ir.Expr, tensor: ir.TensorParam, axis: int) -> bool:
    dim = tensor.dims[axis]
    match stop:
        case ir.Var(sym):
            return sym is dim
        case ir.Const(value=value):
            return isinstance(dim, int) and value == dim
        case ir.Shape(t, a):
            return t is tensor and a == axis
    return False


def _zero_fill(s: ir.Stmt) -> ir.TensorParam | None:
    """The tensor that `s` fills with zeros, all of it, one store per element."""
    if not isinstance(s, ir.For):
        return None
    chain, inner = _chain(s)
    match inner:
        case (ir.Store(value=ir.Const(value=0)) as store,) if store.mask is None and _covers(chain, store):
            return store.tensor
    return None


def _without_accumulate(s: ir.For, tensor: ir.TensorParam) -> ir.For | None:
    """`s` storing its sum where it added it to `tensor`, when `s` is a sum
    over all of `tensor` that reads it only to add to it; else None."""
    chain, inner = _chain(s)
    match inner:
        case (*_, ir.Store(value=ir.Binary("+", ir.Load() as old, ir.Var() as total)) as store):
            pass
        case _:
            return None
    if store.tensor is not tensor or old.tensor is not tensor or old.indices != store.indices:
        return None
    if not _covers(chain, store):
        return None
    before = inner[:-1]
    if any(isinstance(x, ir.Store) and x.tensor is tensor for x in walk_stmts(before)) or _reads(before, tensor):
        return None
    body = (*inner[:-1], replace(store, value=total))
    for loop in reversed(chain):
        body = (replace(loop, body=body),)
    return body[0]


def _reads(body, tensor: ir.TensorParam) -> bool:
    return any(isinstance(e, ir.Load) and e.tensor is tensor
               for s in walk_stmts(body) for top in stmt_exprs(s) for e in walk_expr(top))
