"""Calls of target intrinsics: `x86.maddubs(...)` (the instruction, or an error
on a target without it) and the portable `maddubs(...)` (the instruction where
the target has it, plain integer arithmetic elsewhere). See lowering/target_ops.py."""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import did_you_mean

from .. import ir
from ..target_ops import PORTABLE, SPECS, TargetOpSpec, available, lowered
from .coerce import TExpr, retype
from .exprs import ExprChecker

NAMESPACES = ("x86.", "arm.")


def is_target_call(ck: ExprChecker, func: str) -> bool:
    """Whether `func` names a target intrinsic (a user function of the same bare name wins)."""
    return func.startswith(NAMESPACES) or (func in PORTABLE and func not in ck.ctx.functions)


def check_target_call(ck: ExprChecker, node: ast.Call) -> TExpr | None:
    strict = node.func.startswith(NAMESPACES)
    spec = SPECS.get(node.func) if strict else PORTABLE[node.func]
    if spec is None:
        ck.bag.error(node.func_span, f"unknown target intrinsic '{node.func}'", *did_you_mean(node.func, SPECS))
        return None
    if node.keywords:
        ck.bag.error(node.keywords[0].span, f"{node.func}() takes no keyword arguments")
        return None
    machine = ck.ctx.machine
    if strict and machine is not None and not available(spec, machine):
        ck.bag.error(node.func_span, f"{spec.name} needs {spec.feature_label}; target is {_describe(machine)}",
                     f"write {spec.portable}(...) for the portable form: the instruction where the "
                     "target has it, plain integer arithmetic elsewhere")
        return None
    args = _arguments(ck, node, spec)
    if args is None:
        return None
    return TExpr(lowered(ir.TargetOp(spec.name, args, spec.result, node.span), machine))


def _arguments(ck: ExprChecker, node: ast.Call, spec: TargetOpSpec) -> tuple[ir.Expr, ...] | None:
    """The arguments, each of exactly its parameter's type (literals take it)."""
    if len(node.args) != len(spec.params):
        ck.bag.error(node.span, f"{node.func}() takes exactly {len(spec.params)} arguments "
                     f"({len(node.args)} given)")
        return None
    out = []
    for k, (arg, want) in enumerate(zip(node.args, spec.params)):
        te = ck.expr(arg)
        if te is None:
            out.append(None)
            continue
        if te.weak:
            out.append(retype(te, want, ck.bag, arg.span))
            continue
        if te.type != want:
            ck.bag.error(arg.span, f"argument {k + 1} of {node.func}() must be {want}, not {te.type}",
                         f"convert it, e.g. {want}(...)")
            out.append(None)
            continue
        out.append(te.expr)
    return None if any(a is None for a in out) else tuple(out)


def _describe(machine) -> str:
    features = ", ".join(sorted(machine.isa)) or "none of the needed extensions"
    return f"{machine.arch or 'unknown'} ({features})"
