"""Generic bottom-up rewriting and walking of IR trees.

`map_expr(e, fn)` rebuilds `e` with `fn` applied to every sub-expression after its
children (post-order); `map_stmts(body, expr_fn, stmt_fn)` does the same for
statements. Transforms express themselves as small `fn`s instead of re-spelling
the traversal.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterator

from . import ir

ExprFn = Callable[[ir.Expr], ir.Expr]
StmtFn = Callable[[ir.Stmt], "ir.Stmt | list[ir.Stmt] | None"]


def map_expr(e: ir.Expr, fn: ExprFn) -> ir.Expr:
    """`e` rebuilt bottom-up, `fn` applied to every node after its children."""
    return fn(map_children(e, lambda child: map_expr(child, fn)))


def map_children(e: ir.Expr, fn: ExprFn) -> ir.Expr:
    """`e` with `fn` applied to each direct child (not recursively): for
    rewrites that decide top-down where to stop (`transforms/hoist.py`)."""
    match e:
        case ir.Load(_, indices, mask=mask):
            return replace(e, indices=tuple(fn(i) for i in indices), mask=None if mask is None else fn(mask))
        case ir.Binary(_, lhs, rhs):
            return replace(e, lhs=fn(lhs), rhs=fn(rhs))
        case ir.Unary(_, operand):
            return replace(e, operand=fn(operand))
        case ir.Cast(value):
            return replace(e, value=fn(value))
        case ir.Fma(a, b, c):
            return replace(e, a=fn(a), b=fn(b), c=fn(c))
        case ir.Select(cond, a, b):
            return replace(e, cond=fn(cond), a=fn(a), b=fn(b))
        case ir.Reduce(_, indices, body):
            return replace(e, indices=tuple((s, fn(x)) for s, x in indices), body=fn(body))
        case ir.Ramp(base):
            return replace(e, base=fn(base))
        case ir.Broadcast(value):
            return replace(e, value=fn(value))
        case ir.HReduce(_, value):
            return replace(e, value=fn(value))
        case ir.TargetOp(_, args):
            return replace(e, args=tuple(fn(a) for a in args))
        case ir.Shuffle(a, b):
            return replace(e, a=fn(a), b=fn(b))
        case ir.AlignGap(_, indices):
            return replace(e, indices=tuple(fn(i) for i in indices))
    return e


def map_stmts(body, expr_fn: ExprFn | None = None, stmt_fn: StmtFn | None = None) -> tuple[ir.Stmt, ...]:
    """Rewrite a statement list; `stmt_fn` may return a statement, a list, or None
    (keep the rebuilt statement)."""
    out: list[ir.Stmt] = []
    for s in body:
        s = _map_children(s, expr_fn, stmt_fn)
        result = stmt_fn(s) if stmt_fn else None
        if result is None:
            out.append(s)
        elif isinstance(result, list):
            out.extend(result)
        else:
            out.append(result)
    return tuple(out)


def _map_children(s: ir.Stmt, expr_fn, stmt_fn) -> ir.Stmt:
    ex = (lambda e: map_expr(e, expr_fn)) if expr_fn else (lambda e: e)
    match s:
        case ir.For(_, start, stop, _, body, when=when):
            return replace(s, start=ex(start), stop=ex(stop), body=map_stmts(body, expr_fn, stmt_fn),
                           when=None if when is None else ex(when))
        case ir.If(cond, then, orelse):
            return replace(s, cond=ex(cond), then=map_stmts(then, expr_fn, stmt_fn),
                           orelse=map_stmts(orelse, expr_fn, stmt_fn))
        case ir.Assign(_, value):
            return replace(s, value=ex(value))
        case ir.Store(_, indices, value, mask=mask):
            return replace(s, indices=tuple(ex(i) for i in indices), value=ex(value),
                           mask=None if mask is None else ex(mask))
        case ir.Check(cond):
            return replace(s, cond=ex(cond))
        case ir.Alloc(size=size):
            return replace(s, size=ex(size))
        case ir.Realign(when=when):
            return replace(s, when=ex(when))
        case ir.Prefetch(indices=indices):
            return replace(s, indices=tuple(ex(i) for i in indices))
        case ir.IndexStore(indices, store):
            idx = tuple((sym, ex(x)) for sym, x in indices)
            return replace(s, indices=idx, store=_map_children(store, expr_fn, stmt_fn))
    return s


def child_exprs(e: ir.Expr) -> tuple[ir.Expr, ...]:
    match e:
        case ir.Load(_, indices, mask=mask):
            return indices if mask is None else (*indices, mask)
        case ir.Binary(_, lhs, rhs):
            return (lhs, rhs)
        case ir.Unary(_, operand) | ir.Cast(operand):
            return (operand,)
        case ir.Fma(a, b, c) | ir.Select(a, b, c):
            return (a, b, c)
        case ir.Reduce(_, indices, body):
            return (*(x for _, x in indices), body)
        case ir.Ramp(base) | ir.Broadcast(base) | ir.HReduce(_, base):
            return (base,)
        case ir.TargetOp(_, args):
            return args
        case ir.Shuffle(a, b):
            return (a, b)
        case ir.AlignGap(_, indices):
            return indices
    return ()


def walk_expr(e: ir.Expr) -> Iterator[ir.Expr]:
    """Every sub-expression of `e`, `e` first."""
    stack = [e]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(child_exprs(node)))


def stmt_exprs(s: ir.Stmt) -> tuple[ir.Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested bodies)."""
    match s:
        case ir.For(_, start, stop, when=when):
            return (start, stop) if when is None else (start, stop, when)
        case ir.If(cond):
            return (cond,)
        case ir.Assign(_, value):
            return (value,)
        case ir.Store(_, indices, value, mask=mask):
            return (*indices, value) if mask is None else (*indices, value, mask)
        case ir.Check(cond):
            return (cond,)
        case ir.Alloc(size=size):
            return (size,)
        case ir.Realign(when=when):
            return (when,)
        case ir.Prefetch(indices=indices):
            return indices
        case ir.IndexStore(indices, store):
            return (*(x for _, x in indices), *stmt_exprs(store))
    return ()


def walk_stmts(body) -> Iterator[ir.Stmt]:
    """Every statement in `body`, nested ones included, in program order."""
    for s in body:
        yield s
        match s:
            case ir.For(body=inner):
                yield from walk_stmts(inner)
            case ir.If(then=then, orelse=orelse):
                yield from walk_stmts(then)
                yield from walk_stmts(orelse)


def assigned_syms(body) -> set[ir.Sym]:
    """Symbols given a value anywhere in `body` (locals and loop variables)."""
    out: set[ir.Sym] = set()
    for s in walk_stmts(body):
        match s:
            case ir.Assign(sym):
                out.add(sym)
            case ir.For(var):
                out.add(var)
    return out
