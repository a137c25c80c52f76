"""Conservative legality tests for the schedule transforms.

A transform that changes the order of iterations (reorder, parallel, fuse) is
allowed only when no iteration can see another's effect:

- every tensor written in the loops is accessed (read and written) at one and
  the same index everywhere in them, so two iterations share an element only if
  they agree on every loop that index depends on;
- every local assigned in the loops is assigned before it is read in each
  iteration (it carries nothing from one iteration to the next).

Anything else is refused with the reason; the tests err on the side of "no".
"""

from __future__ import annotations

from .. import ir
from ..bounds_proof import LoopRange, _extreme, linear, summands
from ..rewrite import assigned_syms, stmt_exprs, walk_expr, walk_stmts
from .nest import ScheduleError


def expr_key(e: ir.Expr):
    """A hashable structural key for an expression, ignoring spans."""
    match e:
        case ir.Const(value, t):
            return ("c", value, t)
        case ir.Var(sym):
            return ("v", sym)
        case ir.Shape(tensor, axis):
            return ("shape", tensor, axis)
        case ir.Load(tensor, indices):
            return ("load", tensor, tuple(expr_key(i) for i in indices))
    fields = [getattr(e, f) for f in e.__dataclass_fields__ if f != "span"]
    return (type(e).__name__, *[expr_key(f) if _is_expr(f) else f for f in fields])


def _is_expr(value) -> bool:
    return hasattr(value, "__dataclass_fields__") and not isinstance(value, (ir.Sym, ir.TensorParam))


def accesses(body):
    """(tensor, index key, indices, is_store) for every load and store in `body`."""
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            for node in walk_expr(e):
                if isinstance(node, ir.Load):
                    yield node.tensor, tuple(expr_key(i) for i in node.indices), node.indices, False
        if isinstance(s, ir.Store):
            yield s.tensor, tuple(expr_key(i) for i in s.indices), s.indices, True


def written_indices(body, what: str, span) -> dict[ir.TensorParam, tuple[ir.Expr, ...]]:
    """For each tensor stored to in `body`, its one index; raises if accesses differ.
    Buffers declared in `body` are new in each iteration, so they are left out."""
    found = list(accesses(body))
    written = {t for t, _, _, store in found if store} - private_buffers(body)
    out: dict[ir.TensorParam, tuple] = {}
    keys: dict[ir.TensorParam, tuple] = {}
    for tensor, key, indices, _ in found:
        if tensor not in written:
            continue
        if tensor in keys and keys[tensor] != key:
            raise ScheduleError(span, f"cannot {what}: '{tensor.name}' is written and accessed at different "
                                "indices in these loops, so iterations may depend on each other")
        keys[tensor] = key
        out[tensor] = indices
    return out


def private_buffers(body) -> set[ir.TensorParam]:
    """Scratch buffers and local arrays allocated in `body`: one per iteration of a loop around it."""
    return {s.buffer for s in walk_stmts(body) if isinstance(s, (ir.Alloc, ir.LocalArray))}


def carried_local(body) -> ir.Sym | None:
    """A local read before it is assigned in one iteration of `body`, if any."""
    assigned_anywhere = {s.sym for s in walk_stmts(body) if isinstance(s, ir.Assign)}
    return _first_carried(body, set(), assigned_anywhere)


def is_carried(body, sym: ir.Sym) -> bool:
    """Is `sym` read before it is assigned in some iteration of `body`?"""
    return _first_carried(body, set(), {sym}) is not None


def _first_carried(body, assigned: set, candidates: set):
    assigned = set(assigned)
    for s in body:
        for e in stmt_exprs(s):
            for node in walk_expr(e):
                if isinstance(node, ir.Var) and node.sym in candidates and node.sym not in assigned:
                    return node.sym
        match s:
            case ir.Assign(sym):
                assigned.add(sym)
            case ir.For(body=inner):
                found = _first_carried(inner, assigned, candidates)
                if found is not None:
                    return found
            case ir.If(then=then, orelse=orelse):
                for branch in (then, orelse):
                    found = _first_carried(branch, assigned, candidates)
                    if found is not None:
                        return found
                then_set = _assigned_in(then) | assigned
                assigned |= then_set & (_assigned_in(orelse) | assigned)
    return None


def _assigned_in(body) -> set:
    return {s.sym for s in body if isinstance(s, ir.Assign)}


def require_private_locals(body, what: str, span) -> None:
    sym = carried_local(body)
    if sym is not None:
        raise ScheduleError(span, f"cannot {what}: local '{sym.name}' carries a value from one iteration "
                            "to the next")


def separated_by(body, var: ir.Sym, what: str, span) -> None:
    """Raise unless different iterations of `var` touch different elements.

    For each tensor written in `body`, some axis must be indexed in every access
    as `c * var + base + r`, with one nonzero `c` and one loop-invariant `base`
    for all accesses, and `r` (the part that varies inside the iteration) kept
    within a window narrower than |c|: iteration `var` then owns the block
    [c * var + base, c * var + base + |c|) on that axis.
    """
    changing = assigned_syms(body) - {var}
    found: dict[ir.TensorParam, list] = {}
    written = set()
    for tensor, indices, ranges, store in _located_accesses(body, []):
        found.setdefault(tensor, []).append((indices, ranges))
        if store:
            written.add(tensor)
    for tensor in written - private_buffers(body):
        if not any(_separating(found[tensor], axis, var, changing) for axis in range(tensor.rank)):
            raise ScheduleError(span, f"cannot {what}: iterations may touch the same elements of "
                                f"'{tensor.name}' (no axis is indexed by the loop alone)",
                                *(["a reduction over this loop cannot run in parallel"] if "parallel" in what else []))


def _located_accesses(body, ranges: list):
    """Accesses with the ranges of the loops around them (inside `body`)."""
    for s in body:
        for e in stmt_exprs(s):
            for node in walk_expr(e):
                if isinstance(node, ir.Load):
                    yield node.tensor, node.indices, ranges, False
        match s:
            case ir.Store(tensor, indices):
                yield tensor, indices, ranges, True
            case ir.For(var, start, stop, step, body=inner):
                yield from _located_accesses(inner, ranges + [LoopRange(var, start, stop, step)])
            case ir.If(then=then, orelse=orelse):
                yield from _located_accesses(then, ranges)
                yield from _located_accesses(orelse, ranges)


def _separating(accesses_, axis: int, var: ir.Sym, changing: set) -> bool:
    coef, base, low, high = None, None, None, None
    for indices, ranges in accesses_:
        form, fixed = _linear_and_fixed(indices[axis], var, changing)
        if form is None or not form.get(var):
            return False
        inner = {k: v for k, v in form.items() if k == 1 or k in changing}
        outer = {k: v for k, v in form.items() if k not in inner and k is not var} | fixed
        if coef is None:
            coef, base = form[var], outer
        elif form[var] != coef or outer != base:
            return False
        lo = _extreme(inner, ranges, largest=False)
        hi = _extreme(inner, ranges, largest=True)
        if lo is None or hi is None or set(lo) - {1} or set(hi) - {1}:
            return False  # the varying part must have constant bounds
        low = lo.get(1, 0) if low is None else min(low, lo.get(1, 0))
        high = hi.get(1, 0) if high is None else max(high, hi.get(1, 0))
    return high - low < abs(coef)


def _linear_and_fixed(index: ir.Expr, var: ir.Sym, changing: set) -> tuple[dict | None, dict]:
    """`index` as a linear form plus terms that are not linear but fixed
    for one iteration (they read neither `var` nor a local it changes): a
    tile row's shift `(12 * il) % 16` in `16 * jb + (12 * il) % 16 + jl`,
    fixed in the loop over jl. Those come back keyed by their expression,
    to be compared between accesses like the form's loop-invariant part."""
    form = linear(index)
    if form is not None:
        return form, {}
    form, fixed = {}, {}
    for term in summands(index):
        part = linear(term)
        if part is not None:
            for k, v in part.items():
                form[k] = form.get(k, 0) + v
        elif all(_fixed_node(n, var, changing) for n in walk_expr(term)):
            key = ("fixed", expr_key(term))
            fixed[key] = fixed.get(key, 0) + 1
        else:
            return None, {}
    return {k: v for k, v in form.items() if v or k == 1}, fixed


def _fixed_node(n: ir.Expr, var: ir.Sym, changing: set) -> bool:
    """Arithmetic on constants, sizes and variables the loop does not change
    (a load is not: what it reads may be written in the loop)."""
    if isinstance(n, ir.Var):
        return n.sym is not var and n.sym not in changing
    return isinstance(n, (ir.Const, ir.Shape, ir.Binary, ir.Unary))


def depends_on(index: ir.Expr, var: ir.Sym) -> bool:
    """Is `index` one-to-one in `var` (a nonzero linear coefficient)?"""
    form = linear(index)
    return form is not None and form.get(var, 0) != 0
