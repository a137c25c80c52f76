"""Where `return` may stand: calls are inlined, so a function returns only at its
end — as its last statement, or as the last statement of every branch of a final
if/elif/else."""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import DiagnosticBag


def check_return_placement(bag: DiagnosticBag, fn: ast.FunctionDef, needs_value: bool) -> None:
    _misplaced(bag, fn.body, at_end=True)
    if needs_value and not _ends_in_return(fn.body):
        bag.error(fn.name_span, f"function '{fn.name}' must end with 'return <value>' on every path")


def _misplaced(bag: DiagnosticBag, body, at_end: bool) -> None:
    for k, stmt in enumerate(body):
        last = at_end and k == len(body) - 1
        match stmt:
            case ast.Return(span=span) if not last:
                bag.error(span, "'return' must be the last statement of the function "
                                "(early returns are not supported)")
            case ast.If(body=then, orelse=orelse):
                _misplaced(bag, then, last)
                _misplaced(bag, orelse, last)
            case ast.For(body=inner):
                _misplaced(bag, inner, False)


def _ends_in_return(body) -> bool:
    if not body:
        return False
    last = body[-1]
    match last:
        case ast.Return(value=value):
            return value is not None
        case ast.If(body=then, orelse=orelse):
            return _ends_in_return(then) and _ends_in_return(orelse)
    return False
