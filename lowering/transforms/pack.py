"""Packing: copy a block of an operand into scratch in the micro-kernel's order.

B's block (kc rows of K by nc columns of N) becomes strips of `nr` columns,
each stored row after row: the micro-kernel then reads `nr` consecutive
elements per k step. A's block (mc rows by kc) becomes strips of `mr` rows,
stored column after column. Strips that overhang the operand's edge are padded
with zeros, so the micro-kernel always runs on whole strips. The operands'
own layout does not matter here: the copy reads them through their index
expressions and strides (a transposed view packs as well as a contiguous one).
"""

from __future__ import annotations

from .. import ir
from ..arith import add, compare, i64, minimum, mul, sub
from ..machine import MicroTile
from ..types import I64
from .contract_match import Contraction
from .nest import substitute, substitute_expr


def pack_b(c: Contraction, t: MicroTile, at: dict) -> list[ir.Stmt]:
    """Bp[js*kc + p*nr + j] = B[k = pc + p, n = jc + js + j], strip js by strip."""
    span, dtype = c.nest.span, c.dtype
    js = ir.Sym("js", I64, "loop")
    width = ir.Sym("width", I64, "local")
    p, j = ir.Sym("p", I64, "loop"), ir.Sym("j", I64, "loop")
    row = add(mul(ir.Var(js), at["kc"]), mul(ir.Var(p), i64(t.nr)))
    k_at = add(at["pc"], ir.Var(p))

    def b_at(n: ir.Expr) -> ir.Load:
        n_at = add(add(at["jc"], ir.Var(js)), n)
        indices = tuple(substitute_expr(x, {c.k.var: k_at, c.n.var: n_at}) for x in c.b.indices)
        return ir.Load(c.b.tensor, indices, dtype, c.b.span, safe=True)

    whole = [ir.Store(at["Bp"], (ir.Ramp(add(row, i64(v * t.lanes)), 1, t.lanes),),
                      b_at(ir.Ramp(i64(v * t.lanes), 1, t.lanes)), span, safe=True)
             for v in range(t.vectors)]
    copy = ir.Store(at["Bp"], (add(row, ir.Var(j)),), b_at(ir.Var(j)), span, safe=True)
    pad = ir.Store(at["Bp"], (add(row, ir.Var(j)),), ir.Const(0.0, dtype), span, safe=True)
    edge = [ir.For(j, i64(0), ir.Var(width), 1, (copy,), "pack.B.n", span=span),
            _fresh_var(ir.For(j, ir.Var(width), i64(t.nr), 1, (pad,), "pack.B.pad", span=span))]
    strip = [
        ir.Assign(width, minimum(i64(t.nr), sub(at["nc"], ir.Var(js))), span),
        ir.If(compare("==", ir.Var(width), i64(t.nr)),
              (ir.For(p, i64(0), at["kc"], 1, tuple(whole), "pack.B.k", span=span),),
              (_fresh_var(ir.For(p, i64(0), at["kc"], 1, tuple(edge), "pack.B.k", span=span)),), span),
    ]
    return [ir.For(js, i64(0), at["nc"], t.nr, tuple(strip), "pack.B", span=span)]


def pack_a(c: Contraction, t: MicroTile, at: dict) -> list[ir.Stmt]:
    """Ap[(ic + is)*kc + p*mr + i] = A[m = ic + is + i, k = pc + p], strip is by strip."""
    span, dtype = c.nest.span, c.dtype
    strip_var = ir.Sym("is", I64, "loop")
    height = ir.Sym("height", I64, "local")
    p, i = ir.Sym("p", I64, "loop"), ir.Sym("i", I64, "loop")
    m0 = add(at["ic"], ir.Var(strip_var))
    col = add(mul(m0, at["kc"]), mul(ir.Var(p), i64(t.mr)))
    a_indices = tuple(substitute_expr(x, {c.m.var: add(m0, ir.Var(i)), c.k.var: add(at["pc"], ir.Var(p))})
                      for x in c.a.indices)
    copy = ir.Store(at["Ap"], (add(col, ir.Var(i)),), ir.Load(c.a.tensor, a_indices, dtype, c.a.span, safe=True),
                    span, safe=True)
    pad = ir.Store(at["Ap"], (add(col, ir.Var(i)),), ir.Const(0.0, dtype), span, safe=True)
    whole = ir.For(p, i64(0), at["kc"], 1, (ir.For(i, i64(0), i64(t.mr), 1, (copy,), "pack.A.m", span=span),),
                   "pack.A.k", span=span)
    edge = _fresh_var(ir.For(p, i64(0), at["kc"], 1, (
        _fresh_var(ir.For(i, i64(0), ir.Var(height), 1, (copy,), "pack.A.m", span=span)),
        _fresh_var(ir.For(i, ir.Var(height), i64(t.mr), 1, (pad,), "pack.A.pad", span=span))),
        "pack.A.k", span=span))
    strip = [
        ir.Assign(height, minimum(i64(t.mr), sub(at["mcur"], ir.Var(strip_var))), span),
        ir.If(compare("==", ir.Var(height), i64(t.mr)), (whole,), (edge,), span),
    ]
    return [ir.For(strip_var, i64(0), at["mcur"], t.mr, tuple(strip), "pack.A", span=span)]


def _fresh_var(loop: ir.For) -> ir.For:
    """`loop` with a new variable (its uses in the body renamed): loop variables
    are unique, so a second loop built from the same pieces needs its own."""
    new = ir.Sym(loop.var.name, I64, "loop")
    body = substitute(loop.body, {loop.var: ir.Var(new)})
    stop = substitute_expr(loop.stop, {loop.var: ir.Var(new)})
    return ir.For(new, loop.start, stop, loop.step, body, loop.name, loop.kind, loop.span)
