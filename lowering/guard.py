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
from .bounds_proof import LoopRange, provably_in_bounds
from .rewrite import assigned_syms, map_expr, stmt_exprs, walk_expr
from .types import BOOL, I64

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


def _accesses(s: ir.Stmt):
    """(tensor, indices, span) of each load the statement evaluates, and its store."""
    for e in stmt_exprs(s):
        for node in walk_expr(e):
            if isinstance(node, ir.Load):
                yield node.tensor, node.indices, node.span or s.span
    if isinstance(s, ir.Store):
        yield s.tensor, s.indices, s.span


def _info(checks: list, tensor: ir.TensorParam, axis: int, span) -> int:
    where = f" at line {span.line}" if span is not None else ""
    checks.append(ir.CheckInfo("bounds", f"index out of bounds on '{tensor.name}' axis {axis}{where}",
                               span, (tensor.name,)))
    return len(checks) - 1


def _in_range(index: ir.Expr, size: ir.Expr) -> ir.Expr:
    zero = ir.Const(0, I64)
    low = ir.Binary(">=", index, zero, BOOL)
    high = ir.Binary("<", index, size, BOOL)
    return ir.Binary("and", low, high, BOOL)


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
        low = ir.Binary("min", first, last, I64)
        high = ir.Binary("max", first, last, I64)
        zero = ir.Const(0, I64)
        return ir.Binary("and", ir.Binary(">=", low, zero, BOOL),
                         ir.Binary("<", high, ir.Shape(tensor, axis), BOOL), BOOL)

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
    one = ir.Const(1, I64)
    if step > 0:
        span = ir.Binary("-", ir.Binary("-", stop, start, I64), one, I64)
    else:
        span = ir.Binary("-", ir.Binary("-", start, stop, I64), one, I64)
    magnitude = ir.Const(abs(step), I64)
    trips = ir.Binary("//", span, magnitude, I64)
    return ir.Binary("+", start, ir.Binary("*", trips, ir.Const(step, I64), I64), I64)
