"""Free indices of an assignment in index notation.

    C[m, n] = sum(A[m, k] * B[k, n])

A name used inside a subscript that nothing binds is a *free index*. On the left
it ranges over the output (one loop per name); on the right, a name not on the
left must sit inside a reduction (`sum`, or `max`/`min` with one argument), and
belongs to the outermost reduction around its first use. Each free index ranges
over the dimension it indexes where it stands alone as an index; every such
dimension must agree.

`scan` finds the indices and where they are used; it runs on the AST before type
checking so the checker can bind them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from dsl.grammar import ast
from dsl.grammar.diagnostics import Span

REDUCTIONS = {"sum", "max", "min"}
STATEMENT = 0  # owner id of the indices on the left-hand side


def is_reduction(node: ast.Call) -> bool:
    name = node.func.rsplit(".", 1)[-1]
    return name == "sum" or (name in ("max", "min") and len(node.args) == 1)


@dataclass
class Use:
    tensor: str
    axis: int
    span: Span


@dataclass
class IndexPlan:
    """Which free indices a statement has and who owns each one."""

    lhs: list[str] = field(default_factory=list)
    # owner id (STATEMENT or id() of a reduction Call) -> index names, in order
    owned: dict[int, list[str]] = field(default_factory=dict)
    # (owner, name) -> the places it stands alone as an index
    uses: dict[tuple[int, str], list[Use]] = field(default_factory=dict)
    first_span: dict[tuple[int, str], Span] = field(default_factory=dict)
    stray: list[tuple[str, Span]] = field(default_factory=list)  # free on the right only

    @property
    def empty(self) -> bool:
        return not any(self.owned.values()) and not self.stray


def scan(target: ast.Expr | None, value: ast.Expr, is_bound: Callable[[str], bool]) -> IndexPlan:
    plan = IndexPlan()
    if isinstance(target, ast.Subscript):
        for axis, index in enumerate(target.indices):
            if isinstance(index, ast.Name) and not is_bound(index.id) and index.id not in plan.lhs:
                plan.lhs.append(index.id)
        plan.owned[STATEMENT] = list(plan.lhs)
        _visit(target, [], plan, is_bound, in_index=False)
    _visit(value, [], plan, is_bound, in_index=False)
    return plan


def _owner(name: str, stack: list[int], plan: IndexPlan) -> int | None:
    if name in plan.lhs:
        return STATEMENT
    for owner in stack:
        if name in plan.owned.get(owner, []):
            return owner
    if stack:
        plan.owned.setdefault(stack[0], []).append(name)
        return stack[0]
    return None


def _visit(node, stack: list[int], plan: IndexPlan, is_bound, in_index: bool) -> None:
    """Walk an expression; iterative enough for realistic nesting depths."""
    match node:
        case ast.Subscript(value=tensor, indices=indices):
            for axis, index in enumerate(indices):
                if isinstance(index, ast.Name) and not is_bound(index.id):
                    owner = _owner(index.id, stack, plan)
                    if owner is None:
                        plan.stray.append((index.id, index.span))
                        continue
                    key = (owner, index.id)
                    plan.uses.setdefault(key, []).append(Use(tensor.id, axis, index.span))
                    plan.first_span.setdefault(key, index.span)
                else:
                    _visit(index, stack, plan, is_bound, in_index=True)
        case ast.Name(id=name, span=span) if in_index and not is_bound(name):
            owner = _owner(name, stack, plan)
            if owner is None:
                plan.stray.append((name, span))
            else:
                plan.first_span.setdefault((owner, name), span)
        case ast.Call(args=args) if is_reduction(node):
            plan.owned.setdefault(id(node), [])
            for arg in args:
                _visit(arg, stack + [id(node)], plan, is_bound, in_index)
        case ast.Call(args=args, keywords=keywords):
            for arg in (*args, *(k.value for k in keywords)):
                _visit(arg, stack, plan, is_bound, in_index)
        case ast.BinOp(left=a, right=b) | ast.Compare(left=a, right=b) | ast.BoolOp(left=a, right=b):
            _visit(a, stack, plan, is_bound, in_index)
            _visit(b, stack, plan, is_bound, in_index)
        case ast.UnaryOp(operand=a):
            _visit(a, stack, plan, is_bound, in_index)
        case ast.IfExp(cond=c, body=a, orelse=b):
            for part in (c, a, b):
                _visit(part, stack, plan, is_bound, in_index)
