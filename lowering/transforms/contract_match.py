"""Recognize a contraction in loop IR: the nest index notation gives a matmul.

    for m in range(0, M):                 C[m, n] = sum(A[m, k] * B[k, n])
        for n in range(0, N):             lowers to this nest (the two outer
            sum = 0                       loops in either order, any index
            for k in range(0, K):         expressions and strides)
                sum = sum + A[..] * B[..]
            C[..] = sum

Each loop index is classified as in the seeds' tensor backend: M (in A and C),
N (in B and C), K (in A and B, reduced). N is the one that indexes C's last
axis, so the micro-kernel's vectors run along C's rows. Around this core:

- more reduction loops outside `k` (`sum(A[r, m, k] * B[r, k, n])`) are the
  batch-reduce loops of a BRGEMM: every one of them sums into the same C tile;
- the store may accumulate, `C[..] = C[..] + sum` (what `C[m, n] += sum(..)`
  lowers to), so the sum starts from C instead of 0 (a reordering of the
  additions: only with `@options(reassociate=True)`);
- it may apply an epilogue to the sum, `C[..] = f(sum)` (`relu(sum(..) + bias[n])`,
  helpers inlined into locals first), or to the accumulated sum,
  `C[..] = f(C[..] + sum)`, which runs once per element, on the last visit
  of each C tile; it may read other tensors, and C only in that `C[..] + sum`;
- loops around the nest whose body is just the nest are batch loops (found
  by `contract.batch_loops`).

`match_nest` returns a `Contraction`, or a sentence saying why the nest is not
one (for `--remarks` and for the `contract` directive's diagnostic).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from .. import ir
from ..rewrite import map_expr, walk_expr
from ..types import F32, F64, ScalarType, value_type
from .nest import substitute_expr


@dataclass(frozen=True)
class Contraction:
    nest: ir.For  # the outer loop: the whole nest is replaced
    m: ir.For
    n: ir.For
    k: ir.For
    a: ir.Load  # indexed by m and k
    b: ir.Load  # indexed by k and n
    store: ir.Store  # C[..] = the sum (or its epilogue)
    dtype: ScalarType  # of the sum (f32 or f64); operands may be stored narrower
    br: tuple[ir.For, ...] = ()  # batch-reduce loops around k, outermost first
    acc: ir.Sym | None = None  # the sum's local, as the epilogue refers to it
    accumulate: bool = False  # C[..] = C[..] + sum: start from C
    epilogue: ir.Expr | None = None  # the stored value as a function of Var(acc), when not the sum itself


def match_nest(loop: ir.For, reassociate: bool = False) -> Contraction | str:
    """The contraction `loop` computes, or why it is not one. A sum added to C
    is one only with `reassociate` (the micro-kernel starts it from C)."""
    shape = _shape(loop)
    if isinstance(shape, str):
        return shape
    outer, inner, reduce_loops, acc, x, y, store, value = shape
    k, br = reduce_loops[-1], tuple(reduce_loops[:-1])
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
    loop_vars = {outer.var, inner.var, *(r.var for r in reduce_loops)}
    for bound in (outer.stop, inner.stop, *(r.stop for r in reduce_loops)):
        if uses(bound) & (loop_vars | {acc}):
            return "a loop bound depends on another loop of the nest"
    reduced = {r.var for r in reduce_loops}
    if uses(store.indices) & (reduced | {acc}) or (uses(x.indices) | uses(y.indices)) & {acc}:
        return "an index depends on the sum"
    finish = _finish(store, value, acc, reduced)
    if isinstance(finish, str):
        return finish
    last = uses(store.indices[-1:]) if store.indices else set()
    n, m = (outer, inner) if outer.var in last and inner.var not in last else (inner, outer)
    a, b = _operands(x, y, m.var, n.var)
    if a is None:
        return "each operand must use one of the two output loops, not both"
    accumulate, epilogue = finish
    if accumulate and not reassociate:
        return ("the sum is added to C, and starting it from C reorders the additions "
                "(allowed with @options(reassociate=True))")
    return Contraction(loop, m, n, k, a, b, store, dtype, br, acc, accumulate, epilogue)


def _shape(loop: ir.For):
    """(outer, inner, reduce loops, acc, x, y, store, stored value) when `loop`
    has the nest's shape, else a reason."""
    if not plain_loop(loop) or len(loop.body) != 1 or not isinstance(loop.body[0], ir.For):
        return "not a perfect nest of two loops around a sum"
    inner = loop.body[0]
    if not plain_loop(inner):
        return "not a perfect nest of two loops around a sum"
    match inner.body:
        case (ir.Assign(acc, ir.Const(value=0)), ir.For() as top, *between, ir.Store() as store) \
                if store.mask is None:
            pass
        case _:
            return "the inner loop is not `sum = 0; for k: sum = sum + a * b; C[..] = sum`"
    value = _inline_locals(between, store.value)
    if value is None:
        return "the sum is not stored, or something else happens between the sum and its store"
    reduce_loops = [top]
    while plain_loop(reduce_loops[-1]) and len(reduce_loops[-1].body) == 1 \
            and isinstance(reduce_loops[-1].body[0], ir.For):
        reduce_loops.append(reduce_loops[-1].body[0])
    if not all(plain_loop(r) for r in reduce_loops):
        return "a reduction loop does not run from 0 in steps of 1"
    match reduce_loops[-1].body:
        case (ir.Assign(sym, ir.Binary("+", ir.Var(s2), ir.Binary("*", ir.Load() as x, ir.Load() as y))),) \
                if sym is acc and s2 is acc and x.mask is None and y.mask is None:
            return loop, inner, reduce_loops, acc, x, y, store, value
    return "the reduction is not a sum of products of two tensor elements"


def _inline_locals(between: list, value: ir.Expr) -> ir.Expr | None:
    """The stored value with the locals assigned between the sum and the store
    (inlined helpers: `x = sum + bias[n]; relu.result = max(x, 0)`) replaced
    by their values; None when anything else stands there."""
    values: dict[ir.Sym, ir.Expr] = {}
    for s in between:
        if not isinstance(s, ir.Assign) or s.sym.role != "local" or s.sym in values:
            return None
        values[s.sym] = substitute_expr(s.value, values)
    return substitute_expr(value, values)


def _finish(store: ir.Store, value: ir.Expr, acc: ir.Sym, reduced: set[ir.Sym]):
    """(accumulate, epilogue) for the stored `value`, or why it cannot be fused."""
    uses_of_acc = sum(1 for e in walk_expr(value) if isinstance(e, ir.Var) and e.sym is acc)
    if uses_of_acc == 0:
        return "the sum is not stored"
    accumulate = False
    if uses_of_acc == 1:  # C[..] + sum, anywhere in the value: the sum starts from C
        found: list[ir.Expr] = []
        value = map_expr(value, lambda e: _started_from_c(e, store, acc, found))
        accumulate = bool(found)
    if isinstance(value, ir.Var) and value.sym is acc:
        return accumulate, None
    for e in walk_expr(value):
        match e:
            case ir.Load(tensor=tensor) if tensor is store.tensor:
                return f"the result is combined with '{tensor.name}' other than by `+=`"
            case ir.Load(safe=False):
                return "an access after the sum is not proven in bounds"
            case ir.Load(mask=mask) if mask is not None:
                return "a masked access after the sum"
            case ir.Var(sym) if sym in reduced:
                return "the value stored depends on a reduction index"
            case ir.Var(sym) if sym.role == "local" and sym is not acc:
                return "the value stored depends on a local assigned before the sum"
            case ir.Reduce() | ir.HReduce() | ir.Ramp() | ir.Broadcast():
                return "the value stored is not a plain expression of the sum"
    return accumulate, value


def _started_from_c(e: ir.Expr, store: ir.Store, acc: ir.Sym, found: list) -> ir.Expr:
    """`C[..] + sum` (the element stored) becomes `sum`, noted in `found`."""
    match e:
        case ir.Binary("+", ir.Load() as old, ir.Var(sym)) | ir.Binary("+", ir.Var(sym), ir.Load() as old) \
                if sym is acc and _same_element(old, store):
            found.append(e)
            return ir.Var(acc, e.span)
    return e


def _same_element(load: ir.Load, store: ir.Store) -> bool:
    """Does `load` read the element `store` writes (same index expressions,
    wherever they were written)?"""
    return load.tensor is store.tensor and load.mask is None and \
        tuple(map(_unspanned, load.indices)) == tuple(map(_unspanned, store.indices))


def _unspanned(e: ir.Expr) -> ir.Expr:
    return map_expr(e, lambda n: replace(n, span=None) if getattr(n, "span", None) is not None else n)


def plain_loop(loop: ir.For) -> bool:
    start = loop.start
    return loop.kind == "serial" and loop.step == 1 and isinstance(start, ir.Const) and start.value == 0


def _operands(x: ir.Load, y: ir.Load, m: ir.Sym, n: ir.Sym):
    """(A, B): the operand that uses m but not n, and the one that uses n but not m."""
    xs, ys = uses(x.indices), uses(y.indices)
    for a, b, au, bu in ((x, y, xs, ys), (y, x, ys, xs)):
        if m in au and n not in au and n in bu and m not in bu:
            return a, b
    return None, None


def uses(exprs) -> set[ir.Sym]:
    if not isinstance(exprs, tuple):
        exprs = (exprs,)
    return {e.sym for top in exprs for e in walk_expr(top) if isinstance(e, ir.Var)}
