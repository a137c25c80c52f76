"""The automatic schedule's threads: the outermost loop of each nest that may
run in parallel does, when the call brings enough work to pay for a team.

For each loop at the top of the kernel (or the single loop directly inside it,
when the outer one cannot be split among threads), the `parallel` directive's
legality test decides, and every access must be proven in bounds; a loop that passes becomes `parallel` with a `when`
condition: its estimated work (iterations times the memory accesses of their
bodies, inner loops included) at least `MIN_WORK`. Below that the loop runs on
the calling thread, at the cost of one call. Nests that already have parallel
loops (the contraction's) are left alone.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..printer import format_expr
from ..arith import add, compare, i64, maximum, mul, sub
from ..rewrite import assigned_syms, stmt_exprs, walk_expr, walk_stmts
from .dependence import require_private_locals, separated_by
from .nest import ScheduleError, remark, replace_loop

# Element accesses below which a thread team does not pay: GOMP's dispatch
# costs ~2 us here, the time of ~2^15 to 2^16 vectorized element accesses.
MIN_WORK = 1 << 16


def run(kernel: ir.Kernel, remarks: list | None = None) -> ir.Kernel:
    body = kernel.body
    for s in kernel.body:
        if not isinstance(s, ir.For) or s.kind != "serial" or _busy(s):
            continue
        loop, reason = _parallel_candidate(s)
        if loop is None:
            remark(remarks, s.span, f"loop '{s.name}' runs on one thread: {reason}")
            continue
        body = replace_loop(body, loop, [replace(loop, kind="parallel", when=enough_work(loop, MIN_WORK))])
        remark(remarks, loop.span, f"loop '{loop.name}': parallel on all threads when its work "
                                    f"(~{format_expr(estimated_work(loop))} element accesses) is at least {MIN_WORK}")
    return replace(kernel, body=body)


def _busy(loop: ir.For) -> bool:
    """Already parallel inside, or holds scratch (a transform's own plan)."""
    return any((isinstance(s, ir.For) and s.kind == "parallel") or isinstance(s, ir.Alloc)
               for s in walk_stmts((loop,)))


def _parallel_candidate(loop: ir.For) -> tuple[ir.For | None, str]:
    """`loop`, or its only inner loop, if its iterations may run on several threads."""
    reason = _illegal(loop)
    if reason is None:
        return loop, ""
    inner = loop.body[0] if len(loop.body) == 1 and isinstance(loop.body[0], ir.For) else None
    if inner is not None and inner.kind == "serial" and _illegal(inner) is None:
        return inner, ""
    return None, reason


def _illegal(loop: ir.For) -> str | None:
    unproven = _unproven_access(loop)
    if unproven is not None:
        # Measured: a Jacobi sweep with checked neighbour reads ran 3x slower
        # outlined on two threads than serially (its checked inner loop stops
        # vectorizing there). Until that is fixed, such loops stay serial.
        return f"the access to '{unproven}' is not proven in bounds, so it is checked on every iteration"
    what = f"run '{loop.name}' in parallel"
    try:
        require_private_locals(loop.body, what, loop.span)
        separated_by(loop.body, loop.var, what, loop.span)
    except ScheduleError as err:
        return err.message
    return None


def _unproven_access(loop: ir.For) -> str | None:
    for s in walk_stmts(loop.body):
        if isinstance(s, ir.Store) and not s.safe:
            return s.tensor.name
        for e in (n for x in stmt_exprs(s) for n in walk_expr(x)):
            if isinstance(e, ir.Load) and not e.safe:
                return e.tensor.name
    return None


def enough_work(loop: ir.For, least: int) -> ir.Expr:
    """The run-time test that a call brings `loop` at least `least` element accesses."""
    return compare(">=", estimated_work(loop), i64(least))


def estimated_work(loop: ir.For) -> ir.Expr:
    """Iterations x accesses, as an i64 expression valid before the loop runs."""
    inside = assigned_syms(loop.body) | {loop.var}
    return mul(_trips(loop, inside), maximum(_cost(loop.body, inside), i64(1)))


def _trips(loop: ir.For, inside: set) -> ir.Expr:
    """The loop's trip count; for bounds known only inside the nest, the
    length of a block `range(b, min(b + c, n))` (c), else 1."""
    if any(isinstance(e, ir.Var) and e.sym in inside for x in (loop.start, loop.stop) for e in walk_expr(x)):
        block = _block_length(loop)
        return i64(1) if block is None else i64(max(1, block // abs(loop.step)))
    span = maximum(sub(loop.stop, loop.start), i64(0))
    return span if abs(loop.step) == 1 else add(i64(0), ir.Binary("//", span, i64(abs(loop.step)), span.type))


def _block_length(loop: ir.For) -> int | None:
    """c for a loop over `range(b, min(b + c, n))` (either side of the min),
    or over `range(0, min(c, n - b))` (split's masked block); a block of a
    loop split by hand: the sum over blocks of 1024 in
    stdlib/reduce.tk counted one access per block, so 64 pieces of 2^18
    elements looked too small for threads and a 16M sum ran serially."""
    stop, start = loop.stop, loop.start
    if not (isinstance(stop, ir.Binary) and stop.op == "min"):
        return None
    if isinstance(start, ir.Const):  # range(0, min(c, n - b)): a split's masked block
        sizes = [side.value - start.value for side in (stop.lhs, stop.rhs) if isinstance(side, ir.Const)]
        return sizes[0] if sizes else None
    if not isinstance(start, ir.Var):
        return None
    for side in (stop.lhs, stop.rhs):
        if (isinstance(side, ir.Binary) and side.op == "+" and isinstance(side.lhs, ir.Var)
                and side.lhs.sym is start.sym and isinstance(side.rhs, ir.Const) and isinstance(side.rhs.value, int)):
            return side.rhs.value
    return None


def _cost(body, inside: set) -> ir.Expr:
    total: ir.Expr = i64(0)
    for s in body:
        match s:
            case ir.For():
                inner = inside | assigned_syms(s.body) | {s.var}
                total = add(total, mul(_trips(s, inside), maximum(_cost(s.body, inner), i64(1))))
            case ir.If(then=then, orelse=orelse):
                total = add(total, add(_cost(then, inside), _cost(orelse, inside)))
            case _:
                accesses = sum(isinstance(e, ir.Load) for x in stmt_exprs(s) for e in walk_expr(x))
                total = add(total, i64(accesses + isinstance(s, ir.Store)))
    return total



