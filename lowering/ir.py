"""The kernel IR and the loop IR: typed, resolved, with spans.

One set of nodes serves both levels. The type checker produces the *kernel IR*,
which may still hold index-notation statements (`IndexStore`) and reductions
(`Reduce`). `lowering.loops` turns those into explicit loops; what remains is the
*loop IR*, which the scheduling transforms rewrite and the LLVM backend compiles.
`lowering.verify` states the invariants of each level. The vector nodes
(`ir_vector.py`) and the parameters, kernels and programs (`ir_kernel.py`)
live in modules of their own; this one re-exports them.

Variables are unique `Sym`s (compared by identity), so a transform that copies or
renames code cannot capture a name. Every value has a `ScalarType` (its element
type); vector values (from the `vectorize` transform) have `lanes > 1`, computed
by `lowering.vector.lanes_of`: a `Ramp`, a `Broadcast`, a vector local, or any
operation with a vector operand (scalar operands are broadcast implicitly).

    expr := Const | Var | Shape | Load | Binary | Unary | Cast | Fma | Select | TargetOp
          | Overlaps | Threads | UnitStrides | AlignGap | Ramp | Broadcast | HReduce | Shuffle (vectors)
          | Reduce (kernel IR only)
    stmt := For | If | Assign | Store | Check | Alloc | LocalArray | Prefetch | Realign
          | IndexStore (kernel IR only)
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

from dsl.grammar.diagnostics import Span

from .types import BOOL, I64, ScalarType
from .ir_kernel import (CheckInfo, Kernel, KernelOptions, Param, Program,  # noqa: F401 (part of the IR)
                        ScalarParam, TensorParam)
from .ir_vector import Broadcast, HReduce, Ramp, Shuffle  # noqa: F401 (part of the IR)

_ids = itertools.count()


@dataclass(frozen=True, eq=False, slots=True)
class Sym:
    """A unique variable: a loop index, a local, a scalar parameter or a dim.

    `role` is 'loop', 'local', 'scalar', 'dim', 'index' (a free index of index
    notation) or 'tensor'.
    """

    name: str
    type: ScalarType
    role: str
    id: int = field(default_factory=lambda: next(_ids))
    lanes: int = field(default=1, kw_only=True)  # > 1: a vector local (vectorize)

    def __repr__(self) -> str:
        return f"{self.name}#{self.id}"


def fresh(like: Sym, name: str | None = None) -> Sym:
    """A new symbol with the same type and role (for transforms that copy code)."""
    return Sym(name or like.name, like.type, like.role, lanes=like.lanes)


# ----------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Const:
    value: int | float | bool
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Var:
    sym: Sym
    span: Span | None = None

    @property
    def type(self) -> ScalarType:
        return self.sym.type


@dataclass(frozen=True, slots=True)
class Shape:
    """The runtime size of `tensor`'s axis `axis` (an i64)."""

    tensor: "TensorParam"
    axis: int
    span: Span | None = None
    type: ScalarType = I64


@dataclass(frozen=True, slots=True)
class Load:
    """`tensor[indices]`; the result has the tensor's value type (f16 -> f32)."""

    tensor: "TensorParam"
    indices: tuple["Expr", ...]
    type: ScalarType
    span: Span | None = None
    safe: bool = False  # proven in bounds (set by `guard.mark_proven`)
    mask: "Expr | None" = None  # vector loads: only lanes where the mask is true


@dataclass(frozen=True, slots=True)
class Binary:
    """Arithmetic (+ - * / // % & | ^ << >>), comparison (== != < <= > >=),
    logical (and or, short-circuit), min and max. Both operands have one type;
    the result has it too, except comparisons (bool)."""

    op: str
    lhs: "Expr"
    rhs: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Unary:
    """neg, not, invert (~), and the one-argument intrinsics: abs exp log sqrt
    rsqrt tanh erf floor ceil rint (ties to even). `bits` (float -> int of its width) and
    `from_bits` (int -> float) reinterpret the bits; the others keep the type.
    `opaque` (scalar ints, made by the compiler only) is the value unchanged,
    which the optimizer may not relate to other values."""

    op: str
    operand: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class TargetOp:
    """A target intrinsic (`x86.maddubs`, `x86.madd`, `x86.sign`, `arm.sdot`; see
    `lowering.target_ops`): one machine instruction, whose meaning on each lane
    is the plain integer arithmetic of `target_ops.fallback`. On vectors, each
    lane's operands are a pair (or quad) of adjacent values, as the
    instruction takes them; the back-end interleaves them."""

    name: str
    args: tuple["Expr", ...]
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Cast:
    value: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Fma:
    """a * b + c with one rounding."""

    a: "Expr"
    b: "Expr"
    c: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Select:
    """`a if cond else b`: only the chosen side is evaluated."""

    cond: "Expr"
    a: "Expr"
    b: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Overlaps:
    """True when the memory of two tensors may overlap (used by entry checks)."""

    a: "TensorParam"
    b: "TensorParam"
    span: Span | None = None
    type: ScalarType = BOOL


@dataclass(frozen=True, slots=True)
class Threads:
    """The number of threads a parallel loop runs on (an i64 >= 1; 1 in the
    interpreter). Lets a transform cut work into as many pieces as threads."""

    span: Span | None = None
    type: ScalarType = I64


@dataclass(frozen=True, slots=True)
class UnitStrides:
    """True when every tensor argument's innermost stride is 1. The backend
    compiles a kernel's body twice, for that case and for any strides
    (backends/llvm/versions.py), and makes this the constant of each copy
    before emitting it: a transform gives the general copy a leaner path
    (`contract` packs every product there, where reading in place would
    build each vector lane by lane). Only in the condition of an `If`, a
    `For`'s `when` or a `Realign`'s `when` (lowering/unit_strides.py folds
    those). The interpreter reads the arrays' strides."""

    span: Span | None = None
    type: ScalarType = BOOL


@dataclass(frozen=True, slots=True)
class AlignGap:
    """The number of elements from `&tensor[indices]` up to the next address
    that is a multiple of `bytes` (0 when it is one; 0 when the address is not
    a multiple of the element size, which no count of elements can align).
    An address only: `indices` may point past the tensor. The head that
    vectorize's `nontemporal=` peels runs this many iterations."""

    tensor: "TensorParam"
    indices: tuple["Expr", ...]
    bytes: int
    span: Span | None = None
    type: ScalarType = I64


@dataclass(frozen=True, slots=True)
class Reduce:
    """Kernel IR only: `op` (sum, max, min) of `body` over the free `indices`."""

    op: str
    indices: tuple[tuple[Sym, "Expr"], ...]
    body: "Expr"
    type: ScalarType
    span: Span | None = None


Expr = (Const | Var | Shape | Load | Binary | Unary | Cast | Fma | Select | Overlaps | Reduce
        | AlignGap | Ramp | Broadcast | HReduce | Shuffle | Threads | UnitStrides | TargetOp)

# ------------------------------------------------------------------ statements


@dataclass(frozen=True, slots=True)
class For:
    """`for var in range(start, stop, step)`; `step` is a nonzero constant.

    `name` is the loop's schedule name (`i`, `i.outer`); `kind` is 'serial'
    until a transform says otherwise ('parallel', 'vector', 'unroll').
    `when` (parallel loops only, like OpenMP's `if` clause): a bool evaluated
    before the loop; when false the iterations run on the calling thread, as
    a serial loop would (the automatic schedule's "enough work" test).
    `unroll` (serial loops only): a hint that LLVM unroll the loop into that
    many copies of the body, the remainder included; 0 leaves it to LLVM.
    """

    var: Sym
    start: Expr
    stop: Expr
    step: int
    body: tuple["Stmt", ...]
    name: str
    kind: str = "serial"
    span: Span | None = None
    when: "Expr | None" = None
    unroll: int = 0


@dataclass(frozen=True, slots=True)
class If:
    cond: Expr
    then: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...] = ()
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Assign:
    """Give the local `sym` a value (locals are mutable, kernel-scoped)."""

    sym: Sym
    value: Expr
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Store:
    tensor: "TensorParam"
    indices: tuple[Expr, ...]
    value: Expr
    span: Span | None = None
    safe: bool = False  # proven in bounds (set by `guard.mark_proven`)
    mask: Expr | None = None  # vector stores: only lanes where the mask is true
    # A contiguous vector store of a stream (vectorize's `nontemporal=`): the
    # backend decides at run time whether it bypasses the cache. Masked (the
    # stream's head or tail, mask `ramp(0, 1, L) < n`), it is stored as plain
    # pieces: a masked store to a line not in the cache is slow (streaming.py).
    nontemporal: bool = False


@dataclass(frozen=True, slots=True)
class Check:
    """If `cond` is false, the kernel stops and returns `kernel.checks[code]`'s id.

    Entry checks (sizes agree, outputs do not overlap inputs) and bounds checks
    are `Check`s, so they are visible in printed IR and run by the interpreter.
    """

    cond: Expr
    code: int
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Prefetch:
    """A hint: the element `tensor[indices]` will soon be read (or, with
    `write`, written), its line wanted in cache `level` (1: the first, or 2,
    3: the outer ones only). No effect on results; the indices may lie
    outside the tensor (nothing is accessed). The interpreter ignores it."""

    tensor: "TensorParam"
    indices: tuple[Expr, ...]
    write: bool = False
    level: int = 1
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Realign:
    """From here to the kernel's end, read the input `tensor` from a copy
    whose data start on a 64-byte line, when `when` holds and the backend
    finds at run time that the tensor's data start inside a line while each
    of its strides (but a unit one) is a whole number of lines, so that the
    copy puts every row on a line. A vector load of a row that starts inside
    a line reads two lines. Only at the kernel's top level, so that the copy
    serves all that follows; the values read do not change (inputs do not
    overlap outputs), so the interpreter ignores it. Memory for the copy
    that runs out stops the kernel with `kernel.checks[code]`."""

    tensor: "TensorParam"
    when: Expr
    code: int
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Alloc:
    """Give the scratch tensor `buffer` (rank 1, unit stride, `scratch=True`) room
    for `size` elements, 64-byte aligned, until the kernel returns.

    Its contents start undefined. Running an `Alloc` again replaces the buffer
    (the old one is freed). If memory runs out, the kernel stops with
    `kernel.checks[code]`. Transforms create these (`contract` packs operands
    into them); the source names its own arrays with `LocalArray`.
    """

    buffer: "TensorParam"
    size: Expr
    code: int
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class LocalArray:
    """`name: f32[4, 8]` in the source: `buffer` (`local=True`, int dims,
    row-major) is all zeros from here on; every run of the statement zeroes it
    again. It lives on the stack of the running function, so each thread of a
    parallel loop that declares it has its own; it cannot fail.
    """

    buffer: "TensorParam"
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class IndexStore:
    """Kernel IR only: `tensor[...] = value` over the free `indices` (index notation)."""

    indices: tuple[tuple[Sym, Expr], ...]
    store: Store
    span: Span | None = None


Stmt = For | If | Assign | Store | Check | Alloc | LocalArray | Prefetch | Realign | IndexStore
