"""The `guard` pass: bounds checks for every tensor access.

Contract: after this pass, no execution of the kernel reads or writes a tensor
element outside [0, size) on any axis; an access that would do so makes the kernel
stop with a failed `Check` (a status code naming the tensor, axis and line) first.

Cost: an access inside a loop whose index is affine in the loop variable (and
otherwise loop-invariant) is checked once, before the loop, at its first and last
iteration — an affine function takes its extremes at the ends. Other accesses
(data-dependent indices, accesses under an `if` in the loop) are checked where
they happen. Runs last, after scheduling, on loop IR.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import ir
from .arith import add, both, compare, floordiv, i64, maximum, minimum, mul, sub
from .bounds_proof import LoopRange, provably_in_bounds
from .rewrite import assigned_syms, map_expr, stmt_exprs, walk_expr
from .types import BOOL

name = "guard"


@dataclass
class _Ctx:
    loop: ir.For | None
    variant: set
    conditional: bool
    hoisted: list  # checks to place before `loop`
    ranges: list  # LoopRange of every enclosing loop, outermost first


def run(kernel: ir.Kernel) -> ir.Kernel:
    checks = list(kernel.checks)
    body = _block(kernel.body, _Ctx(None, set(), False, [], []), checks)
    return replace(kernel, body=tuple(body), checks=tuple(checks))


def _block(body, ctx: _Ctx, checks: list) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for s in body:
        out += _stmt(s, ctx, checks)
    return out


def _stmt(s: ir.Stmt, ctx: _Ctx, checks: list) -> list[ir.Stmt]:
    here: list[ir.Stmt] = []
    for tensor, indices, span in _accesses(s):
        for axis, index in enumerate(indices):
            if provably_in_bounds(index, ir.Shape(tensor, axis), ctx.ranges):
                continue
            cond_fn = _hoistable(index, ctx)
            code = _info(checks, tensor, axis, span)
            if cond_fn is not None:
                ctx.hoisted.append(ir.Check(cond_fn(tensor, axis), code, span))
            else:
                here.append(ir.Check(_in_range(index, ir.Shape(tensor, axis)), code, span))
    match s:
        case ir.For(var, start, stop, step, body):
            ranges = ctx.ranges + [LoopRange(var, start, stop, step)]
            inner = _Ctx(s, assigned_syms(body) | {var}, False, [], ranges)
            new_body = _block(body, inner, checks)
            loop = replace(s, body=tuple(new_body))
            if inner.hoisted:
                runs = ir.Binary("<" if step > 0 else ">", start, stop, BOOL, s.span)
                here.append(ir.If(runs, tuple(inner.hoisted), (), s.span))
            return here + [loop]
        case ir.If(_, then, orelse):
            inner = replace(ctx, conditional=ctx.loop is not None)
            then2, else2 = _block(then, inner, checks), _block(orelse, inner, checks)
            return here + [replace(s, then=tuple(then2), orelse=tuple(else2))]
    return here + [s]


def mark_proven(kernel: ir.Kernel) -> ir.Kernel:
    """Flag every access proven in bounds as `safe`, before scheduling.

    Proofs are easy on the loops as written (`A[i, k]` under `range(M)`); the
    schedule transforms only reorder the same accesses, so the flag stays true
    and `run` later skips them however the loops were rewritten.
    """
    return replace(kernel, body=_mark_block(kernel.body, []))


def _mark_block(body, ranges: list) -> tuple[ir.Stmt, ...]:
    out = []
    for s in body:
        def mark(e: ir.Expr) -> ir.Expr:
            if isinstance(e, ir.Load) and not e.safe and _proven(e.tensor, e.indices, ranges):
                return replace(e, safe=True)
            return e

        match s:
            case ir.For(var, start, stop, step, body=inner):
                inner_ranges = ranges + [LoopRange(var, start, stop, step)]
                s = replace(s, start=map_expr(start, mark), stop=map_expr(stop, mark),
                            body=_mark_block(inner, inner_ranges))
            case ir.If(cond, then, orelse):
                s = replace(s, cond=map_expr(cond, mark), then=_mark_block(then, ranges),
                            orelse=_mark_block(orelse, ranges))
            case ir.Assign(_, value):
                s = replace(s, value=map_expr(value, mark))
            case ir.Check(cond):
                s = replace(s, cond=map_expr(cond, mark))
            case ir.Store(tensor, indices, value):
                idx = tuple(map_expr(i, mark) for i in indices)
                safe = s.safe or _proven(tensor, idx, ranges)
                s = replace(s, indices=idx, value=map_expr(value, mark), safe=safe)
        out.append(s)
    return tuple(out)


def _proven(tensor: ir.TensorParam, indices, ranges: list) -> bool:
    return all(provably_in_bounds(i, ir.Shape(tensor, axis), ranges) for axis, i in enumerate(indices))


def _accesses(s: ir.Stmt):
    """(tensor, indices, span) of each load the statement evaluates, and its store."""
    for e in stmt_exprs(s):
        for node in walk_expr(e):
            if isinstance(node, ir.Load) and not node.safe:
                yield node.tensor, node.indices, node.span or s.span
    if isinstance(s, ir.Store) and not s.safe:
        yield s.tensor, s.indices, s.span


def _info(checks: list, tensor: ir.TensorParam, axis: int, span) -> int:
    where = f" at line {span.line}" if span is not None else ""
    checks.append(ir.CheckInfo("bounds", f"index out of bounds on '{tensor.name}' axis {axis}{where}",
                               span, (tensor.name,)))
    return len(checks) - 1


def _in_range(index: ir.Expr, size: ir.Expr) -> ir.Expr:
    return both(compare(">=", index, i64(0)), compare("<", index, size))


def _hoistable(index: ir.Expr, ctx: _Ctx):
    """A function building the before-the-loop check, or None if it must stay."""
    loop = ctx.loop
    if loop is None or ctx.conditional:
        return None
    var = loop.var
    for node in walk_expr(index):
        if isinstance(node, (ir.Load, ir.Reduce)):
            return None
        if isinstance(node, ir.Var) and node.sym in ctx.variant and node.sym is not var:
            return None
    if not _affine(index, var):
        return None
    if not _depends(index, var):
        return lambda tensor, axis: _in_range(index, ir.Shape(tensor, axis))
    first = _subst(index, var, loop.start)
    last = _subst(index, var, _last_value(loop))

    def build(tensor, axis):
        low, high = minimum(first, last), maximum(first, last)
        return both(compare(">=", low, i64(0)), compare("<", high, ir.Shape(tensor, axis)))

    return build


def _depends(e: ir.Expr, var: ir.Sym) -> bool:
    return any(isinstance(n, ir.Var) and n.sym is var for n in walk_expr(e))


def _affine(e: ir.Expr, var: ir.Sym) -> bool:
    if not _depends(e, var):
        return True
    match e:
        case ir.Var(sym):
            return sym is var
        case ir.Binary("+" | "-", lhs, rhs):
            return _affine(lhs, var) and _affine(rhs, var)
        case ir.Binary("*", lhs, rhs):
            if not _depends(lhs, var):
                return _affine(rhs, var)
            return not _depends(rhs, var) and _affine(lhs, var)
        case ir.Unary("neg", operand):
            return _affine(operand, var)
    return False


def _subst(e: ir.Expr, var: ir.Sym, value: ir.Expr) -> ir.Expr:
    return map_expr(e, lambda n: value if isinstance(n, ir.Var) and n.sym is var else n)


def _last_value(loop: ir.For) -> ir.Expr:
    """start + ((stop - start - 1) // step) * step, the last value taken (step > 0);
    mirrored for step < 0."""
    start, stop, step = loop.start, loop.stop, loop.step
    if step > 0:
        distance = sub(sub(stop, start), i64(1))
    else:
        distance = sub(sub(start, stop), i64(1))
    return add(start, mul(floordiv(distance, i64(abs(step))), i64(step)))
