"""What the type checker knows while it walks one function body.

`Frame` is a lexical scope (a kernel's parameters, a loop body, the free indices
of an index-notation statement, an inlined callee). `FunctionContext` holds what
is shared across a whole kernel: the diagnostics, the locals, the statements that
inlined calls emit ahead of the current statement, and the call stack.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dsl.grammar import ast
from dsl.grammar.diagnostics import DiagnosticBag

from .. import ir
from ..machine import Machine
from ..types import ScalarType


@dataclass
class Frame:
    """Names visible in one scope: values (an IR expr) and tensors."""

    values: dict[str, ir.Expr] = field(default_factory=dict)
    tensors: dict[str, ir.TensorParam] = field(default_factory=dict)
    # For tensors seen through an inlined call: the callee's dims in caller terms.
    tensor_dims: dict[str, tuple[ir.Expr, ...]] = field(default_factory=dict)
    # For an inlined callee's dims: where each got its value ("'x' axis 0").
    dim_origins: dict[str, str] = field(default_factory=dict)
    loop_vars: set[str] = field(default_factory=set)
    readonly: dict[str, str] = field(default_factory=dict)  # name -> what it is
    parent: "Frame | None" = None
    barrier: bool = False  # an inlined callee does not see its caller's names

    def child(self, barrier: bool = False) -> "Frame":
        return Frame(parent=self, barrier=barrier)

    def lookup_value(self, name: str) -> ir.Expr | None:
        frame = self
        while frame is not None:
            if name in frame.values:
                return frame.values[name]
            frame = None if frame.barrier else frame.parent
        return None

    def lookup_tensor(self, name: str) -> ir.TensorParam | None:
        frame = self
        while frame is not None:
            if name in frame.tensors:
                return frame.tensors[name]
            frame = None if frame.barrier else frame.parent
        return None

    def dims_of(self, name: str) -> tuple[ir.Expr, ...] | None:
        frame = self
        while frame is not None:
            if name in frame.tensor_dims:
                return frame.tensor_dims[name]
            frame = None if frame.barrier else frame.parent
        return None

    def readonly_reason(self, name: str) -> str | None:
        frame = self
        while frame is not None:
            if name in frame.readonly:
                return frame.readonly[name]
            frame = None if frame.barrier else frame.parent
        return None

    def visible_names(self) -> set[str]:
        names: set[str] = set()
        frame = self
        while frame is not None:
            names |= set(frame.values) | set(frame.tensors)
            frame = None if frame.barrier else frame.parent
        return names


@dataclass
class Locals:
    """The locals of one function body (kernel-scoped, like Python's).

    A local first given a literal (`acc = 0.0`) takes the type of the first real
    value assigned to it (`acc += x[i]` with f64 `x`), and has that type from its
    first assignment on. `infer.py` finds these types by checking the body again
    until they settle: `known_types` holds the previous pass's answer, `found`
    this pass's. A local assigned exactly once, with a literal, is a named
    constant: wherever it is read it is that literal (weak, exact).
    """

    syms: dict[str, ir.Sym] = field(default_factory=dict)
    known_types: dict[str, ScalarType] = field(default_factory=dict)
    assign_counts: dict[str, int] = field(default_factory=dict)
    # True for the last-resort pass: a literal-first local not in known_types
    # takes its literal's default type at once (no provisional, weak reads).
    settled: bool = False
    # Locals still provisional (read as weak values) in this pass: name -> 'int'/'float'.
    pending: dict[str, str] = field(default_factory=dict)
    # Syms replaced when a provisional local met its real type (old -> new).
    remap: dict[ir.Sym, ir.Sym] = field(default_factory=dict)
    literal_kind: dict[str, str] = field(default_factory=dict)  # literal-first locals
    resolved: set[str] = field(default_factory=set)  # ... that have met a real value
    found: dict[str, ScalarType] = field(default_factory=dict)  # ... and their types
    constants: dict[str, object] = field(default_factory=dict)  # name -> weak TExpr

    def is_local(self, name: str) -> bool:
        return name in self.syms or name in self.constants


@dataclass
class FunctionContext:
    bag: DiagnosticBag
    functions: dict[str, ast.FunctionDef]
    call_stack: list[ast.FunctionDef] = field(default_factory=list)
    prelude: list[ir.Stmt] = field(default_factory=list)
    # Per function (by id): the functions its module sees, when modules differ.
    scopes: dict[int, dict[str, ast.FunctionDef]] = field(default_factory=dict)
    # Per function (by id): the settled types of its literal-first locals.
    local_types: dict[int, dict[str, ScalarType]] = field(default_factory=dict)
    # The machine compiled for, which target intrinsics are checked against (None: unknown).
    machine: Machine | None = None

    def take_prelude(self) -> list[ir.Stmt]:
        out, self.prelude = self.prelude, []
        return out

    def scratch(self) -> "FunctionContext":
        """A context for a trial pass: its own diagnostics, the same caches."""
        return FunctionContext(DiagnosticBag(), self.functions, list(self.call_stack),
                               scopes=self.scopes, local_types=self.local_types, machine=self.machine)

    def adopt(self, trial: "FunctionContext") -> None:
        """Keep the diagnostics of a trial pass whose result is kept."""
        for d in trial.bag.items:
            if d not in self.bag.items:
                self.bag.items.append(d)

    def namespace(self, fn: ast.FunctionDef) -> dict[str, ast.FunctionDef]:
        """The functions visible inside `fn` (its own module's view)."""
        return self.scopes.get(id(fn), self.functions)
