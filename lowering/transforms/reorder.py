"""`reorder(a, b, ...)`: permute perfectly nested loops; the names are given
outermost first.

    for i in range(M):             for j in range(N):
        for j in range(N):   -->       for i in range(M):
            body                           body

The loops must be perfectly nested (nothing else between them), their bounds
must not depend on each other, and no iteration may depend on another (see
dependence.py). Loops that a written tensor's index does not depend on are a
reduction into it; changing their relative order changes the rounding of float
sums, so that needs `@options(reassociate=True)`.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import walk_expr
from .dependence import depends_on, require_private_locals, written_indices
from .nest import ScheduleError, find_loop, replace_loop

name = "reorder"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    wanted = [ref.name for ref in d.loops]
    if len(set(wanted)) != len(wanted):
        raise ScheduleError(d.span, "reorder() names a loop twice")
    loops = [find_loop(kernel.body, ref.name, ref.span) for ref in d.loops]
    chain = _perfect_chain(loops, d.span)
    innermost = chain[-1].body
    what = f"reorder {', '.join(wanted)}"
    by_name = {loop.name: loop for loop in chain}
    order = [by_name[n] for n in wanted]
    _check_bounds(order, d.span)
    require_private_locals(innermost, what, d.span)
    written = written_indices(innermost, what, d.span)
    if not kernel.options.reassociate:
        _check_reductions(chain, order, written, d.span)
    nest: tuple[ir.Stmt, ...] = innermost
    for loop in reversed(order):
        nest = (replace(loop, body=nest),)
    return replace(kernel, body=replace_loop(kernel.body, chain[0], list(nest)))


def _perfect_chain(loops: list[ir.For], span) -> list[ir.For]:
    """The named loops as one perfect nest, outermost first."""
    names = {loop.name for loop in loops}
    outer = [loop for loop in loops if not any(_contains(other, loop) for other in loops if other is not loop)]
    if len(outer) != 1:
        raise ScheduleError(span, "reorder() needs loops nested inside one another")
    chain = [outer[0]]
    while len(chain) < len(loops):
        body = chain[-1].body
        if len(body) != 1 or not isinstance(body[0], ir.For) or body[0].name not in names:
            raise ScheduleError(span, f"reorder() needs perfectly nested loops: '{chain[-1].name}' contains "
                                "other statements or loops between the named ones")
        chain.append(body[0])
    return chain


def _contains(outer: ir.For, inner: ir.For) -> bool:
    stack = list(outer.body)
    while stack:
        s = stack.pop()
        if s is inner:
            return True
        if isinstance(s, ir.For):
            stack.extend(s.body)
        elif isinstance(s, ir.If):
            stack.extend(s.then + s.orelse)
    return False


def _check_bounds(order: list[ir.For], span) -> None:
    """A loop's bounds may use only loops that stay outside it."""
    for k, loop in enumerate(order):
        inside = {inner.var: inner for inner in order[k + 1:]}
        for bound in (loop.start, loop.stop):
            for node in walk_expr(bound):
                if isinstance(node, ir.Var) and node.sym in inside:
                    raise ScheduleError(span, f"cannot reorder: the bounds of '{loop.name}' depend on "
                                        f"'{inside[node.sym].name}', which would be inside it")


def _check_reductions(chain, order, written, span) -> None:
    for tensor, indices in written.items():
        reducing = [loop for loop in chain if not any(depends_on(i, loop.var) for i in indices)]
        before = [loop.name for loop in chain if loop in reducing]
        after = [loop.name for loop in order if loop in reducing]
        if before != after:
            raise ScheduleError(span, f"reordering changes the order in which loops {', '.join(before)} "
                                f"add into '{tensor.name}' (float rounding may change)",
                                "allow it with @options(reassociate=True)")
