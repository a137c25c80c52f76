"""Free indices of an assignment in index notation.

    C[m, n] = sum(A[m, k] * B[k, n])

A name used inside a subscript that nothing binds is a *free index*. On the left
it ranges over the output (one loop per name). On the right, a name not on the
left belongs to a reduction (`sum`, or `max`/`min` with one argument): the
outermost one in which it is used *directly* (outside any reduction nested in
it). A name used only inside nested reductions belongs to each of them
separately, so

    y[i] = sum(A[i, k] * sum(B[k, j]))      # sum over k of A[i, k] * (sum over j of B[k, j])
    y[i] = sum(A[i, k]) + sum(B[i, k])      # two independent sums over k

A name used directly outside every reduction, and not on the left, is an error.
Each free index ranges over the dimension it indexes where it stands alone as an
index; every such dimension must agree.

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


@dataclass
class _Scope:
    """The statement, or one reduction: the free names used directly in it."""

    key: int
    direct: list[tuple[str, Use | None, Span]] = field(default_factory=list)
    inner: list["_Scope"] = field(default_factory=list)


def scan(target: ast.Expr | None, value: ast.Expr, is_bound: Callable[[str], bool]) -> IndexPlan:
    plan = IndexPlan()
    root = _Scope(STATEMENT)
    if isinstance(target, ast.Subscript):
        for index in target.indices:
            if isinstance(index, ast.Name) and not is_bound(index.id) and index.id not in plan.lhs:
                plan.lhs.append(index.id)
        _collect(target, root, is_bound, in_index=False)
    _collect(value, root, is_bound, in_index=False)
    plan.owned[STATEMENT] = list(plan.lhs)
    _assign(root, {name: STATEMENT for name in plan.lhs}, plan)
    return plan


def _assign(scope: _Scope, visible: dict[str, int], plan: IndexPlan) -> None:
    """Give each name used directly in `scope` an owner, then recurse inward."""
    owned = plan.owned.setdefault(scope.key, [])
    for name, _, _ in scope.direct:
        if name not in visible and scope.key != STATEMENT and name not in owned:
            owned.append(name)
    inner_visible = {**visible, **{name: scope.key for name in owned}}
    for name, use, span in scope.direct:
        owner = inner_visible.get(name)
        if owner is None:
            plan.stray.append((name, span))
            continue
        plan.first_span.setdefault((owner, name), span)
        if use is not None:
            plan.uses.setdefault((owner, name), []).append(use)
    for child in scope.inner:
        _assign(child, inner_visible, plan)


def _collect(node, scope: _Scope, is_bound, in_index: bool) -> None:
    """Record the free names used in `node`, by the reduction they sit in."""
    match node:
        case ast.Subscript(value=tensor, indices=indices):
            for axis, index in enumerate(indices):
                if isinstance(index, ast.Name) and not is_bound(index.id):
                    scope.direct.append((index.id, Use(tensor.id, axis, index.span), index.span))
                else:
                    _collect(index, scope, is_bound, in_index=True)
        case ast.Name(id=name, span=span) if in_index and not is_bound(name):
            scope.direct.append((name, None, span))
        case ast.Call(args=args) if is_reduction(node):
            child = _Scope(id(node))
            scope.inner.append(child)
            for arg in args:
                _collect(arg, child, is_bound, in_index)
        case ast.Call(args=args, keywords=keywords):
            for arg in (*args, *(k.value for k in keywords)):
                _collect(arg, scope, is_bound, in_index)
        case ast.BinOp(left=a, right=b) | ast.Compare(left=a, right=b) | ast.BoolOp(left=a, right=b):
            _collect(a, scope, is_bound, in_index)
            _collect(b, scope, is_bound, in_index)
        case ast.UnaryOp(operand=a):
            _collect(a, scope, is_bound, in_index)
        case ast.IfExp(cond=c, body=a, orelse=b):
            for part in (c, a, b):
                _collect(part, scope, is_bound, in_index)
