"""The IR verifier: the invariants of the kernel IR and the loop IR, checked.

`verify(kernel, 'kernel')` after type checking, `verify(kernel, 'loops')` after
lowering and after every pass. One walk over the IR (cost linear in its size);
the first violation raises `VerifyError` naming the kernel, the problem, the
node as the printer shows it, and where it came from:

    kernel 'saxpy': operands of '+' differ: f32 and f64: `x[i] + y` at saxpy.tk:4:18

The invariants (docs/semantics.md gives their meaning):
- binary arithmetic, bitwise ops, shifts, min/max: lhs, rhs and result share one
  type; `/` needs floats, bitwise ops ints (`& | ^` also bool), shifts ints;
  comparisons: equal operand types, bool result; `and`/`or`: bool throughout;
- unary: operand type == result type (`not`: bool); float intrinsics on floats,
  `abs` and `neg` on numbers, `invert` on ints and bool;
- no value has type f16; Load gives value_type(dtype); indices are i64 and as
  many as the tensor's rank; Store's value has the tensor's value type and the
  tensor is an output;
- Assign: value type == symbol type, target a local or a dim; For: i64 bounds and
  variable, a nonzero integer step, a known kind; Check: bool, a valid code;
- every variable is defined: a scalar parameter, a dim of the kernel (in loop IR
  also assigned somewhere), the variable of an enclosing loop, a local assigned
  somewhere, or a free index of an enclosing IndexStore / Reduce;
- IndexStore and Reduce appear only in kernel IR.
"""

from __future__ import annotations

import numbers

from . import ir
from .printer import format_node, kernel_namer
from .rewrite import child_exprs, walk_stmts
from .target_ops import SPECS
from .vector import lanes_counter, prefix_count
from .types import BOOL, F16, I64, ScalarType, value_type

LEVELS = ("kernel", "loops")
LOOP_KINDS = frozenset({"serial", "parallel", "vector", "unroll"})
CMP_OPS = frozenset({"==", "!=", "<", "<=", ">", ">="})
LOGIC_OPS = frozenset({"and", "or"})
ARITH_OPS = frozenset({"+", "-", "*", "/", "//", "%", "min", "max"})
BIT_OPS = frozenset({"&", "|", "^", "<<", ">>"})
FLOAT_INTRINSICS = frozenset({"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "floor", "ceil", "rint"})
REDUCE_OPS = frozenset({"sum", "min", "max"})
BITCASTS = frozenset({"bits", "from_bits"})  # same width, float <-> int


class VerifyError(Exception):
    """The IR breaks an invariant: a compiler bug, not a user mistake."""


# Nodes without a lane rule of their own: leaves, and those that make vectors
# from scalars or other widths.
_NO_LANE_RULE = (ir.Const, ir.Var, ir.Shape, ir.Threads, ir.UnitStrides, ir.Ramp, ir.Broadcast, ir.HReduce,
                 ir.Shuffle)


def verify(kernel: ir.Kernel, level: str) -> None:
    """Check `kernel` against the invariants of `level` ('kernel' or 'loops').

        >>> verify(lower_kernel(k), "loops")   # doctest: +SKIP

    Raises `VerifyError` at the first violation; returns None when all hold.
    """
    if level not in LEVELS:
        raise ValueError(f"verify level must be one of {LEVELS}, not {level!r}")
    _Verifier(kernel, level).run()


def verify_program(program: ir.Program, level: str) -> None:
    """`verify` every kernel of `program`."""
    for kernel in program.kernels:
        verify(kernel, level)


class _Verifier:
    def __init__(self, kernel: ir.Kernel, level: str):
        self.kernel = kernel
        self.level = level
        self.tensors = set(kernel.tensors)  # TensorParam hashes by identity
        self.tensors |= {s.buffer for s in walk_stmts(kernel.body) if isinstance(s, (ir.Alloc, ir.LocalArray))}
        self.tensors |= {v for t in kernel.tensors if t.quant is not None for v in t.quant.views.values()}
        self.scalars = {p.sym for p in kernel.params if isinstance(p, ir.ScalarParam)}
        self.dims = set(kernel.dims)
        self.assigned = {s.sym for s in walk_stmts(kernel.body) if isinstance(s, ir.Assign)}
        self.scope: set[ir.Sym] = set()  # loop variables and free indices in scope
        self.where = kernel.span  # span of the statement being checked
        self.lanes_of = lanes_counter()

    def fail(self, node, problem: str):
        try:
            text = format_node(node, kernel_namer(self.kernel))
        except Exception:  # the printer may trip on IR this broken; say what we can
            text = f"<{type(node).__name__}>"
        span = getattr(node, "span", None) or self.where
        at = f" at {span.location}" if span is not None else ""
        raise VerifyError(f"kernel '{self.kernel.name}': {problem}: `{text}`{at}")

    def expect(self, ok: bool, node, problem: str) -> None:
        if not ok:
            self.fail(node, problem)

    # ------------------------------------------------------------- header

    def run(self) -> None:
        k = self.kernel
        names = [p.name for p in k.params]
        if len(set(names)) != len(names):
            raise VerifyError(f"kernel '{k.name}': duplicate parameter names in {names}")
        for p in k.params:
            self.param(p)
        for dim in k.dims:
            if dim.role != "dim" or dim.type != I64:
                raise VerifyError(f"kernel '{k.name}': dim {dim!r} must have role 'dim' and type i64")
        self.block(k.body)

    def param(self, p) -> None:
        name = self.kernel.name
        if isinstance(p, ir.ScalarParam):
            if p.sym.role != "scalar" or p.sym.type == F16:
                raise VerifyError(f"kernel '{name}': scalar parameter '{p.name}' needs role 'scalar' "
                                  f"and a value type, has {p.sym.role!r}, {p.sym.type}")
            return
        for d in p.dims:
            ok = d in self.dims if isinstance(d, ir.Sym) else isinstance(d, int) and d >= 0
            if not ok:
                raise VerifyError(f"kernel '{name}': tensor '{p.name}' has a bad dim {d!r} "
                                  "(not a dim of the kernel or a size >= 0)")

    # ---------------------------------------------------------- statements

    def block(self, body) -> None:
        for s in body:
            self.where = getattr(s, "span", None) or self.where
            self.stmt(s)

    def stmt(self, s) -> None:
        match s:
            case ir.For():
                self.for_(s)
            case ir.If(cond, then, orelse):
                self.typed(cond, BOOL, s, "an if condition")
                self.scalar(cond, s, "an if condition")
                outer = self.where
                self.block(then)
                self.where = outer
                self.block(orelse)
            case ir.Assign(sym, value):
                self.expect(sym.role in ("local", "dim"), s, f"assigns to a {sym.role} symbol")
                self.typed(value, sym.type, s, f"the value assigned to a {sym.type} variable")
                self.expect(self.lanes_of(value) in (1, sym.lanes)
                            and (sym.lanes > 1 or self.lanes_of(value) == 1), s,
                            f"a {self.lanes_of(value)}-lane value assigned to a {sym.lanes}-lane variable")
            case ir.Store():
                self.store(s)
            case ir.Check(cond, code):
                self.typed(cond, BOOL, s, "a check condition")
                self.scalar(cond, s, "a check condition")
                valid = isinstance(code, int) and 0 <= code < len(self.kernel.checks)
                self.expect(valid, s, f"check code {code!r} is not in the table of "
                                      f"{len(self.kernel.checks)} checks")
            case ir.Prefetch(tensor, indices):
                self.access(s, tensor, indices)
                for index in indices:
                    self.scalar(index, s, "a prefetch index")
            case ir.Alloc(buffer, size, code):
                self.expect(buffer.scratch and buffer.rank == 1 and buffer.is_output, s,
                            f"alloc of '{buffer.name}', which is not a rank-1 scratch buffer")
                self.typed(size, I64, s, "an allocation size")
                self.scalar(size, s, "an allocation size")
                valid = isinstance(code, int) and 0 <= code < len(self.kernel.checks)
                self.expect(valid, s, f"alloc code {code!r} is not in the table of checks")
            case ir.Realign(tensor, when, code):
                self.expect(tensor in self.kernel.tensors and not tensor.is_output and tensor.quant is None
                            and any(x is s for x in self.kernel.body), s,
                            f"realign of '{tensor.name}', which is not an input at the kernel's top level")
                self.typed(when, BOOL, s, "a realign condition")
                self.scalar(when, s, "a realign condition")
                valid = isinstance(code, int) and 0 <= code < len(self.kernel.checks)
                self.expect(valid, s, f"realign code {code!r} is not in the table of checks")
            case ir.LocalArray(buffer):
                self.expect(buffer.scratch and buffer.local and buffer.is_output
                            and all(isinstance(d, int) and d > 0 for d in buffer.dims), s,
                            f"local array '{buffer.name}' needs scratch, local and positive int dims")
            case ir.IndexStore(indices, store):
                self.expect(self.level == "kernel", s, "index notation left in loop IR")
                self.expect(isinstance(store, ir.Store), s, "IndexStore must hold a Store")
                self.with_indices(indices, s, lambda: self.store(store))
            case _:
                self.fail(s, f"unknown statement {type(s).__name__}")

    def for_(self, s: ir.For) -> None:
        var = s.var
        self.expect(var.role == "loop" and var.type == I64, s, "a loop variable needs role 'loop' and type i64")
        self.expect(var not in self.scope, s, "the loop variable is already bound by an enclosing loop")
        step_ok = isinstance(s.step, int) and not isinstance(s.step, bool) and s.step != 0
        self.expect(step_ok, s, f"loop step must be a nonzero integer, not {s.step!r}")
        self.expect(s.kind in LOOP_KINDS, s, f"unknown loop kind {s.kind!r}")
        unroll_ok = isinstance(s.unroll, int) and not isinstance(s.unroll, bool) and s.unroll >= 0
        self.expect(unroll_ok, s, f"an unroll hint is a count >= 0, not {s.unroll!r}")
        self.expect(s.unroll == 0 or s.kind == "serial", s, "only a serial loop takes an unroll hint")
        if s.when is not None:
            self.expect(s.kind == "parallel", s, "only a parallel loop has a `when` condition")
            self.typed(s.when, BOOL, s, "a parallel loop's condition")
            self.scalar(s.when, s, "a parallel loop's condition")
        self.typed(s.start, I64, s, "a loop start")
        self.typed(s.stop, I64, s, "a loop stop")
        self.scalar(s.start, s, "a loop start")
        self.scalar(s.stop, s, "a loop stop")
        self.scope.add(var)
        outer = self.where
        self.block(s.body)
        self.where = outer
        self.scope.discard(var)

    def scalar(self, e, owner, what: str) -> None:
        self.expect(self.lanes_of(e) == 1, owner, f"{what} must be a scalar, not a {self.lanes_of(e)}-lane vector")

    def store(self, s: ir.Store) -> None:
        self.expect(s.tensor.is_output, s, f"stores to input tensor '{s.tensor.name}'")
        parts = (*s.indices, s.value) if s.mask is None else (*s.indices, s.value, s.mask)
        widths = {self.lanes_of(x) for x in parts} - {1}
        self.expect(len(widths) <= 1, s, f"store operands with different lane counts {sorted(widths)}")
        if s.mask is not None:
            self.typed(s.mask, BOOL, s, "a store mask")
        self.access(s, s.tensor, s.indices)
        self.typed(s.value, value_type(s.tensor.dtype), s, f"the value stored to {s.tensor.dtype} '{s.tensor.name}'")
        self.expect(not s.nontemporal or (widths and (s.mask is None or prefix_count(s.mask) is not None)), s,
                    "a nontemporal store is a vector store, unmasked or masked by ramp(0, 1, L) < n")

    def access(self, node, tensor, indices) -> None:
        self.expect(tensor in self.tensors, node, f"tensor {tensor!r} is not a parameter of this kernel")
        self.expect(len(indices) == tensor.rank, node,
                    f"'{tensor.name}' has rank {tensor.rank} but is indexed with {len(indices)} indices")
        for index in indices:
            self.typed(index, I64, node, "an index")

    def with_indices(self, indices, node, check_body) -> None:
        """Check free-index extents outside their scope, then the body inside it."""
        for sym, extent in indices:
            self.expect(sym.role == "index" and sym.type == I64, node, "a free index needs role 'index' and type i64")
            self.expect(sym not in self.scope, node, f"free index '{sym.name}' is already bound")
            self.typed(extent, I64, node, "an index extent")
        syms = {sym for sym, _ in indices}
        self.scope |= syms
        check_body()
        self.scope -= syms

    # --------------------------------------------------------- expressions

    def typed(self, e, t: ScalarType, owner, what: str) -> None:
        """Check `e` and that it has type `t`."""
        actual = self.expr(e)
        if actual != t:
            self.fail(owner, f"{what} must be {t}, got {actual}")

    def expr(self, e) -> ScalarType:
        """Check `e` and its sub-expressions; return its type."""
        t = getattr(e, "type", None)
        if not isinstance(t, ScalarType):
            self.fail(e, f"node {type(e).__name__} has no scalar type")
        self.expect(t != F16, e, "f16 is a storage type; no value may have it")
        match e:
            case ir.Const():
                self.const(e)
            case ir.Var(sym):
                self.var(e, sym)
            case ir.Shape(tensor, axis):
                self.expect(tensor in self.tensors, e, f"tensor {tensor!r} is not a parameter of this kernel")
                self.expect(0 <= axis < tensor.rank, e, f"axis {axis} out of range for rank {tensor.rank}")
                self.expect(t == I64, e, "shape() has type i64")
            case ir.Load(tensor, indices):
                self.access(e, tensor, indices)
                self.expect(t == value_type(tensor.dtype), e,
                            f"a load from {tensor.dtype} '{tensor.name}' has type {value_type(tensor.dtype)}, not {t}")
            case ir.Binary():
                self.binary(e)
            case ir.Unary():
                self.unary(e)
            case ir.Cast(value):
                self.expr(value)
            case ir.Fma(a, b, c):
                self.expect(t.is_float, e, f"fma needs a float type, not {t}")
                for x in (a, b, c):
                    self.typed(x, t, e, "an fma operand")
            case ir.Select(cond, a, b):
                self.typed(cond, BOOL, e, "a select condition")
                self.typed(a, t, e, "the first select value")
                self.typed(b, t, e, "the second select value")
            case ir.Threads():
                self.expect(t == I64, e, "threads() has type i64")
            case ir.UnitStrides():
                self.expect(t == BOOL, e, "unit_strides() has type bool")
            case ir.Overlaps(a, b):
                self.expect(a in self.tensors and b in self.tensors, e, "overlaps() of a foreign tensor")
                self.expect(t == BOOL, e, "overlaps() has type bool")
            case ir.AlignGap(tensor, indices, nbytes):
                self.access(e, tensor, indices)
                self.expect(t == I64, e, "align_gap() has type i64")
                self.expect(nbytes > 0 and nbytes & (nbytes - 1) == 0, e, "align_gap() aligns to a power of two")
            case ir.Reduce():
                self.reduce(e)
            case ir.TargetOp(name, args):
                spec = SPECS.get(name)
                self.expect(spec is not None and t == spec.result and len(args) == len(spec.params), e,
                            f"target intrinsic {name} of {len(args)} arguments and type {t}")
                for k, (x, want) in enumerate(zip(args, spec.params if spec else ())):
                    self.typed(x, want, e, f"argument {k + 1} of {name}")
            case ir.Ramp(base, _, lanes) | ir.Broadcast(base, lanes):
                self.expr(base)
                self.expect(self.lanes_of(base) == 1 and 2 <= lanes, e, "ramp/broadcast needs a scalar and >= 2 lanes")
                self.expect(not isinstance(e, ir.Ramp) or base.type == I64, e, "a ramp is i64")
            case ir.Shuffle(a, b, mask):
                self.typed(a, t, e, "the first shuffled vector")
                self.typed(b, t, e, "the second shuffled vector")
                n = self.lanes_of(a)
                self.expect(n >= 2 and self.lanes_of(b) == n and len(mask) >= 2
                            and all(0 <= m < 2 * n for m in mask), e,
                            "shuffle picks >= 2 lanes of two vectors of one lane count")
            case ir.HReduce(op, value):
                self.typed(value, t, e, "the vector reduced")
                self.expect(op in ("+", "*", "min", "max") and self.lanes_of(value) > 1, e,
                            "hreduce combines the lanes of a vector with + * min or max")
            case _:
                self.fail(e, f"unknown expression {type(e).__name__}")
        self.lanes(e)
        return t

    def lanes(self, e) -> None:
        """Vector operands of one operation have one lane count (scalars broadcast)."""
        if isinstance(e, _NO_LANE_RULE):  # (leaves, more than half the nodes: nothing to compare)
            return
        widths = {self.lanes_of(c) for c in child_exprs(e)} - {1}
        self.expect(len(widths) <= 1, e, f"operands with different lane counts {sorted(widths)}")
        if isinstance(e, ir.Load) and e.mask is not None:
            self.typed(e.mask, BOOL, e, "a load mask")

    def const(self, e: ir.Const) -> None:
        t, v = e.type, e.value
        if t.is_bool:
            self.expect(isinstance(v, bool), e, f"a bool constant holds {v!r}")
        elif t.is_float:
            ok = type(v) is float or type(v) is int or (isinstance(v, numbers.Real) and not isinstance(v, bool))
            self.expect(ok, e, f"a {t} constant holds {v!r}")
        else:  # (the ABC checks are slow: ask the common types first)
            ok = type(v) is int or (isinstance(v, numbers.Integral) and not isinstance(v, bool))
            self.expect(ok, e, f"a {t} constant holds {v!r}")
            bits = t.bits - 1 if t.is_signed else t.bits
            lo, hi = (-(1 << bits), (1 << bits) - 1) if t.is_signed else (0, (1 << bits) - 1)
            self.expect(lo <= v <= hi, e, f"constant {v} does not fit in {t}")

    def var(self, e: ir.Var, sym: ir.Sym) -> None:
        match sym.role:
            case "scalar":
                ok, why = sym in self.scalars, "not a scalar parameter of this kernel"
            case "dim":
                ok, why = sym in self.dims, "not a dim of this kernel"
                if ok and self.level == "loops":
                    ok, why = sym in self.assigned, "a dim never assigned (missing entry prologue?)"
            case "local":
                ok, why = sym in self.assigned, "a local never assigned in this kernel"
            case "loop" | "index":
                ok, why = sym in self.scope, f"a {sym.role} variable used outside its scope"
            case _:
                ok, why = False, f"a symbol of role {sym.role!r}, which cannot be read"
        self.expect(ok, e, f"undefined variable, {why}")

    def binary(self, e: ir.Binary) -> None:
        op, t = e.op, e.type
        lt, rt = self.expr(e.lhs), self.expr(e.rhs)
        if op in LOGIC_OPS:
            self.expect(lt == rt == t == BOOL, e, f"'{op}' needs bool operands, got {lt} and {rt}")
            return
        self.expect(lt == rt, e, f"operands of '{op}' differ: {lt} and {rt}")
        if op in CMP_OPS:
            self.expect(t == BOOL, e, f"comparison '{op}' has type bool, not {t}")
            return
        self.expect(lt == t, e, f"'{op}' on {lt} must have type {lt}, not {t}")
        if op == "/":
            self.expect(t.is_float, e, f"'/' needs floats, not {t}")
        elif op in ("&", "|", "^"):
            self.expect(t.is_int or t.is_bool, e, f"'{op}' needs ints or bool, not {t}")
        elif op in BIT_OPS:
            self.expect(t.is_int, e, f"'{op}' needs ints, not {t}")
        elif op in ARITH_OPS:
            self.expect(not t.is_bool, e, f"'{op}' on bool")
        else:
            self.fail(e, f"unknown binary operator {op!r}")

    def unary(self, e: ir.Unary) -> None:
        op, t = e.op, e.type
        operand = self.expr(e.operand)
        if op == "not":
            self.expect(operand == t == BOOL, e, f"'not' needs a bool, got {operand}")
            return
        if op in BITCASTS:
            self.bitcast(e, operand)
            return
        self.expect(operand == t, e, f"'{op}' of {operand} must have type {operand}, not {t}")
        if op in FLOAT_INTRINSICS:
            self.expect(t.is_float, e, f"{op}() needs a float, not {t}")
        elif op in ("neg", "abs"):
            self.expect(t.is_float or t.is_int, e, f"'{op}' needs a number, not {t}")
        elif op == "opaque":
            self.expect(t.is_int and self.lanes_of(e.operand) == 1, e, f"opaque() needs a scalar int, not {t}")
        elif op == "invert":
            self.expect(t.is_int or t.is_bool, e, f"'~' needs an int or bool, not {t}")
        else:
            self.fail(e, f"unknown unary operator {op!r}")

    def bitcast(self, e: ir.Unary, operand: ScalarType) -> None:
        src, dst = (operand, e.type) if e.op == "bits" else (e.type, operand)
        self.expect(src.is_float and dst.is_int and src.bits == dst.bits and dst.bits in (32, 64), e,
                    f"{e.op}() maps between a float and an int of its width, not {operand} -> {e.type}")

    def reduce(self, e: ir.Reduce) -> None:
        self.expect(self.level == "kernel", e, "a reduction left in loop IR")
        self.expect(e.op in REDUCE_OPS, e, f"unknown reduction {e.op!r}")
        self.expect(not e.type.is_bool, e, "a reduction over bool")
        self.with_indices(e.indices, e, lambda: self.typed(e.body, e.type, e, f"the body of a {e.type} reduction"))
