"""Kernel IR -> loop IR.

- the entry prologue binds dims and checks sizes and aliasing (`prologue.py`);
- an index-notation statement becomes a loop nest over its free indices;
- each reduction becomes an accumulator local and a loop nest, placed just before
  the statement that uses it (inside the loops of any enclosing reduction);
- a conditional expression (`a if c else b`, `and`, `or`) whose skipped side
  reads memory becomes an `if` statement, so every load left inside an
  expression is evaluated unconditionally (the bounds checks rely on it).
"""

from __future__ import annotations

import math
from dataclasses import replace

from . import ir
from .prologue import entry_prologue
from .rewrite import child_exprs, map_expr, map_stmts, walk_expr
from .types import BOOL, ScalarType


def lower_kernel(kernel: ir.Kernel) -> ir.Kernel:
    prologue, checks = entry_prologue(kernel)
    body = _lower_block(kernel.body)
    return replace(kernel, body=tuple(prologue) + tuple(body), checks=tuple(checks))


def lower_program(program: ir.Program) -> ir.Program:
    return replace(program, kernels=tuple(lower_kernel(k) for k in program.kernels))


def _lower_block(body) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in body:
        out += _lower_stmt(s)
    return out


def _lower_stmt(s: ir.Stmt) -> list[ir.Stmt]:
    pre: list[ir.Stmt] = []
    match s:
        case ir.IndexStore(indices, store):
            return _index_store(indices, store, s.span)
        case ir.For(_, start, stop, _, body):
            start, stop = _expr(start, pre), _expr(stop, pre)
            return pre + [replace(s, start=start, stop=stop, body=tuple(_lower_block(body)))]
        case ir.If(cond, then, orelse):
            cond = _expr(cond, pre)
            return pre + [replace(s, cond=cond, then=tuple(_lower_block(then)), orelse=tuple(_lower_block(orelse)))]
        case ir.Assign(_, value):
            return pre + [replace(s, value=_expr(value, pre))]
        case ir.Store(_, indices, value):
            indices = tuple(_expr(i, pre) for i in indices)
            return pre + [replace(s, indices=indices, value=_expr(value, pre))]
        case ir.Check(cond):
            return pre + [replace(s, cond=_expr(cond, pre))]
    return [s]


def _index_store(indices, store: ir.Store, span) -> list[ir.Stmt]:
    """`C[m, n] = v for m < M, n < N` -> for m: for n: C[m, n] = v"""
    loop_syms = {sym: ir.Sym(sym.name, sym.type, "loop") for sym, _ in indices}

    def rename(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in loop_syms:
            return ir.Var(loop_syms[e.sym], e.span)
        return e

    (renamed,) = map_stmts((store,), rename)
    body = tuple(_lower_stmt(renamed))
    for sym, extent in reversed(indices):
        loop = loop_syms[sym]
        body = (ir.For(loop, ir.Const(0, extent.type), extent, 1, body, loop.name, span=span),)
    return list(body)


def _expr(e: ir.Expr, pre: list[ir.Stmt]) -> ir.Expr:
    """Lower reductions and memory-reading conditionals in `e`, emitting into `pre`."""
    if not any(isinstance(n, (ir.Reduce, ir.Select, ir.Binary)) for n in walk_expr(e)):
        return e
    match e:
        case ir.Reduce():
            return _reduce(e, pre)
        case ir.Select(cond, a, b, t) if _reads(a) or _reads(b):
            return _select(_expr(cond, pre), a, b, t, pre, e.span)
        case ir.Binary("and" | "or", lhs, rhs) if _reads(rhs):
            return _short_circuit(e.op, _expr(lhs, pre), rhs, pre, e.span)
    children = child_exprs(e)
    if not children:
        return e
    lowered = [_expr(c, pre) for c in children]
    return _rebuild(e, lowered)


def _rebuild(e: ir.Expr, kids: list[ir.Expr]) -> ir.Expr:
    match e:
        case ir.Load():
            return replace(e, indices=tuple(kids))
        case ir.Binary():
            return replace(e, lhs=kids[0], rhs=kids[1])
        case ir.Unary():
            return replace(e, operand=kids[0])
        case ir.Cast():
            return replace(e, value=kids[0])
        case ir.Fma():
            return replace(e, a=kids[0], b=kids[1], c=kids[2])
        case ir.Select():
            return replace(e, cond=kids[0], a=kids[1], b=kids[2])
        case ir.TargetOp():
            return replace(e, args=tuple(kids))
    return e


def _reads(e: ir.Expr) -> bool:
    return any(isinstance(n, (ir.Load, ir.Reduce)) for n in walk_expr(e))


def _reduce(e: ir.Reduce, pre: list[ir.Stmt]) -> ir.Expr:
    acc = ir.Sym(f"{e.op}", e.type, "local")
    inner: list[ir.Stmt] = []
    loop_syms = {sym: ir.Sym(sym.name, sym.type, "loop") for sym, _ in e.indices}
    body = map_expr(e.body, lambda x: ir.Var(loop_syms[x.sym], x.span)
                    if isinstance(x, ir.Var) and x.sym in loop_syms else x)
    value = _expr(body, inner)
    op = "+" if e.op == "sum" else e.op
    inner.append(ir.Assign(acc, ir.Binary(op, ir.Var(acc), value, e.type, e.span), e.span))
    nest: tuple[ir.Stmt, ...] = tuple(inner)
    for sym, extent in reversed(e.indices):
        loop = loop_syms[sym]
        nest = (ir.For(loop, ir.Const(0, extent.type), extent, 1, nest, loop.name, span=e.span),)
    pre.append(ir.Assign(acc, ir.Const(identity(e.op, e.type), e.type, e.span), e.span))
    pre.extend(nest)
    return ir.Var(acc, e.span)


def identity(op: str, t: ScalarType):
    if op == "sum":
        return 0.0 if t.is_float else 0
    if op == "prod":
        return 1.0 if t.is_float else 1
    if t.is_float:
        return -math.inf if op == "max" else math.inf
    bits = t.bits - 1 if t.is_signed else t.bits
    lo, hi = (-(1 << bits), (1 << bits) - 1) if t.is_signed else (0, (1 << bits) - 1)
    return lo if op == "max" else hi


def _select(cond, a, b, t, pre, span) -> ir.Expr:
    tmp = ir.Sym("sel", t, "local")
    then: list[ir.Stmt] = []
    orelse: list[ir.Stmt] = []
    then.append(ir.Assign(tmp, _expr(a, then), span))
    orelse.append(ir.Assign(tmp, _expr(b, orelse), span))
    pre.append(ir.If(cond, tuple(then), tuple(orelse), span))
    return ir.Var(tmp, span)


def _short_circuit(op, lhs, rhs, pre, span) -> ir.Expr:
    tmp = ir.Sym(op, BOOL, "local")
    pre.append(ir.Assign(tmp, lhs, span))
    body: list[ir.Stmt] = []
    body.append(ir.Assign(tmp, _expr(rhs, body), span))
    cond: ir.Expr = ir.Var(tmp) if op == "and" else ir.Unary("not", ir.Var(tmp), BOOL, span)
    pre.append(ir.If(cond, tuple(body), (), span))
    return ir.Var(tmp, span)
