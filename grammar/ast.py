"""The abstract syntax tree of the kernel language.

Plain syntax, no meaning yet: names are strings, nothing is typed. Each node is a
frozen dataclass whose last field is its `span`. The parser builds these; the type
checker (`dsl.lowering.typecheck`) reads them.

    module      := import* function*
    function    := decorator* 'def' NAME '(' param,* ')' ['->' type] ':' block
    param       := NAME ':' type              type := NAME ['[' dim,* ']']
    stmt        := for | if | assign | augassign | return | pass | expr
"""

from __future__ import annotations

from dataclasses import dataclass

from .diagnostics import Span

# ----------------------------------------------------------------- expressions


@dataclass(frozen=True, slots=True)
class Name:
    id: str
    span: Span


@dataclass(frozen=True, slots=True)
class IntLit:
    value: int
    span: Span


@dataclass(frozen=True, slots=True)
class FloatLit:
    value: float
    span: Span


@dataclass(frozen=True, slots=True)
class BoolLit:
    value: bool
    span: Span


@dataclass(frozen=True, slots=True)
class BinOp:
    """Arithmetic and bitwise: + - * / // % ** & | ^ << >>"""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class UnaryOp:
    """- + ~ not"""

    op: str
    operand: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Compare:
    """One comparison; `a < b < c` is parsed as `a < b and b < c`."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class BoolOp:
    """`and` / `or`, short-circuit."""

    op: str
    left: "Expr"
    right: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class IfExp:
    """`body if cond else orelse`"""

    cond: "Expr"
    body: "Expr"
    orelse: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Keyword:
    name: str
    value: "Expr"
    span: Span


@dataclass(frozen=True, slots=True)
class Call:
    """`func(args, name=value)`; `func` is a possibly dotted name like `dsl.f32`."""

    func: str
    args: tuple["Expr", ...]
    keywords: tuple[Keyword, ...]
    span: Span
    func_span: Span


@dataclass(frozen=True, slots=True)
class Subscript:
    """`A[i, j]`: an element of a tensor."""

    value: Name
    indices: tuple["Expr", ...]
    span: Span


Expr = Name | IntLit | FloatLit | BoolLit | BinOp | UnaryOp | Compare | BoolOp | IfExp | Call | Subscript

# ------------------------------------------------------------------ statements


@dataclass(frozen=True, slots=True)
class For:
    """`for i in range(...)`, or `for a, b in grid(...)` with several targets."""

    targets: tuple[Name, ...]
    iter: Call
    body: tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class If:
    """`if`/`elif`/`else`; an `elif` is an `If` alone in `orelse`."""

    cond: Expr
    body: tuple["Stmt", ...]
    orelse: tuple["Stmt", ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Assign:
    """`target = value`; the target is a local name or a tensor element."""

    target: Name | Subscript
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class AugAssign:
    """`target op= value` for op in + - * / and the bitwise operators."""

    target: Name | Subscript
    op: str
    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class Return:
    value: Expr | None
    span: Span


@dataclass(frozen=True, slots=True)
class Pass:
    span: Span


@dataclass(frozen=True, slots=True)
class ExprStmt:
    """An expression evaluated for its effect: a call to another kernel."""

    value: Expr
    span: Span


@dataclass(frozen=True, slots=True)
class LocalDecl:
    """`name: f32[4, 8]`: a local array of constant shape, zero at this statement."""

    name: str
    annotation: "TypeExpr"
    span: Span


Stmt = For | If | Assign | AugAssign | Return | Pass | ExprStmt | LocalDecl

# ---------------------------------------------------------------- declarations


@dataclass(frozen=True, slots=True)
class TypeExpr:
    """`f32` (a scalar, dims is None) or `f32[M, 4]` (a tensor)."""

    name: str
    dims: tuple[Name | IntLit, ...] | None
    span: Span


@dataclass(frozen=True, slots=True)
class Param:
    name: str
    annotation: TypeExpr
    span: Span


@dataclass(frozen=True, slots=True)
class Decorator:
    """`@name` or `@name(args, key=value)` above a `def`."""

    name: str
    args: tuple[Expr, ...]
    keywords: tuple[Keyword, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class FunctionDef:
    name: str
    params: tuple[Param, ...]
    returns: TypeExpr | None
    body: tuple[Stmt, ...]
    decorators: tuple[Decorator, ...]
    docstring: str | None
    span: Span
    name_span: Span


@dataclass(frozen=True, slots=True)
class Import:
    """`from module import a, b`: helpers and kernels from `module.tk`."""

    module: str
    names: tuple[Name, ...]
    span: Span


@dataclass(frozen=True, slots=True)
class Module:
    imports: tuple[Import, ...]
    functions: tuple[FunctionDef, ...]
    span: Span
