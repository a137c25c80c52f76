"""Parallel loops: a `For(kind="parallel")` runs on a thread team.

The loop becomes three pieces (for a kernel function `k`, the N-th such loop):

    i32  k__parN__body(captures..., i64 start, i64 k0, i64 k1, i64 trip, ptr ctx)
         iterations k0..k1-1 (var = start + k*step), serially; returns 0 or the
         status of a failed Check (the usual fail blocks: `ret code+1`)
    void k__parN(ptr ctx)
         what GOMP_parallel runs on each thread: unpacks `ctx`, takes a
         contiguous block of iterations (static schedule), calls the body and
         records a failure in the shared status word (cmpxchg: first one wins)
    the call site in `k`
         fills `ctx` (a struct on `k`'s stack), calls GOMP_parallel, then
         returns the status if it is nonzero

Captures are passed to the body as arguments (not read through `ctx` in the
loop), so data pointers keep `noalias` and a constant unit stride stays a
constant: the body vectorizes as the serial loop does. Locals are private: the
body has its own slots, initialized from the values outside; those read after
the loop are copied back from the thread that ran the last iteration (what a
serial run leaves in them). A loop with fewer than two iterations, one thread,
a false `when` condition or no libgomp calls the body directly, without GOMP
(whose dispatch costs ~2 us).

A parallel loop nested in another is outlined the same way, once, and forks a
team only when `omp_in_parallel()` says the outer one runs on this thread
alone (its `when` was false): then a batch of products that is too short to
share out runs each product's rows on the team. (These loops used to run
serially inside an outlined body, so the contraction pass emitted two copies
of each batch of products, one for each case: dense.tk compiled in 122 s
rather than 66.)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

import llvmlite.ir as ir

from dsl.lowering.ir import AlignGap, Assign, For, If, Load, Overlaps, Prefetch, Shape, Store, Sym, TensorParam, Var
from dsl.lowering.types import I64 as INDEX
from dsl.lowering.rewrite import assigned_syms, stmt_exprs, walk_expr, walk_stmts

from .context import FunctionContext, TensorArgs
from .exprs import emit_expr
from .ltypes import I32, I64, PTR, int_const
from .runtime import gomp_parallel, num_threads, omp_in_parallel, omp_num_threads, omp_thread_num, warn_serial
from .signature import new_function

EmitLoop = Callable[[FunctionContext, For], None]
# Fields of the context struct after the captures; the live-outs follow them.
_START, _TRIP, _STATUS, _LIVEOUT = range(4)


@dataclass
class _Plan:
    """What the loop body takes from outside, in argument order."""

    tensors: list[TensorParam]
    syms: list[Sym]  # read inside (or copied back): initialized from outside
    liveout: list[Sym]  # assigned inside and read elsewhere: copied back

    def values(self, cx: FunctionContext) -> list[ir.Value]:
        """The captured values at the caller: non-constant tensor fields, then syms."""
        out: list[ir.Value] = []
        for t in self.tensors:
            out += [v for v in _tensor_fields(cx.tensor(t)) if not isinstance(v, ir.Constant)]
        out += [cx.load_var(s) for s in self.syms]
        return out


def _slot_type(cx: FunctionContext, sym: Sym) -> ir.Type:
    """The type `cx` keeps `sym` in (whatever it is: scalar, vector)."""
    return cx.slot(sym).allocated_type


def _tensor_fields(t: TensorArgs) -> list[ir.Value]:
    return [t.data, *t.sizes, *t.strides]


def emit_parallel_for(cx: FunctionContext, loop: For, emit_loop: EmitLoop) -> None:
    """Emit `loop` (kind 'parallel') at the builder's position, run by a thread team.

    `emit_loop(cx, loop)` emits a serial loop; it builds the outlined body.
    """
    plan = _plan(cx, loop)
    values = plan.values(cx)
    ctx_type = ir.LiteralStructType([v.type for v in values] + [I64, I64, I32]
                                    + [_slot_type(cx, s) for s in plan.liveout])
    base = _free_name(cx.module, f"{cx.func.name}__par")
    body = _define_body(cx, loop, plan, values, ctx_type, base + "__body", emit_loop)
    team = _define_team(cx.module, body, ctx_type, len(values), base)
    _emit_call_site(cx, loop, plan, values, ctx_type, body, team)


def _plan(cx: FunctionContext, loop: For) -> _Plan:
    uses = _uses_of(cx.body)
    used_tensors: set[TensorParam] = set()
    read: set[Sym] = set()
    for stmt in walk_stmts(loop.body):
        syms, tensors = uses(stmt)
        read |= syms
        used_tensors |= tensors
    assigned = assigned_syms(loop.body) | {loop.var}
    outside = _read_outside(cx.body, loop)
    liveout = sorted(assigned & outside, key=lambda s: s.id)
    # A local given its values only inside the loop (a tile's accumulators)
    # brings nothing in: capturing it passed ~100 vectors a call, which cost
    # more than a small product's work.
    inner_only = assigned - _assigned_outside(cx.body, loop)
    syms = sorted((read - inner_only | set(liveout)) - {loop.var}, key=lambda s: s.id)
    tensors = [t for t in cx.tensors if t in used_tensors]  # parameters, then live scratch
    return _Plan(tensors, syms, liveout)


def _assigned_outside(body, loop: For) -> set[Sym]:
    """Symbols given a value by statements of `body` that are not inside `loop`."""
    out: set[Sym] = set()
    for stmt in _outside(body, loop):
        match stmt:
            case Assign(sym=sym) | For(var=sym):
                out.add(sym)
    return out


def _outside(body, loop: For):
    """The statements of `body`, nested ones included, that are not `loop` or inside it."""
    stack = [iter(body)]
    while stack:
        for stmt in stack[-1]:
            if stmt is loop:
                continue
            yield stmt
            match stmt:
                case For(body=inner):
                    stack.append(iter(inner))
                    break
                case If(then=then, orelse=orelse):
                    stack.append(iter((*then, *orelse)))
                    break
        else:
            stack.pop()


def _read_outside(body, loop: For) -> set[Sym]:
    """Symbols read by statements of `body` that are not inside `loop`."""
    uses = _uses_of(body)
    out: set[Sym] = set()
    for stmt in _outside(body, loop):
        out |= uses(stmt)[0]
    return out


# (symbols read, tensors used) by each statement's own expressions, for the
# last kernel body asked about: every parallel loop asks about the whole body,
# and walking its expressions each time was a third of the back-end's time on
# a matmul (14 parallel loops). One entry, swapped whole, so that threads
# compiling other kernels at once only miss it.
_last_uses: tuple[object, dict] = (None, {})


def _uses_of(body):
    global _last_uses
    owner, cache = _last_uses
    if owner is not body:
        cache = {}
        _last_uses = (body, cache)

    def uses(stmt) -> tuple[frozenset[Sym], frozenset[TensorParam]]:
        found = cache.get(id(stmt))
        if found is None or found[0] is not stmt:  # the entry keeps its statement alive
            found = cache[id(stmt)] = (stmt, *_own_uses(stmt))
        return found[1], found[2]

    return uses


def _own_uses(stmt) -> tuple[frozenset[Sym], frozenset[TensorParam]]:
    read: set[Sym] = set()
    tensors: set[TensorParam] = {stmt.tensor} if isinstance(stmt, (Store, Prefetch)) else set()
    for e in (x for top in stmt_exprs(stmt) for x in walk_expr(top)):
        match e:
            case Var(sym=sym):
                read.add(sym)
            case Load(tensor=t) | Shape(tensor=t) | AlignGap(tensor=t):
                tensors.add(t)
            case Overlaps(a=a, b=b):
                tensors.update((a, b))
    return frozenset(read), frozenset(tensors)


def _free_name(module: ir.Module, prefix: str) -> str:
    n = 0
    while f"{prefix}{n}" in module.globals:
        n += 1
    return f"{prefix}{n}"


def _internal(module: ir.Module, ret: ir.Type, args: list[ir.Type], name: str) -> ir.Function:
    fn = new_function(module, ir.FunctionType(ret, args), name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    return fn


def _field(bld: ir.IRBuilder, ctx: ir.Value, ctx_type: ir.Type, index: int) -> ir.Value:
    """The address of field `index` of the context struct at `ctx`."""
    return bld.gep(ctx, [int_const(I32, 0), int_const(I32, index)], inbounds=True,
                   source_etype=ctx_type)


def _define_body(cx: FunctionContext, loop: For, plan: _Plan, values: list[ir.Value],
                 ctx_type: ir.Type, name: str, emit_loop: EmitLoop) -> ir.Function:
    """The outlined body: iterations k0..k1-1 of `loop`, with private locals."""
    fn = _internal(cx.module, I32, [v.type for v in values] + [I64, I64, I64, I64, PTR], name)
    # Out of line: every thread runs the code the serial path calls. Inlined
    # into the GOMP wrapper, whose captures come out of `ctx`, LLVM compiled a
    # second copy, and q6_K's matrix-vector dots ran ~20% slower in it (4096^2
    # on 2 threads of Zen 4: 284 -> 237 us out of line; 1 thread 461).
    fn.attributes.add("noinline")
    start, k0, k1, trip, ctx = fn.args[len(values):]
    for arg, label in zip(fn.args[len(values):], ("start", "k0", "k1", "trip", "ctx")):
        arg.name = label
    wcx = FunctionContext(fn, cx.kernel, cx.body, cx.sign_masks)
    wcx.in_parallel = True  # a parallel loop nested in this one forks only outside a team
    _bind_captures(cx, wcx, plan, fn.args[: len(values)])
    bld = wcx.builder
    run, empty = wcx.new_block("run"), wcx.new_block("empty")
    bld.cbranch(bld.icmp_unsigned("<", k0, k1), run, empty)
    bld.position_at_end(empty)
    wcx.return_status(int_const(I32, 0))
    bld.position_at_end(run)
    step = int_const(I64, loop.step)
    first = bld.add(start, bld.mul(k0, step))
    # The stop is one past the last iteration run: never beyond the loop's own stop.
    last = bld.add(start, bld.mul(bld.sub(k1, int_const(I64, 1)), step))
    stop = bld.add(last, int_const(I64, 1 if loop.step > 0 else -1))
    lo, hi = Sym("lo", INDEX, "local"), Sym("hi", INDEX, "local")
    wcx.store_var(lo, first)
    wcx.store_var(hi, stop)
    emit_loop(wcx, replace(loop, start=Var(lo), stop=Var(hi), kind="serial"))
    if plan.liveout:
        _copy_back(wcx, plan, ctx, ctx_type, len(values), bld.icmp_unsigned("==", k1, trip))
    wcx.return_status(int_const(I32, 0))
    wcx.finish()
    return fn


def _bind_captures(cx: FunctionContext, wcx: FunctionContext, plan: _Plan, args) -> None:
    """Give the body's context the captured tensors (constants kept) and syms."""
    args = iter(args)
    noalias = not cx.kernel.options.inplace  # as in the kernel: the entry checks proved it
    for t in plan.tensors:
        fields = []
        for k, outer in enumerate(_tensor_fields(cx.tensor(t))):
            if isinstance(outer, ir.Constant):
                fields.append(outer)
                continue
            arg = next(args)
            arg.name = outer.name
            if k == 0 and noalias:
                arg.add_attribute("noalias")
            fields.append(arg)
        rank = t.rank
        wcx.tensors[t] = TensorArgs(t, fields[0], fields[1: 1 + rank], fields[1 + rank:])
    for sym in plan.syms:
        value = next(args)
        value.name = sym.name
        wcx.store_var(sym, value)


def _copy_back(wcx: FunctionContext, plan: _Plan, ctx: ir.Value, ctx_type: ir.Type,
               ncaptures: int, is_last: ir.Value) -> None:
    """If this block ran the last iteration, store its live-out locals into `ctx`."""
    bld = wcx.builder
    copy, done = wcx.new_block("copy_back"), wcx.new_block("copied")
    bld.cbranch(is_last, copy, done)
    bld.position_at_end(copy)
    _copy_liveouts(wcx, plan, ctx, ctx_type, ncaptures, into_ctx=True)
    bld.branch(done)
    bld.position_at_end(done)


def _define_team(module: ir.Module, body: ir.Function, ctx_type: ir.LiteralStructType,
                 ncaptures: int, name: str) -> ir.Function:
    """`void name(ptr ctx)`, run by every thread of the team: its block of iterations."""
    fn = _internal(module, ir.VoidType(), [PTR], name)
    ctx = fn.args[0]
    ctx.name = "ctx"
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    elements = ctx_type.elements
    values = [bld.load(_field(bld, ctx, ctx_type, k), typ=elements[k]) for k in range(ncaptures)]
    start = bld.load(_field(bld, ctx, ctx_type, ncaptures + _START), typ=I64)
    trip = bld.load(_field(bld, ctx, ctx_type, ncaptures + _TRIP), typ=I64)
    tid = bld.zext(bld.call(omp_thread_num(module), []), I64)
    team = bld.zext(bld.call(omp_num_threads(module), []), I64)
    # Static schedule: the first trip % team threads take one extra iteration.
    share, extra = bld.udiv(trip, team), bld.urem(trip, team)
    has_extra = bld.icmp_unsigned("<", tid, extra)
    k0 = bld.add(bld.mul(tid, share), bld.select(has_extra, tid, extra))
    k1 = bld.add(bld.add(k0, share), bld.zext(has_extra, I64))
    status = bld.call(body, [*values, start, k0, k1, trip, ctx])
    failed, done = fn.append_basic_block("failed"), fn.append_basic_block("done")
    bld.cbranch(bld.icmp_signed("!=", status, int_const(I32, 0)), failed, done)
    bld.position_at_end(failed)
    # First failure wins; GOMP_parallel's join orders this before the caller's read.
    word = _field(bld, ctx, ctx_type, ncaptures + _STATUS)
    bld.cmpxchg(word, int_const(I32, 0), status, "monotonic", "monotonic")
    bld.branch(done)
    bld.position_at_end(done)
    bld.ret_void()
    return fn


def _trip_count(bld: ir.IRBuilder, start: ir.Value, stop: ir.Value, step: int) -> ir.Value:
    """The number of iterations of range(start, stop, step), as an unsigned i64."""
    up = step > 0
    runs = bld.icmp_signed("<" if up else ">", start, stop)
    span = bld.sub(stop, start) if up else bld.sub(start, stop)  # exact as unsigned
    count = bld.add(bld.udiv(bld.sub(span, int_const(I64, 1)), int_const(I64, abs(step))),
                    int_const(I64, 1))
    return bld.select(runs, count, int_const(I64, 0))


def _emit_call_site(cx: FunctionContext, loop: For, plan: _Plan, values: list[ir.Value],
                    ctx_type: ir.LiteralStructType, body: ir.Function, team: ir.Function) -> None:
    """Run the loop: on a team when worth it and possible, else by calling `body` once."""
    bld, module = cx.builder, cx.module
    ctx = cx.alloca_builder.alloca(ctx_type, name=f"{team.name}.ctx")
    ctx.type = PTR  # llvmlite would print a typed pointer
    start = emit_expr(cx, loop.start)
    trip = _trip_count(bld, start, emit_expr(cx, loop.stop), loop.step)
    threads = bld.zext(bld.call(num_threads(module, module.triple), []), I64)
    worth = bld.and_(bld.icmp_unsigned(">", trip, int_const(I64, 1)),
                     bld.icmp_unsigned(">", threads, int_const(I64, 1)))
    if loop.when is not None:  # the schedule's "enough work" test
        worth = bld.and_(worth, emit_expr(cx, loop.when))
    # Live-outs start as they are: a loop that runs no iteration leaves them so.
    _copy_liveouts(cx, plan, ctx, ctx_type, len(values), into_ctx=True)
    gomp = gomp_parallel(module)
    check_gomp, on_team = cx.new_block(f"{loop.name}.gomp?"), cx.new_block(f"{loop.name}.team")
    warn, alone = cx.new_block(f"{loop.name}.nogomp"), cx.new_block(f"{loop.name}.serial")
    join = cx.new_block(f"{loop.name}.joined")
    bld.cbranch(worth, check_gomp, alone)
    bld.position_at_end(check_gomp)
    # Nested in another parallel loop: a team of its own only when that loop
    # runs on this thread alone (its `when` was false, or one iteration).
    check_team = cx.new_block(f"{loop.name}.nested?") if cx.in_parallel else on_team
    bld.cbranch(bld.icmp_unsigned("!=", gomp, ir.Constant(PTR, None)), check_team, warn)
    if cx.in_parallel:
        bld.position_at_end(check_team)
        inside = bld.call(omp_in_parallel(module), [])
        bld.cbranch(bld.icmp_signed("!=", inside, int_const(I32, 0)), alone, on_team)
    bld.position_at_end(warn)
    bld.call(warn_serial(module), [])
    bld.branch(alone)

    bld.position_at_end(on_team)
    for k, value in enumerate([*values, start, trip, int_const(I32, 0)]):
        bld.store(value, _field(bld, ctx, ctx_type, k))
    size = bld.trunc(bld.select(bld.icmp_unsigned("<", trip, threads), trip, threads), I32)
    bld.call(gomp, [team, ctx, size, int_const(I32, 0)])
    team_status = bld.load(_field(bld, ctx, ctx_type, len(values) + _STATUS), typ=I32)
    bld.branch(join)

    bld.position_at_end(alone)
    alone_status = bld.call(body, [*values, start, int_const(I64, 0), trip, trip, ctx])
    bld.branch(join)

    bld.position_at_end(join)
    status = bld.phi(I32, name=f"{loop.name}.status")
    status.add_incoming(team_status, on_team)
    status.add_incoming(alone_status, alone)
    _return_if_failed(cx, status)
    _copy_liveouts(cx, plan, ctx, ctx_type, len(values), into_ctx=False)


def _copy_liveouts(cx: FunctionContext, plan: _Plan, ctx: ir.Value, ctx_type: ir.Type,
                   ncaptures: int, into_ctx: bool) -> None:
    """Copy the live-out locals between the caller's slots and their `ctx` fields."""
    bld = cx.builder
    for k, sym in enumerate(plan.liveout):
        field = _field(bld, ctx, ctx_type, ncaptures + _LIVEOUT + k)
        if into_ctx:
            bld.store(cx.load_var(sym), field)
        else:
            cx.store_var(sym, bld.load(field, typ=_slot_type(cx, sym)))


def _return_if_failed(cx: FunctionContext, status: ir.Value) -> None:
    bld = cx.builder
    failed, ok = cx.new_block("par.failed"), cx.new_block("par.ok")
    bld.cbranch(bld.icmp_signed("!=", status, int_const(I32, 0)), failed, ok)
    bld.position_at_end(failed)
    cx.return_status(status)
    bld.position_at_end(ok)
