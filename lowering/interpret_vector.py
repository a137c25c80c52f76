"""Vector IR in the reference interpreter (docs/semantics.md, "Vectors").

`VectorCompiler` is the part of the closure compiler (`interpret_compile.py`)
for expressions with lanes > 1 (see `lowering.vector.lanes_of`), `HReduce`,
and stores with vector operands. A vector value is a numpy array of shape
(lanes,) with the element dtype; scalar operands of a vector operation are
broadcast. Lane-wise op semantics live in `interpret_vector_ops.py`.

Vector values are never modified in place once made, so a vector local may
share its array with the expression that produced it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from . import interpret_ops as ops
from . import interpret_vector_ops as vops
from . import ir
from .rewrite import child_exprs, stmt_exprs, walk_expr, walk_stmts
from .target_ops import fallback
from .types import F16, value_type
from .vector import lanes_of

Code = Callable[[list], object]  # a compiled node: env -> value (as in interpret_compile)


def has_vectors(kernel: ir.Kernel) -> bool:
    """Does `kernel` hold any vector IR? (If not, the compiler skips lane counting.)"""
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.Assign) and s.sym.lanes > 1:
            return True
        for e in stmt_exprs(s):
            for n in walk_expr(e):
                if isinstance(n, (ir.Ramp, ir.Broadcast, ir.HReduce)):
                    return True
                if isinstance(n, ir.Var) and n.sym.lanes > 1:
                    return True
    return False


def widen(value, lanes: int, dtype) -> np.ndarray:
    """`value` as a vector: arrays are vectors already; scalars fill every lane."""
    if isinstance(value, np.ndarray):
        return value
    return np.full(lanes, value, dtype)


class VectorCompiler:
    """Closures for vector nodes; mixed into `interpret_compile.Compiler`, whose
    `expr`, `var`, `tensor_slot` and `kernel` it uses."""

    def vector_expr(self, e: ir.Expr) -> Code:
        """The closure of a vector node (or an `HReduce`):

            Ramp(i * 8, 1, 4)  ->  lambda env: env[k_i] * 8 + array([0, 1, 2, 3])
        """
        lanes = self.vector_lanes(e)
        match e:
            case ir.Ramp(base, stride, n):
                steps = np.arange(n, dtype=np.int64) * np.int64(stride)
                b = self.expr(base)
                return lambda env: b(env) + steps
            case ir.Broadcast(value, n):
                v, dtype = self.expr(value), _dtype(e.type)
                return lambda env: np.full(n, v(env), dtype)
            case ir.HReduce(op, value, t):
                f, x = vops.hreduce_fn(op, t), self.expr(value)
                return lambda env: f(x(env))
            case ir.Shuffle(a, b, mask):
                x, y, picks = self.expr(a), self.expr(b), np.array(mask, np.int64)
                return lambda env: np.concatenate((x(env), y(env)))[picks]
            case ir.Var(sym):
                return self.var(sym)
            case ir.Load():
                return self.vector_load(e, lanes)
            case ir.Binary():
                return self.vector_binary(e, lanes)
            case ir.Unary(op, operand):
                f, x = vops.unary_fn(op, operand.type), self.expr(operand)
                return lambda env: f(x(env))
            case ir.Cast(value, t):
                f, x = vops.cast_fn(value.type, t), self.expr(value)
                return lambda env: f(x(env))
            case ir.Fma(a, b, c, t):
                f, x, y, z = vops.fma_fn(t), self.expr(a), self.expr(b), self.expr(c)
                return lambda env: f(x(env), y(env), z(env))
            case ir.Select():
                return self.vector_select(e, lanes)
            case ir.TargetOp():
                return self.expr(fallback(e))  # lane by lane, as the instruction's result lanes
        raise TypeError(f"the interpreter cannot evaluate a {lanes}-lane {type(e).__name__}")

    def vector_lanes(self, e: ir.Expr) -> int:
        """The lane count of `e`; its vector operands must agree (the verifier's rule)."""
        if isinstance(e, (ir.Ramp, ir.Broadcast, ir.Shuffle)):  # lanes of their own
            return lanes_of(e)
        widths = {lanes_of(c) for c in child_exprs(e)} - {1}
        if len(widths) > 1:
            raise TypeError(f"the interpreter cannot mix lane counts {sorted(widths)} in one "
                            f"{type(e).__name__}")
        return lanes_of(e)

    def scalar_expr(self, e: ir.Expr, what: str) -> Code:
        """`expr(e)` for a place that takes a scalar (loop bounds, conditions)."""
        if self.vectors and lanes_of(e) > 1:
            raise TypeError(f"the interpreter needs a scalar {what}, got {lanes_of(e)} lanes")
        return self.expr(e)

    def vector_binary(self, e: ir.Binary, lanes: int) -> Code:
        """Lane-wise `lhs op rhs` (`interpret_vector_ops.binary_fn`), or `and`/`or`."""
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        if e.op in ("and", "or"):
            return self.vector_logic(e, lanes, lhs, rhs)
        f = vops.binary_fn(e.op, e.lhs.type)
        return lambda env: f(lhs(env), rhs(env))

    def vector_logic(self, e: ir.Binary, lanes: int, lhs, rhs) -> Code:
        """A vector lhs: both sides, combined lane-wise. A scalar lhs short-circuits
        as in scalar code (`a and b` is `b if a else False`), then fills the lanes."""
        is_and = e.op == "and"
        if lanes_of(e.lhs) > 1:
            combine = np.logical_and if is_and else np.logical_or
            return lambda env: combine(lhs(env), rhs(env))

        def short_circuit(env):
            first = lhs(env)
            if bool(first) != is_and:  # `False and ...`, `True or ...`
                return np.full(lanes, first, np.bool_)
            return widen(rhs(env), lanes, np.bool_)

        return short_circuit

    def vector_select(self, e: ir.Select, lanes: int) -> Code:
        """A vector condition picks lane by lane (both sides evaluated); a scalar
        one evaluates only the chosen side, then fills the lanes."""
        test, x, y = self.expr(e.cond), self.expr(e.a), self.expr(e.b)
        if lanes_of(e.cond) > 1:
            return lambda env: np.where(test(env), x(env), y(env))
        dtype = _dtype(e.type)
        return lambda env: widen(x(env) if test(env) else y(env), lanes, dtype)

    # ------------------------------------------------------------- memory

    def vector_load(self, e: ir.Load, lanes: int) -> Code:
        """A gather: lanes where the mask is false are not read, and are 0."""
        ts = self.tensor_slot(e.tensor)
        index = self.vector_indexer(e.tensor, e.indices, e.mask, lanes, e.span or self.span)
        dtype = _dtype(value_type(e.tensor.dtype))
        widen_f16 = e.tensor.dtype == F16

        def load(env):
            ix, active = index(env)
            arr = env[ts]
            if active is None:
                out = arr[ix]
                if not isinstance(out, np.ndarray):  # only scalar indices: one element
                    return np.full(lanes, out, dtype)
                return out.astype(dtype) if widen_f16 else out
            out = np.zeros(lanes, dtype)
            out[active] = arr[_active(ix, active)]
            return out

        return load

    def vector_store(self, s: ir.Store, lanes: int) -> Code:
        """A scatter: active lanes only, in increasing lane order (the last wins)."""
        ts, value = self.tensor_slot(s.tensor), self.expr(s.value)
        index = self.vector_indexer(s.tensor, s.indices, s.mask, lanes, s.span or self.span)
        distinct = any(_distinct_lanes(i) for i in s.indices)  # no two lanes can collide

        def store(env):
            v = value(env)
            ix, active = index(env)
            count = lanes
            if active is not None:
                ix, count = _active(ix, active), int(np.count_nonzero(active))
                v = v[active] if isinstance(v, np.ndarray) else v
            arr = env[ts]
            if distinct or _all_distinct(ix, count, arr.shape):
                arr[ix] = v  # numpy rounds f32 -> f16 to nearest even, as scalar stores do
                return
            for lane in range(count):
                arr[_lane(ix, lane)] = v[lane] if isinstance(v, np.ndarray) else v

        return store

    def vector_indexer(self, tensor: ir.TensorParam, indices, mask, lanes: int, span) -> Code:
        """A closure giving (indices, active lanes): each index a scalar or a vector,
        `active` None for all lanes or a bool vector. Active lanes are bounds-checked
        (raising the scalar `IndexError` for the lowest bad lane); inactive ones not."""
        k = self.tensor_slot(tensor) + 1
        fns = [self.expr(i) for i in indices]
        active_fn = None if mask is None else self.expr(mask)
        fail = ops.out_of_bounds(self.kernel.name, tensor, span)

        def index(env):
            ix = tuple(f(env) for f in fns)
            active = None
            if active_fn is not None:
                active = widen(active_fn(env), lanes, np.bool_)
                if active.all():
                    active = None
                elif not active.any():
                    return ix, active  # nothing is read: nothing to check
            shape = env[k]
            for i, n in zip(ix, shape):
                if not isinstance(i, np.ndarray):
                    inside = 0 <= i < n
                elif active is None:
                    inside = i.view(np.uint64).max() < n  # negative indices wrap to huge
                else:
                    inside = not (i.view(np.uint64) >= n)[active].any()
                if not inside:
                    _fail_lowest(ix, active, shape, lanes, fail)
            return ix, active

        return index


def _fail_lowest(ix: tuple, active, shape, lanes: int, fail) -> None:
    """Raise for the lowest active lane with an index out of bounds."""
    bad = np.zeros(lanes, np.bool_)
    for i, n in zip(ix, shape):
        bad |= (np.asarray(i) < 0) | (np.asarray(i) >= n)
    if active is not None:
        bad &= active
    fail(_lane(ix, int(np.argmax(bad))), shape)


def _lane(ix: tuple, lane: int) -> tuple:
    return tuple(i[lane] if isinstance(i, np.ndarray) else i for i in ix)


def _active(ix: tuple, active: np.ndarray) -> tuple:
    return tuple(i[active] if isinstance(i, np.ndarray) else i for i in ix)


def _distinct_lanes(e: ir.Expr) -> bool:
    """Does `e` differ in every lane (a ramp with a nonzero stride, plus or minus
    scalars)? Then so do the elements a store with this index names."""
    match e:
        case ir.Ramp(stride=stride, lanes=n):
            return stride != 0 and abs(stride) * (n - 1) < 2**63  # no two lanes equal mod 2**64
        case ir.Binary("+" | "-", lhs, rhs):
            if lanes_of(rhs) == 1:
                return _distinct_lanes(lhs)
            return e.op == "+" and lanes_of(lhs) == 1 and _distinct_lanes(rhs)
    return False


def _all_distinct(ix: tuple, count: int, shape) -> bool:
    """Do the (in-bounds) lanes of `ix` name different elements? Then one numpy
    scatter does what storing lane by lane would."""
    if count <= 1:
        return True
    vectors = [i for i in ix if isinstance(i, np.ndarray)]
    if not vectors:
        return False
    if len(vectors) == 1:
        key = vectors[0]
    else:
        try:
            key = np.ravel_multi_index(np.broadcast_arrays(*ix), shape)
        except ValueError:  # a shape too large to linearize: compare tuples
            return len({_lane(ix, lane) for lane in range(count)}) == count
    step = key[1:] - key[:-1]
    if (step > 0).all() or (step < 0).all():
        return True
    return np.unique(key).size == count


def _dtype(t) -> type:
    return ops.NP_TYPES[t]
