"""Exact-size specialization: some dims become compile-time constants.

    specialize(kernel, {"M": 64, "N": 64, "K": 64})

The entry statement that binds a dim (`M = shape(A, 0)`) becomes a check that
the call really has that size (`check shape(A, 0) == 64`), and every use of the
dim becomes the constant, with integer arithmetic folded again, so trip counts
are constants and LLVM can unroll and drop tails. The kernel still takes
sizes in its C ABI; a call with other sizes fails the check cleanly.

Contract: runs on the loop IR before scheduling; keeps it valid; a dim not in
`sizes` is untouched; names that are not dims of the kernel are ignored.
"""

from __future__ import annotations

from dataclasses import replace

from . import ir
from .arith import fold
from .rewrite import map_stmts
from .types import BOOL, I64

name = "specialize"


def specialize(kernel: ir.Kernel, sizes: dict[str, int]) -> ir.Kernel:
    bound = {d: sizes[d.name] for d in kernel.dims if d.name in sizes}
    if not bound:
        return kernel
    checks = list(kernel.checks)

    def check_binding(s: ir.Stmt):
        if isinstance(s, ir.Assign) and s.sym in bound and isinstance(s.value, ir.Shape):
            value = bound[s.sym]
            shape = s.value
            checks.append(ir.CheckInfo(
                "shape", f"'{shape.tensor.name}' axis {shape.axis} must have size {value} "
                f"(this build is specialized for {s.sym.name} = {value})", s.span, (shape.tensor.name,)))
            cond = ir.Binary("==", shape, ir.Const(value, I64), BOOL, s.span)
            return ir.Check(cond, len(checks) - 1, s.span)
        return None

    def constant(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in bound:
            return ir.Const(bound[e.sym], e.sym.type, e.span)
        return fold(e)

    body = map_stmts(kernel.body, stmt_fn=check_binding)
    body = map_stmts(body, expr_fn=constant)
    return replace(kernel, body=body, checks=tuple(checks))

