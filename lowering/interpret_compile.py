"""The closure compiler behind the reference interpreter (`interpret.py`).

Each IR node becomes a Python closure taking the environment: a list with one
slot per symbol and two per tensor (the array and its shape). `match` on node
types runs here, once per node, never while the kernel runs. Scalar semantics
come from `interpret_ops.py`; vector nodes (lanes > 1) are compiled by the
`VectorCompiler` half in `interpret_vector.py`.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Callable

import numpy as np

from . import interpret_ops as ops
from . import ir
from .interpret_vector import VectorCompiler, has_vectors, widen
from .loops import identity
from .target_ops import fallback
from .printer import kernel_namer
from .rewrite import stmt_exprs
from .types import F16
from .vector import lanes_of

Env = list
Code = Callable[[Env], object]
UNSET = object()  # the value of a slot nothing has written yet
_CHUNK = 1 << 14  # loop indices are made in numpy batches of this size


class CheckFailed(Exception):
    """A `Check` was false: the kernel stopped with status `code + 1`."""

    def __init__(self, kernel_name: str, code: int, info: ir.CheckInfo):
        self.kernel_name = kernel_name
        self.code = code
        self.info = info
        at = f" at {info.span.location}" if info.span is not None else ""
        super().__init__(f"kernel '{kernel_name}': check #{code} failed ({info.kind}): {info.message}{at}")


class EnvView(Mapping):
    """What a trace hook sees: current values by printed name (as `format_kernel`
    names symbols, so `i.1` is the second `i`), and tensors by parameter name."""

    def __init__(self, env: Env, slots: dict[str, int]):
        self._env = env
        self._slots = slots

    def __getitem__(self, name: str):
        value = self._env[self._slots[name]]
        if value is UNSET:
            raise KeyError(name)
        return value

    def __iter__(self):
        return (n for n, k in self._slots.items() if self._env[k] is not UNSET)

    def __len__(self) -> int:
        return sum(1 for _ in self)


@dataclass
class Compiled:
    """A compiled kernel: `body(env)` runs it once `params` (param, slot) are bound."""

    kernel: ir.Kernel
    size: int
    params: list
    body: Code
    views: list = ()  # (field view of a quantized parameter, slot): bound from the parameter


def _int64_range(start: int, stop: int, step: int):
    """The loop variable's values as np.int64 (iterating an arange is cheap),
    made in chunks so a long loop does not allocate all its indices at once."""
    values = range(start, stop, step)
    if len(values) <= _CHUNK:
        return np.arange(start, stop, step, dtype=np.int64)
    chunks = (values[k:k + _CHUNK] for k in range(0, len(values), _CHUNK))
    return itertools.chain.from_iterable(np.arange(c.start, c.stop, c.step, dtype=np.int64) for c in chunks)


def _points(env: Env, slots: list[int], extents: list[Code]):
    """Bind free indices to every point of their extents, row-major; yield each."""
    sizes = [int(f(env)) for f in extents]
    for point in itertools.product(*(np.arange(n, dtype=np.int64) for n in sizes)):
        for k, v in zip(slots, point):
            env[k] = v
        yield


class Compiler(VectorCompiler):
    """Turns IR nodes into closures; `match` runs here, once per node."""

    def __init__(self, kernel: ir.Kernel, trace):
        self.kernel = kernel
        self.vectors = has_vectors(kernel)  # if not, no node needs its lanes counted
        self.trace = trace
        self.slots: dict[ir.Sym, int] = {}
        self.tensor_slots: dict[ir.TensorParam, int] = {}
        self.size = 0
        self.span = kernel.span  # of the statement being compiled, for messages

    def build(self) -> Compiled:
        k = self.kernel
        params = [(p, self.tensor_slot(p) if isinstance(p, ir.TensorParam) else self.slot(p.sym))
                  for p in k.params]
        self.view_slots: dict[str, int] = {}
        body = self.block(k.body)
        if self.trace is not None:
            names = kernel_namer(k)
            self.view_slots.update({t.name: self.tensor_slots[t] for t in k.tensors})
            self.view_slots.update({names(s): slot for s, slot in self.slots.items()})
        views = [(t, slot) for t, slot in self.tensor_slots.items() if t.view is not None]
        return Compiled(k, self.size, params, body, views)

    def slot(self, sym: ir.Sym) -> int:
        if sym not in self.slots:
            self.slots[sym] = self.size
            self.size += 1
        return self.slots[sym]

    def tensor_slot(self, tensor: ir.TensorParam) -> int:
        if tensor not in self.tensor_slots:
            self.tensor_slots[tensor] = self.size
            self.size += 2
        return self.tensor_slots[tensor]

    # ---------------------------------------------------------- statements

    def block(self, body) -> Code:
        fns = tuple(self.stmt(s) for s in body)
        if len(fns) == 1:
            return fns[0]

        def run_block(env):
            for fn in fns:
                fn(env)

        return run_block

    def stmt(self, s: ir.Stmt) -> Code:
        outer = self.span
        self.span = getattr(s, "span", None) or outer
        try:
            fn = self.compile_stmt(s)
        finally:
            self.span = outer
        return fn if self.trace is None else self.traced(s, fn)

    def traced(self, s: ir.Stmt, fn: Code) -> Code:
        trace, slots = self.trace, self.view_slots

        def run_traced(env):
            trace(s, EnvView(env, slots))
            fn(env)

        return run_traced

    def compile_stmt(self, s: ir.Stmt) -> Code:
        match s:
            case ir.For():
                return self.loop(s)
            case ir.If(cond, then, orelse):
                test, yes, no = self.scalar_expr(cond, "if condition"), self.block(then), self.block(orelse)

                def run_if(env):
                    if test(env):
                        yes(env)
                    else:
                        no(env)

                return run_if
            case ir.Assign(sym, value):
                k, value_fn = self.slot(sym), self.assigned_value(sym, value)

                def run_assign(env):
                    env[k] = value_fn(env)

                return run_assign
            case ir.Store():
                return self.store(s)
            case ir.Check():
                return self.check(s)
            case ir.Alloc():
                return self.alloc(s)
            case ir.LocalArray(buffer):
                return self.local_array(buffer)
            case ir.Prefetch() | ir.Realign():
                return lambda env: None  # a hint to the cache, or the same values from an aligned copy
            case ir.IndexStore(indices, store):
                slots = [self.slot(sym) for sym, _ in indices]
                extents = [self.scalar_expr(x, "extent") for _, x in indices]
                body = self.store(store)

                def run_index_store(env):
                    for _ in _points(env, slots, extents):
                        body(env)

                return run_index_store
        raise TypeError(f"the interpreter cannot run {type(s).__name__}")

    def loop(self, s: ir.For) -> Code:
        k, step = self.slot(s.var), s.step
        start, stop = self.scalar_expr(s.start, "loop start"), self.scalar_expr(s.stop, "loop stop")
        body = self.block(s.body)

        def run_for(env):
            for v in _int64_range(int(start(env)), int(stop(env)), step):
                env[k] = v
                body(env)

        return run_for

    def alloc(self, s: ir.Alloc) -> Code:
        ts, size = self.tensor_slot(s.buffer), self.scalar_expr(s.size, "allocation size")
        dtype = np.dtype(ops.NP_TYPES[s.buffer.dtype])

        def run_alloc(env):
            n = int(size(env))
            # Undefined contents: NaN (or a large integer) makes a read before a write show.
            env[ts] = np.full(n, np.nan if dtype.kind == "f" else 0x5A5A, dtype=dtype)
            env[ts + 1] = (n,)

        return run_alloc

    def local_array(self, buffer: ir.TensorParam) -> Code:
        ts, shape = self.tensor_slot(buffer), tuple(buffer.dims)
        dtype = np.dtype(ops.NP_TYPES[buffer.dtype])

        def run_local_array(env):
            env[ts] = np.zeros(shape, dtype=dtype)
            env[ts + 1] = shape

        return run_local_array

    def check(self, s: ir.Check) -> Code:
        cond, code, name = self.scalar_expr(s.cond, "check condition"), s.code, self.kernel.name
        checks = self.kernel.checks
        info = checks[code] if 0 <= code < len(checks) else ir.CheckInfo("unknown", "no such check", s.span)

        def run_check(env):
            if not cond(env):
                raise CheckFailed(name, code, info)

        return run_check

    def store(self, s: ir.Store) -> Code:
        if self.vectors:
            widths = {lanes_of(x) for x in stmt_exprs(s)} - {1}
            if len(widths) > 1:
                raise TypeError(f"the interpreter cannot mix lane counts {sorted(widths)} in one Store")
            if widths:
                return self.vector_store(s, widths.pop())
        ts, value = self.tensor_slot(s.tensor), self.expr(s.value)
        index = self.indexer(s.tensor, s.indices, s.span or self.span)

        def run_store(env):
            env[ts][index(env)] = value(env)  # numpy rounds f32 -> f16 to nearest even

        return run_store

    # --------------------------------------------------------- expressions

    def assigned_value(self, sym: ir.Sym, value: ir.Expr) -> Code:
        """The value of an `Assign`: a vector local gets a vector (a scalar fills its lanes)."""
        if not self.vectors:
            return self.expr(value)
        lanes = lanes_of(value)
        if lanes not in (1, sym.lanes):
            raise TypeError(f"the interpreter cannot assign a {lanes}-lane value to a "
                            f"{sym.lanes}-lane variable '{sym.name}'")
        fn = self.expr(value)
        if sym.lanes == 1 or lanes > 1:
            return fn
        n, dtype = sym.lanes, ops.NP_TYPES[sym.type]
        return lambda env: widen(fn(env), n, dtype)

    def expr(self, e: ir.Expr) -> Code:
        if self.vectors and lanes_of(e) > 1:
            return self.vector_expr(e)
        match e:
            case ir.Const(value, t):
                c = ops.const_value(value, t)
                return lambda env: c
            case ir.Var(sym):
                return self.var(sym)
            case ir.Shape(tensor, axis):
                k = self.tensor_slot(tensor) + 1
                return lambda env: np.int64(env[k][axis])
            case ir.Load():
                return self.load(e)
            case ir.Binary():
                return self.binary(e)
            case ir.Unary(op, operand):
                f, x = ops.unary_fn(op, operand.type), self.expr(operand)
                return lambda env: f(x(env))
            case ir.Cast(value, t):
                f, x = ops.cast_fn(value.type, t), self.expr(value)
                return lambda env: f(x(env))
            case ir.Fma(a, b, c, t):
                f, x, y, z = ops.fma_fn(t), self.expr(a), self.expr(b), self.expr(c)
                return lambda env: f(x(env), y(env), z(env))
            case ir.Select(cond, a, b):
                test, x, y = self.expr(cond), self.expr(a), self.expr(b)
                return lambda env: x(env) if test(env) else y(env)
            case ir.Overlaps(a, b):
                ka, kb = self.tensor_slot(a), self.tensor_slot(b)
                return lambda env: ops.overlaps(env[ka], env[kb])
            case ir.TargetOp():
                return self.expr(fallback(e))  # the instruction's meaning, in plain arithmetic
            case ir.Threads():
                return lambda env: np.int64(1)  # the interpreter runs parallel loops serially
            case ir.UnitStrides():
                slots = [self.tensor_slot(t) for t in self.kernel.tensors if t.rank > 0]
                return lambda env: np.bool_(all(ops.unit_inner_stride(env[k]) for k in slots))
            case ir.AlignGap(tensor, indices, nbytes):
                ts, fns = self.tensor_slot(tensor), [self.expr(i) for i in indices]
                return lambda env: ops.align_gap(env[ts], [f(env) for f in fns], nbytes)
            case ir.Reduce():
                return self.reduce(e)
            case ir.Ramp() | ir.Broadcast() | ir.HReduce() | ir.Shuffle():
                return self.vector_expr(e)
        raise TypeError(f"the interpreter cannot evaluate {type(e).__name__}")

    def var(self, sym: ir.Sym) -> Code:
        k = self.slot(sym)
        if sym.role != "local":
            return operator.itemgetter(k)
        message = f"kernel '{self.kernel.name}': local '{sym.name}' read before it was assigned"

        def read_local(env):
            value = env[k]
            if value is UNSET:
                raise UnboundLocalError(message)
            return value

        return read_local

    def binary(self, e: ir.Binary) -> Code:
        lhs, rhs = self.expr(e.lhs), self.expr(e.rhs)
        if e.op == "and":
            return lambda env: lhs(env) and rhs(env)
        if e.op == "or":
            return lambda env: lhs(env) or rhs(env)
        f = ops.binary_fn(e.op, e.lhs.type)
        if isinstance(e.rhs, ir.Const):  # common (i + 1, x * 2.0): one call fewer
            c = ops.const_value(e.rhs.value, e.rhs.type)
            return lambda env: f(lhs(env), c)
        return lambda env: f(lhs(env), rhs(env))

    def load(self, e: ir.Load) -> Code:
        ts = self.tensor_slot(e.tensor)
        index = self.indexer(e.tensor, e.indices, e.span or self.span)
        if e.tensor.dtype == F16:
            widen = np.float32
            return lambda env: widen(env[ts][index(env)])
        return lambda env: env[ts][index(env)]

    def indexer(self, tensor: ir.TensorParam, indices, span) -> Code:
        """A closure giving the bounds-checked numpy index of an element."""
        k = self.tensor_slot(tensor) + 1
        fns = [self.expr(i) for i in indices]
        fail = ops.out_of_bounds(self.kernel.name, tensor, span)
        if len(fns) == 1:
            (f0,) = fns

            def index1(env):
                i = f0(env)
                if 0 <= i < env[k][0]:
                    return i
                fail((i,), env[k])

            return index1
        if len(fns) == 2:  # matrices are common enough to skip the generic tuple-building
            f0, f1 = fns

            def index2(env):
                i, j = f0(env), f1(env)
                shape = env[k]
                if 0 <= i < shape[0] and 0 <= j < shape[1]:
                    return i, j
                fail((i, j), shape)

            return index2

        def index_n(env):
            ix = tuple(f(env) for f in fns)
            for i, n in zip(ix, env[k]):
                if not 0 <= i < n:
                    fail(ix, env[k])
            return ix

        return index_n

    def reduce(self, e: ir.Reduce) -> Code:
        slots = [self.slot(sym) for sym, _ in e.indices]
        extents = [self.expr(x) for _, x in e.indices]
        body = self.expr(e.body)
        combine = ops.binary_fn("+" if e.op == "sum" else e.op, e.type)
        start = ops.const_value(identity(e.op, e.type), e.type)

        def run_reduce(env):
            acc = start
            for _ in _points(env, slots, extents):
                acc = combine(acc, body(env))
            return acc

        return run_reduce

