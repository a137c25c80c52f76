"""A kernel's entry: bind each dim from the first axis that names it, check that
every other axis agrees, and check that outputs do not overlap other tensors."""

from __future__ import annotations

from . import ir
from .quant import derived_dims, view
from .types import BOOL, I64


def entry_prologue(kernel: ir.Kernel) -> tuple[list[ir.Stmt], list[ir.CheckInfo]]:
    stmts: list[ir.Stmt] = []
    checks: list[ir.CheckInfo] = list(kernel.checks)
    first: dict[ir.Sym, tuple[ir.TensorParam, int]] = {}
    for tensor in kernel.tensors:
        for axis, dim in enumerate(tensor.dims):
            shape = ir.Shape(tensor, axis, tensor.span)
            if isinstance(dim, int):
                msg = f"'{tensor.name}' axis {axis} must have size {dim}"
                expected: ir.Expr = ir.Const(dim, I64)
            elif dim not in first:
                first[dim] = (tensor, axis)
                stmts.append(ir.Assign(dim, shape, tensor.span))
                continue
            else:
                owner, owner_axis = first[dim]
                msg = f"'{tensor.name}' axis {axis} must equal {dim.name} ('{owner.name}' axis {owner_axis})"
                expected = ir.Var(dim)
            checks.append(ir.CheckInfo("shape", msg, tensor.span, (tensor.name,)))
            cond = ir.Binary("==", shape, expected, BOOL, tensor.span)
            stmts.append(ir.Check(cond, len(checks) - 1, tensor.span))
    stmts += _quant_entry(kernel, checks)
    if not kernel.options.inplace:
        stmts += _overlap_checks(kernel, checks)
    return stmts, checks


def _quant_entry(kernel: ir.Kernel, checks: list[ir.CheckInfo]) -> list[ir.Stmt]:
    """Quantized tensors: rows of whole blocks; then their derived dims (K / 256, ...), which their field views use."""
    stmts: list[ir.Stmt] = []
    for tensor in kernel.tensors:
        if tensor.quant is None:
            continue
        fmt, last = tensor.quant.fmt, tensor.rank - 1
        size = ir.Shape(tensor, last, tensor.span)
        dim = tensor.dims[last]
        what = dim if isinstance(dim, int) else dim.name
        checks.append(ir.CheckInfo("shape", f"'{tensor.name}': {what} (axis {last}) is not a multiple of "
                                   f"{fmt.block} ({fmt.name} block)", tensor.span, (tensor.name,)))
        whole = ir.Binary("==", ir.Binary("%", size, ir.Const(fmt.block, I64), I64), ir.Const(0, I64), BOOL)
        stmts.append(ir.Check(whole, len(checks) - 1, tensor.span))
    for sym, dim, divisor in derived_dims(kernel):
        stmts.append(ir.Assign(sym, ir.Binary("//", ir.Var(dim), ir.Const(divisor, I64), I64), kernel.span))
    return stmts


def _overlap_checks(kernel: ir.Kernel, checks: list[ir.CheckInfo]) -> list[ir.Stmt]:
    stmts = []
    tensors = kernel.tensors
    for i, out in enumerate(tensors):
        if not out.is_output:
            continue
        for j, other in enumerate(tensors):
            if other is out or (other.is_output and j < i):
                continue
            msg = (f"output '{out.name}' shares memory with '{other.name}'; outputs must not overlap "
                   "other arguments (unless the kernel is declared safe in place: inplace=True)")
            checks.append(ir.CheckInfo("overlap", msg, out.span, (out.name, other.name)))
            overlaps = ir.Overlaps(out, view(other, "blocks") if other.quant else other, out.span)
            cond = ir.Unary("not", overlaps, BOOL, out.span)
            stmts.append(ir.Check(cond, len(checks) - 1, out.span))
    return stmts
