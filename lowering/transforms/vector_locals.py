"""Which locals a vectorized loop turns into vectors, and which are reductions.

For the loop being vectorized:
- a local is *carried* if one iteration can read the value another left (read
  before assigned in an iteration) or code after the loop can read it;
- a carried local must be a reduction (`acc = acc op e`, read nowhere else in
  the loop): the lanes of `e` are combined into it once per vector step;
- every other local assigned in the loop is private: it becomes a vector local
  if any value assigned to it varies with the loop (directly, or through another
  vector local) — decided for the whole body before anything is rewritten, so
  every assignment of it writes the same vector symbol.
"""

from __future__ import annotations

from .. import ir
from ..rewrite import stmt_exprs, walk_expr, walk_stmts
from .dependence import is_carried


def assigned_locals(body) -> list[ir.Sym]:
    seen: dict[ir.Sym, None] = {}
    for s in walk_stmts(body):
        if isinstance(s, ir.Assign) and s.sym.role == "local":
            seen.setdefault(s.sym)
    return list(seen)


def reads(s: ir.Stmt, sym: ir.Sym) -> bool:
    """Does `s` (with nested statements) read `sym`?"""
    for inner in walk_stmts([s]):
        for e in stmt_exprs(inner):
            if any(isinstance(n, ir.Var) and n.sym is sym for n in walk_expr(e)):
                return True
    return False


def live_after(root, loop: ir.For, sym: ir.Sym) -> bool:
    """Can code after `loop` (in `root`) read the value `loop` leaves in `sym`?"""
    path = _path_to(root, loop)
    if path is None:
        return True  # not found: assume the worst
    for block, index, owner in reversed(path):
        verdict = _scan(block[index + 1:], sym)
        if verdict is not None:
            return verdict
        if isinstance(owner, ir.For):
            # The next iteration of an enclosing loop runs the statements
            # before `loop` again: a read there sees the value too.
            verdict = _scan(block[:index], sym)
            if verdict is not None:
                return verdict
    return False


def _scan(stmts, sym: ir.Sym) -> bool | None:
    """True if `sym` may be read before being reassigned, False if it is surely
    reassigned first, None if these statements do neither."""
    use = _first_use(stmts, sym)
    return None if use is None else use == "read"


def _first_use(stmts, sym: ir.Sym) -> str | None:
    for s in stmts:
        use = _use(s, sym)
        if use is not None:
            return use
    return None


def _use(s: ir.Stmt, sym: ir.Sym) -> str | None:
    if any(isinstance(n, ir.Var) and n.sym is sym for e in stmt_exprs(s) for n in walk_expr(e)):
        return "read"
    match s:
        case ir.Assign(target):
            return "write" if target is sym else None
        case ir.For(body=body):
            # A loop may run zero times: it can read the value but not kill it.
            return "read" if _first_use(body, sym) == "read" else None
        case ir.If(then=then, orelse=orelse):
            uses = {_first_use(then, sym), _first_use(orelse, sym)}
            if "read" in uses:
                return "read"
            return "write" if uses == {"write"} else None
    return None


def _path_to(body, target, owner=None):
    """[(block, index, owner of block), ...] from `body` down to `target`."""
    for k, s in enumerate(body):
        if s is target:
            return [(body, k, owner)]
        blocks = [s.body] if isinstance(s, ir.For) else [s.then, s.orelse] if isinstance(s, ir.If) else []
        for block in blocks:
            found = _path_to(block, target, s)
            if found is not None:
                return [(body, k, owner), *found]
    return None


def carried_locals(root, loop: ir.For) -> list[ir.Sym]:
    return [sym for sym in assigned_locals(loop.body)
            if is_carried(loop.body, sym) or live_after(root, loop, sym)]


def vector_locals(body, private: list[ir.Sym], varies) -> set[ir.Sym]:
    """The private locals that must hold vectors: a fixed point over the body,
    `varies(expr, vectors)` telling whether an expression is a vector."""
    vectors: set[ir.Sym] = set()
    changed = True
    while changed:
        changed = False
        for s in walk_stmts(body):
            if isinstance(s, ir.Assign) and s.sym in private and s.sym not in vectors and varies(s.value, vectors):
                vectors.add(s.sym)
                changed = True
    return vectors
