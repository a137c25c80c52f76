"""If-conversion: a branch that only picks a value becomes a `select`.

Lowering turns `a if c else b`, `p and q` and `p or q` into `if` statements
whenever a side reads memory, so that an index that is only valid under the
condition is never read without it. Once `guard.mark_proven` has shown every
load of both sides in bounds on every iteration (its proofs use loop ranges,
never conditions), reading them unconditionally is harmless, and

    if c:                                   t = (a if c else b)
        t = a               -->
    else:
        t = b

(`else` missing: `t = (a if c else t)`) lets the vectorizer handle the loop and
the back-end emit a branch-free `select`. Only cheap sides are converted:
speculating an `exp` costs more than the branch saves.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import map_stmts, walk_expr

name = "if_convert"
EXPENSIVE = frozenset({"exp", "log", "tanh", "erf"})
MAX_NODES = 24


def run(kernel: ir.Kernel) -> ir.Kernel:
    return replace(kernel, body=map_stmts(kernel.body, stmt_fn=_convert))


def _convert(s: ir.Stmt):
    match s:
        case ir.If(cond, (ir.Assign(sym, a),), (ir.Assign(sym2, b),)) if sym is sym2:
            pass
        case ir.If(cond, (ir.Assign(sym, a),), ()):
            b = ir.Var(sym)
        case _:
            return None
    if sym.lanes != 1 or not all(_cheap_and_safe(x) for x in (cond, a, b)):
        return None
    return ir.Assign(sym, ir.Select(cond, a, b, sym.type, s.span), s.span)


def _cheap_and_safe(e: ir.Expr) -> bool:
    nodes = list(walk_expr(e))
    if len(nodes) > MAX_NODES:
        return False
    for n in nodes:
        if isinstance(n, ir.Load) and not n.safe:
            return False
        if isinstance(n, ir.Unary) and n.op in EXPENSIVE:
            return False
        if isinstance(n, ir.Reduce):
            return False
    return True
