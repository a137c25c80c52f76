"""`vectorize(i)`: the iterations of loop `i` become the lanes of vector values;
`vectorize(i, w)` first splits `i` by `w` and vectorizes `i.inner`; the last
partial vector runs as the scalar loop `i.tail` (`tail=peel`, the default) or as
one masked vector step (`tail=mask`). Where the bounds are constants, a tail
that never runs is dropped and an `i.outer` of one trip is its body.

    for i.inner in range(0, 8):            y[b + ramp(0, 1, 8)] =
        y[b + i.inner] = a * x[b + i.inner]      a * x[b + ramp(0, 1, 8)]

The loop needs a constant trip count (its lane count, 2 to 64), or the masked
tail of a split (`range(0, min(w, n))`): then lanes past `n` are masked off.
Loads and stores whose index moves with `i` become vector loads and stores (the
back-end emits contiguous ones where the innermost stride is 1, else gathers).

Legal when different iterations touch different elements of every tensor the
loop writes (see dependence.py), and every local is private to an iteration,
except reductions: `acc = acc + e` (and `*`, `min`, `max`) and `T[j] = T[j] + e`
at an index that does not move with `i` become one horizontal reduction of the
vector `e` — reordering a float sum, so those need `@options(reassociate=True)`.
After `vectorize(i, w)`, a local reduction accumulates in a vector over the
blocks and is reduced once after them (vector_accumulators.py).
Every access must already be proven in bounds (vector code has no per-lane checks).
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import map_expr, stmt_exprs, walk_expr, walk_stmts
from ..machine import Machine
from ..types import BOOL, ScalarType
from ..vector import lanes_of
from . import nontemporal
from .dependence import separated_by
from .vector_accumulators import REDUCTION_OF, accumulate_in_vectors
from .vector_locals import assigned_locals, carried_locals, vector_locals
from .nest import ScheduleError, find_loop, remark, replace_loop, sub, substitute, substitute_expr
from .split import split_loop

name = "vectorize"
MAX_LANES = 64
REDUCIBLE = tuple(REDUCTION_OF)


def run(kernel: ir.Kernel, d, machine: Machine = Machine(), remarks: list | None = None) -> ir.Kernel:
    """`vectorize(i[, w])`; without w, a loop of constant trip count is one
    vector of that many lanes, any other loop takes the target's width for
    the widest element it loads or stores (16 f32 on AVX-512, 8 on AVX2, 4
    on NEON: a kernel that keeps several vectors in registers fits each). A
    split's masked inner loop is one vector of the split's width. `remarks`
    (a list) receives `loop 'i': vectorized by the schedule, 8 x f32 ...`."""
    loop = find_loop(kernel.body, d.loops[0].name, d.loops[0].span)
    if _has_vectors(loop.body):  # found by tests/fuzz: lanes of two widths met in one store
        raise ScheduleError(d.span, f"cannot vectorize '{loop.name}': a loop inside it is already vectorized",
                            "vectorize one loop of a nest")
    d = _target_width(d, loop, machine)
    if not d.ints:
        if d.option("nontemporal") is not None:
            raise ScheduleError(d.span, "nontemporal= needs a vector width: vectorize(i, 16, nontemporal=out)")
        new = Vectorizer(kernel, loop, d.span).run()
        _remark(remarks, loop, _own_lanes(loop)[0], "")
        parent = next((s for s in walk_stmts(kernel.body) if isinstance(s, ir.For) and loop in s.body), None)
        kernel = replace(kernel, body=replace_loop(kernel.body, loop, new))
        return kernel if parent is None else _accumulate_over(kernel, parent.name, d.span)
    width, tail, stream = d.ints[0], d.option("tail", "peel"), d.option("nontemporal")
    original, pieces = loop, []
    if stream is not None:
        tail = _streaming_tail(d)
        # Checked on the whole loop: the head's length is not affine, and the
        # rest, a shifted part of the loop, touches a subset of its elements.
        _check_separated(loop, d.span)
        # One vector (a tile's row) has nothing to peel: a head would split it in two.
        if _constant_trips(loop) != width and not nontemporal.aligned_with_tensor(kernel, loop, stream, width, d.span):
            pieces, loop = nontemporal.peel_head(kernel, loop, stream, width, d.span)
    main, rest = split_loop(loop, width, "peel", d.span)
    trips = _constant_trips(rest)
    tails = [] if trips is not None and trips <= 0 else [rest]  # the width divides a constant trip count
    kernel = replace(kernel, body=replace_loop(kernel.body, original, [*pieces, main, *tails]))
    inner = main.body[0]
    vectors = Vectorizer(kernel, inner, d.span, separated=stream is not None, name=original.name).run()
    kernel = replace(kernel, body=replace_loop(kernel.body, inner, vectors))
    kernel = _accumulate_over(kernel, main.name, d.span)
    if stream is not None:
        main = find_loop(kernel.body, main.name, d.span)
        marked = replace(main, body=nontemporal.mark_stores(main.body, kernel.tensor(stream)))
        kernel = replace(kernel, body=replace_loop(kernel.body, main, [marked]))
    # Full vectors run unmasked; only a partial one (the last, the head) is masked.
    for piece in (tails if tail == "mask" else []) + pieces[1:]:
        kernel = _masked_step(kernel, piece.name, width, d.span, stream)
    note = "" if not tails else ", the last partial vector masked" if tail == "mask" else \
        f", the rest in the scalar loop '{rest.name}'"
    _remark(remarks, original, width, note)
    return _inline_single_trip(kernel, main.name, d.span)


def _target_width(d, loop: ir.For, machine: Machine):
    """`d` with its width when it comes from the target: n of the target's
    vectors of the widest element for `vectorize(i, vectors=n)` (n = 4: 64
    f32 on AVX-512, 32 on AVX2, 16 on NEON, so that a kernel keeping several
    independent chains in registers keeps as many on each target), one for
    `vectorize(i)` on a loop that is not one vector as it stands."""
    vectors = d.option("vectors")
    if vectors is None:
        if d.ints or _own_lanes(loop) is not None:
            return d
        vectors = 1
    elif d.ints:
        raise ScheduleError(d.span, f"vectorize({loop.name}): give a width or vectors=, not both")
    width = vectors * machine.lanes(_widest_element(loop, d.span))
    if width > MAX_LANES:
        raise ScheduleError(d.span, f"cannot vectorize '{loop.name}' with {vectors} vectors: {width} lanes "
                            f"(at most {MAX_LANES})")
    return replace(d, ints=(width,))


def _own_lanes(loop: ir.For) -> tuple[int, ir.Expr | None] | None:
    """(lanes, mask) when the loop is one vector as it stands: a constant trip
    count, or a split's masked inner loop (`range(0, min(8, N - i0))`)."""
    start, stop = loop.start, loop.stop
    if isinstance(start, ir.Const) and isinstance(stop, ir.Const):
        return stop.value - start.value, None
    if isinstance(start, ir.Const) and start.value == 0 and _masked_width(stop) is not None:
        lanes = _masked_width(stop)
        return lanes, ir.Binary("<", ir.Ramp(start, 1, lanes), stop, BOOL)
    return None


def _remark(remarks: list | None, loop: ir.For, lanes: int, note: str) -> None:
    """For `dslc --remarks`: LLVM's remarks skip loops that are vector code already."""
    types = _element_types(loop)
    element = f" {max(types, key=lambda t: t.bits).name}" if types else ""
    remark(remarks, loop.span, f"loop '{loop.name}': vectorized by the schedule, {lanes} x{element} per vector{note}")


def _element_types(loop: ir.For) -> list[ScalarType]:
    types = [e.type for st in walk_stmts(loop.body) for top in stmt_exprs(st)
             for e in walk_expr(top) if isinstance(e, ir.Load)]
    return types + [st.value.type for st in walk_stmts(loop.body) if isinstance(st, ir.Store)]


def _widest_element(loop: ir.For, span) -> ScalarType:
    """The widest element type among the tensors `loop` reads or writes."""
    types = _element_types(loop)
    if not types:
        raise ScheduleError(span, f"cannot vectorize '{loop.name}': it touches no tensor, so no width follows",
                            f"give the width: vectorize({loop.name}, 8)")
    return max(types, key=lambda t: t.bits)


def _constant_trips(loop: ir.For) -> int | None:
    trips = sub(loop.stop, loop.start)
    return trips.value if isinstance(trips, ir.Const) else None


def _inline_single_trip(kernel: ir.Kernel, name: str, span) -> ir.Kernel:
    """Loop `name` replaced by its body when it runs once (a width equal to the
    trip count): straight-line code, as transpose_loads needs its loop's body."""
    loop = find_loop(kernel.body, name, span)
    if _constant_trips(loop) != 1:
        return kernel
    body = substitute(loop.body, {loop.var: loop.start})
    return replace(kernel, body=replace_loop(kernel.body, loop, list(body)))


def _streaming_tail(d) -> str:
    """With nontemporal=, which elements run in the head and the tail depends
    on the array's address; as masked vector steps they are computed as all
    the others are (a scalar step may round a function differently)."""
    if d.option("tail") == "peel":
        raise ScheduleError(d.span, "nontemporal= runs the head and the tail as masked vector steps",
                            "write tail=mask, or leave tail= out")
    return "mask"


def _check_separated(loop: ir.For, span) -> None:
    """Different iterations of `loop` touch different elements (reductions aside)."""
    fixed = _fixed_stores(loop.body, loop.var)
    separated_by([s for s in loop.body if s not in fixed], loop.var, f"vectorize '{loop.name}'", span)


def _fixed_stores(body, var: ir.Sym) -> list[ir.Store]:
    """Top-level stores whose index does not move with `var` (reductions, or errors), in order."""
    return [s for s in body if isinstance(s, ir.Store) and not any(_uses(i, var) for i in s.indices)]


def _masked_step(kernel: ir.Kernel, name: str, width: int, span, stream: str | None = None) -> ir.Kernel:
    """The loop `name`, of fewer than `width` iterations, as one masked vector
    step; its stores to tensor `stream` (a head or tail of nontemporal=) marked."""
    loop = find_loop(kernel.body, name, span)  # rebuilt by the replacements before
    step = Vectorizer(kernel, loop, span, lanes=width).run()
    if stream is not None:
        step = nontemporal.mark_stores(tuple(step), kernel.tensor(stream))
    runs = ir.Binary("<", loop.start, loop.stop, BOOL, loop.span)
    return replace(kernel, body=replace_loop(kernel.body, loop, [ir.If(runs, tuple(step), (), loop.span)]))


def _has_vectors(body) -> bool:
    for s in walk_stmts(body):
        for e in stmt_exprs(s):
            for n in walk_expr(e):
                if isinstance(n, (ir.Ramp, ir.Broadcast)) or (isinstance(n, ir.Var) and n.sym.lanes > 1):
                    return True
    return False


def _accumulate_over(kernel: ir.Kernel, loop_name: str, span) -> ir.Kernel:
    """Keep reductions in vector accumulators across the loop around the vector step."""
    outer = find_loop(kernel.body, loop_name, span)  # rebuilt by the vectorization
    return replace(kernel, body=replace_loop(kernel.body, outer, accumulate_in_vectors(outer)))


class Vectorizer:
    def __init__(self, kernel: ir.Kernel, loop: ir.For, span, lanes: int | None = None, separated: bool = False,
                 name: str | None = None):
        """`lanes` given: `loop` runs fewer than `lanes` iterations (a split's
        tail) and becomes one masked vector step. `separated`: the caller has
        checked that iterations touch different elements. `name`: the loop
        the user named, for errors (`loop` may be a piece of it: `i.inner`)."""
        self.kernel, self.loop, self.span, self.separated = kernel, loop, span, separated
        if lanes is None:
            self.lanes, self.mask = self._shape(loop)
        else:
            count = ir.Binary("-", loop.stop, loop.start, loop.start.type)
            self.lanes, self.mask = lanes, ir.Binary("<", ir.Ramp(ir.Const(0, count.type), 1, lanes), count, BOOL)
        self.ramp = ir.Ramp(loop.start, 1, self.lanes, loop.span)
        self.vector_locals: dict[ir.Sym, ir.Sym] = {}
        self.what = f"vectorize '{name or loop.name}'"

    def _shape(self, loop: ir.For) -> tuple[int, ir.Expr | None]:
        if loop.step != 1:
            raise ScheduleError(self.span, f"cannot vectorize '{loop.name}': its step is {loop.step}")
        shape = _own_lanes(loop)
        if shape is None:
            raise ScheduleError(self.span, f"cannot vectorize '{loop.name}': its trip count is not a constant",
                                f"split it first, e.g. vectorize({loop.name}, 8)")
        lanes, mask = shape
        if not 2 <= lanes <= MAX_LANES:
            raise ScheduleError(self.span, f"cannot vectorize '{loop.name}' with {lanes} lanes (2 to {MAX_LANES})")
        return lanes, mask

    def run(self) -> list[ir.Stmt]:
        body = self.loop.body
        self._refuse_local_arrays(body)
        self._require_proven(body)
        reductions = self._reduction_stores(body)
        rest = tuple(s for s in body if s not in reductions)
        if not self.separated:
            separated_by(rest, self.loop.var, self.what, self.span)
        self.carried = set(carried_locals(self.kernel.body, self.loop))
        self._check_carried(body)
        private = [s for s in assigned_locals(body) if s not in self.carried]
        for sym in vector_locals(body, private, self._varies):
            self.vector_locals[sym] = ir.Sym(sym.name, sym.type, "local", lanes=self.lanes)
        return self._block(body, reductions)

    def _refuse_local_arrays(self, body) -> None:
        for s in walk_stmts(body):
            if isinstance(s, ir.LocalArray):
                raise ScheduleError(self.span, f"cannot {self.what}: it declares the local array "
                                    f"'{s.buffer.name}', which each lane would need for its own",
                                    "declare the array outside this loop, with an axis for the loop if needed")

    def _varies(self, e: ir.Expr, vectors: set) -> bool:
        return any(isinstance(n, ir.Var) and (n.sym is self.loop.var or n.sym in vectors) for n in walk_expr(e))

    def _check_carried(self, body) -> None:
        """A carried local may only be updated as a reduction, and read nowhere else."""
        for sym in self.carried:
            for s in walk_stmts(body):
                update = isinstance(s, ir.Assign) and s.sym is sym
                if update and _reduction_operand(s.value, lambda e: isinstance(e, ir.Var) and e.sym is sym):
                    continue
                if update or any(isinstance(n, ir.Var) and n.sym is sym for e in stmt_exprs(s) for n in walk_expr(e)):
                    raise ScheduleError(self.span, f"cannot {self.what}: local '{sym.name}' carries a value "
                                        "between iterations and is not only a reduction (acc = acc + ...)")

    # --------------------------------------------------------------- checks

    def _require_proven(self, body) -> None:
        for s in walk_stmts(body):
            loads = [n for e in stmt_exprs(s) for n in walk_expr(e) if isinstance(n, ir.Load)]
            unsafe = [x for x in loads if not x.safe]
            if isinstance(s, ir.Store) and not s.safe:
                unsafe.append(s)
            if unsafe:
                line = f" (line {unsafe[0].span.line})" if unsafe[0].span else ""
                raise ScheduleError(self.span, f"cannot {self.what}: the access to '{unsafe[0].tensor.name}'"
                                    f"{line} is not proven in bounds", "vector code has no per-lane bounds checks")

    def _reduction_stores(self, body) -> set:
        """Top-level `T[j] = T[j] op e` stores whose index does not move with the loop."""
        out = _fixed_stores(body, self.loop.var)
        for s in out:
            if _reduction_operand(s.value, lambda e: _same_load(e, s)) is None:
                raise ScheduleError(self.span, f"cannot {self.what}: every iteration stores to the same "
                                    f"element of '{s.tensor.name}'")
        return set(out)

    # ------------------------------------------------------------ rewriting

    def _block(self, body, reductions=frozenset()) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            out.extend(self._stmt(s, s in reductions))
        return out

    def _stmt(self, s: ir.Stmt, reduction: bool) -> list[ir.Stmt]:
        match s:
            case ir.Store(_, indices, value):
                if reduction:
                    return [self._reduce_store(s)]
                return [replace(s, indices=tuple(self._vec(i) for i in indices), value=self._vec(value),
                                mask=self.mask)]
            case ir.Assign(sym, value):
                return [self._assign(s, sym, value)]
            case ir.Prefetch(_, indices):
                # The first lane's element: one hint a vector, whose line the
                # next lanes mostly share.
                first = tuple(substitute_expr(i, {self.loop.var: self.loop.start}) for i in indices)
                if any(lanes_of(self._vec(i)) > 1 for i in first):
                    line = f" at line {s.span.line}" if s.span else ""
                    raise ScheduleError(self.span, f"cannot {self.what}: the prefetch{line} indexes with a "
                                                   "value computed in the loop")
                return [replace(s, indices=first)]
            case ir.For(_, start, stop, _, body):
                if _uses_any(start, stop, self.loop.var, self.vector_locals):
                    raise ScheduleError(self.span, f"cannot {self.what}: the bounds of '{s.name}' depend on it")
                return [replace(s, body=tuple(self._block(body)))]
            case ir.If(cond, then, orelse):
                if lanes_of(self._vec(cond)) > 1:
                    line = f" at line {s.span.line}" if s.span else ""
                    raise ScheduleError(self.span, f"cannot {self.what}: the 'if'{line} depends on it")
                return [replace(s, then=tuple(self._block(then)), orelse=tuple(self._block(orelse)))]
        raise ScheduleError(self.span, f"cannot {self.what}: unsupported statement in its body")

    def _assign(self, s: ir.Assign, sym: ir.Sym, value: ir.Expr) -> ir.Stmt:
        if sym in self.carried:
            op, rest = _reduction_operand(value, lambda e: isinstance(e, ir.Var) and e.sym is sym)
            combined = self._horizontal(op, rest, sym.type)
            return ir.Assign(sym, ir.Binary(op, ir.Var(sym), combined, sym.type), s.span)
        new_value = self._vec(value)
        if sym in self.vector_locals:
            return ir.Assign(self.vector_locals[sym], _widen(new_value, self.lanes), s.span)
        return replace(s, value=new_value)

    def _reduce_store(self, s: ir.Store) -> ir.Stmt:
        op, rest = _reduction_operand(s.value, lambda e: _same_load(e, s))
        current = next(n for n in walk_expr(s.value) if _same_load(n, s))
        combined = ir.Binary(op, current, self._horizontal(op, rest, s.value.type), s.value.type)
        return replace(s, value=combined)

    def _horizontal(self, op: str, rest: ir.Expr, t) -> ir.Expr:
        if t.is_float and not self.kernel.options.reassociate:
            raise ScheduleError(self.span, f"cannot {self.what}: it reorders a float reduction",
                                "allow it with @options(reassociate=True)")
        value = _widen(self._vec(rest), self.lanes)
        if self.mask is not None:
            from ..loops import identity

            value = ir.Select(self.mask, value, ir.Const(identity(REDUCTION_OF[op], t), t), t)
        return ir.HReduce(op, value, t)

    def _vec(self, e: ir.Expr) -> ir.Expr:
        var, locals_ = self.loop.var, self.vector_locals

        def fn(node: ir.Expr) -> ir.Expr:
            if isinstance(node, ir.Var):
                if node.sym is var:
                    return self.ramp
                if node.sym in locals_:
                    return ir.Var(locals_[node.sym], node.span)
            if isinstance(node, ir.Load) and self.mask is not None and any(lanes_of(i) > 1 for i in node.indices):
                return replace(node, mask=self.mask)
            return node

        return map_expr(e, fn)


def _masked_width(stop: ir.Expr) -> int | None:
    if isinstance(stop, ir.Binary) and stop.op == "min":
        for side in (stop.lhs, stop.rhs):
            if isinstance(side, ir.Const):
                return side.value
    return None


def _uses(e: ir.Expr, sym: ir.Sym) -> bool:
    return any(isinstance(n, ir.Var) and n.sym is sym for n in walk_expr(e))


def _uses_any(start, stop, var, vector_locals) -> bool:
    syms = {var, *vector_locals}
    return any(isinstance(n, ir.Var) and n.sym in syms for e in (start, stop) for n in walk_expr(e))


def _same_load(e: ir.Expr, store: ir.Store) -> bool:
    from .dependence import expr_key

    return (isinstance(e, ir.Load) and e.tensor is store.tensor
            and tuple(map(expr_key, e.indices)) == tuple(map(expr_key, store.indices)))


def _reduction_operand(value: ir.Expr, is_acc):
    """`acc op rest` or `rest op acc` -> (op, rest), if `acc` appears only there."""
    if isinstance(value, ir.Binary) and value.op in REDUCIBLE:
        for acc, rest in ((value.lhs, value.rhs), (value.rhs, value.lhs)):
            if is_acc(acc) and not any(is_acc(n) for n in walk_expr(rest)):
                return value.op, rest
    return None


def _widen(e: ir.Expr, lanes: int) -> ir.Expr:
    return e if lanes_of(e) > 1 else ir.Broadcast(e, lanes, getattr(e, "span", None))
