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
from ..types import ScalarType


@dataclass
class Frame:
    """Names visible in one scope: values (an IR expr) and tensors."""

    values: dict[str, ir.Expr] = field(default_factory=dict)
    tensors: dict[str, ir.TensorParam] = field(default_factory=dict)
    # For tensors seen through an inlined call: the callee's dims in caller terms.
    tensor_dims: dict[str, tuple[ir.Expr, ...]] = field(default_factory=dict)
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
    """The locals of one function body (kernel-scoped, like Python's)."""

    syms: dict[str, ir.Sym] = field(default_factory=dict)
    # Types from the inference pass; a local absent here is inferred on the fly.
    known_types: dict[str, ScalarType] = field(default_factory=dict)
    # Inference pass only: locals whose type came from a literal and may still change.
    pending: dict[str, str] = field(default_factory=dict)
    # Syms replaced when a literal-typed local met its real type (old -> new).
    remap: dict[ir.Sym, ir.Sym] = field(default_factory=dict)


@dataclass
class FunctionContext:
    bag: DiagnosticBag
    functions: dict[str, ast.FunctionDef]
    call_stack: list[str] = field(default_factory=list)
    prelude: list[ir.Stmt] = field(default_factory=list)
    inferring: bool = False
    reduction_depth: int = 0

    def take_prelude(self) -> list[ir.Stmt]:
        out, self.prelude = self.prelude, []
        return out
