"""`fuse(i, j)`: two adjacent loops over the same range become one.

    for i in range(N):             for i in range(N):
        a(i)              -->          a(i)
    for j in range(N):                 b(i)
        b(j)

Legal when every tensor either loop writes has an axis indexed by the loop alone
in every access (iteration i of the second loop then only sees iteration i of
the first), and the loops share no locals.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import walk_expr, walk_stmts, stmt_exprs
from .dependence import expr_key, separated_by
from .nest import ScheduleError, find_loop, replace_loop, substitute

name = "fuse"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    first = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    second = find_loop(kernel.body, d.loops[1].name, d.loops[1].span)
    if not _adjacent(kernel.body, first, second):
        raise ScheduleError(d.span, f"fuse() needs '{first.name}' directly followed by '{second.name}'")
    same = [expr_key(first.start), expr_key(first.stop), first.step] == \
        [expr_key(second.start), expr_key(second.stop), second.step]
    if not same:
        raise ScheduleError(d.span, f"cannot fuse '{first.name}' and '{second.name}': their ranges differ")
    body = first.body + substitute(second.body, {second.var: ir.Var(first.var)})
    what = f"fuse '{first.name}' and '{second.name}'"
    separated_by(body, first.var, what, d.span)
    if _locals(first.body) & _locals(second.body):
        raise ScheduleError(d.span, f"cannot {what}: the loops share local variables")
    fused = replace(first, body=body)
    out = replace_loop(kernel.body, second, [])
    return replace(kernel, body=replace_loop(out, first, [fused]))


def _adjacent(body, first: ir.For, second: ir.For) -> bool:
    """Is `second` the statement right after `first`, in some block?"""
    if _follows(body, first, second):
        return True
    for s in body:
        blocks = [s.body] if isinstance(s, ir.For) else [s.then, s.orelse] if isinstance(s, ir.If) else []
        if any(_adjacent(block, first, second) for block in blocks):
            return True
    return False


def _follows(block, first, second) -> bool:
    return any(a is first and b is second for a, b in zip(block, block[1:]))


def _locals(body) -> set:
    out = set()
    for s in walk_stmts(body):
        if isinstance(s, ir.Assign):
            out.add(s.sym)
        for e in stmt_exprs(s):
            out |= {n.sym for n in walk_expr(e) if isinstance(n, ir.Var) and n.sym.role == "local"}
    return out
