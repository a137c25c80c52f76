"""A stable text dump of the AST, for golden tests and `dslc --emit=ast`.

One node per line, children indented by two spaces; statements end with
`@line:col`. Expressions are printed inline, every compound operand in
parentheses so precedence is visible:

    FunctionDef saxpy @1:1
      Param alpha: f32
      Param x: f32[N]
      For i in range(N) @2:5
        Assign out[i] = (alpha * x[i]) + y[i] @3:9
"""

from __future__ import annotations

from .ast import (
    Assign, AugAssign, BinOp, BoolLit, BoolOp, Call, Compare, Decorator, ExprStmt, FloatLit,
    For, FunctionDef, If, IfExp, IntLit, Keyword, LocalDecl, Module, Name, Pass, Return,
    Subscript, TypeExpr, UnaryOp,
)

_COMPOUND = (BinOp, Compare, BoolOp, UnaryOp, IfExp)


def format_ast(module: Module) -> str:
    """The whole module, imports first, then each function; ends with a newline.

    >>> from dsl.grammar.parser import parse
    >>> from dsl.grammar.diagnostics import Source
    >>> print(format_ast(parse(Source("k.tk", "def f(x: f32):\\n    return -x\\n"))), end="")
    FunctionDef f @1:1
      Param x: f32
      Return -x @2:5
    """
    lines: list[str] = []
    for imp in module.imports:
        names = ", ".join(n.id for n in imp.names)
        lines.append(f"Import {imp.module}: {names}{_at(imp)}")
    for fn in module.functions:
        _function(fn, lines)
    return "".join(line + "\n" for line in lines)


def format_expr(expr) -> str:
    """One expression in compact infix form, e.g. `(alpha * x[i]) + y[i]`."""
    match expr:
        case Name(id=name):
            return name
        case IntLit(value=value):
            return _int_text(value)
        case FloatLit(value=value):
            return repr(value)
        case BoolLit(value=value):
            return "True" if value else "False"
        case BinOp(op=op, left=left, right=right) | Compare(op=op, left=left, right=right):
            return f"{_operand(left)} {op} {_operand(right)}"
        case BoolOp(op=op, left=left, right=right):
            return f"{_operand(left)} {op} {_operand(right)}"
        case UnaryOp(op="not", operand=operand):
            return f"not {_operand(operand)}"
        case UnaryOp(op=op, operand=operand):
            return f"{op}{_operand(operand)}"
        case IfExp(cond=cond, body=body, orelse=orelse):
            return f"{_operand(body)} if {_operand(cond)} else {_operand(orelse)}"
        case Call(func=func, args=args, keywords=keywords):
            return f"{func}({_arguments(args, keywords)})"
        case Subscript(value=value, indices=indices):
            return f"{value.id}[{', '.join(format_expr(i) for i in indices)}]"
    raise TypeError(f"not an expression node: {type(expr).__name__}")


def format_type(t: TypeExpr) -> str:
    """`f32` or `f32[M, 4]`."""
    if t.dims is None:
        return t.name
    return f"{t.name}[{', '.join(format_expr(d) for d in t.dims)}]"


def format_stmt(stmt, indent: int = 0) -> list[str]:
    """The lines of one statement and its nested blocks."""
    lines: list[str] = []
    _stmt(stmt, indent, lines)
    return lines


# ------------------------------------------------------------------ internals


def _function(fn: FunctionDef, lines: list[str]) -> None:
    lines.append(f"FunctionDef {fn.name}{_at(fn)}")
    for d in fn.decorators:
        lines.append(f"  Decorator {_decorator(d)}")
    for p in fn.params:
        lines.append(f"  Param {p.name}: {format_type(p.annotation)}")
    if fn.returns is not None:
        lines.append(f"  Returns {format_type(fn.returns)}")
    if fn.docstring is not None:
        lines.append(f"  Docstring {fn.docstring!r}")
    for s in fn.body:
        _stmt(s, 1, lines)


def _stmt(stmt, depth: int, lines: list[str]) -> None:
    pad = "  " * depth
    match stmt:
        case For(targets=targets, iter=iterable, body=body):
            names = ", ".join(t.id for t in targets)
            lines.append(f"{pad}For {names} in {format_expr(iterable)}{_at(stmt)}")
            _block(body, depth + 1, lines)
        case If(cond=cond, body=body, orelse=orelse):
            lines.append(f"{pad}If {format_expr(cond)}{_at(stmt)}")
            _block(body, depth + 1, lines)
            if orelse:
                lines.append(f"{pad}Else")
                _block(orelse, depth + 1, lines)
        case Assign(target=target, value=value):
            lines.append(f"{pad}Assign {format_expr(target)} = {format_expr(value)}{_at(stmt)}")
        case AugAssign(target=target, op=op, value=value):
            lines.append(f"{pad}AugAssign {format_expr(target)} {op}= {format_expr(value)}{_at(stmt)}")
        case Return(value=None):
            lines.append(f"{pad}Return{_at(stmt)}")
        case Return(value=value):
            lines.append(f"{pad}Return {format_expr(value)}{_at(stmt)}")
        case Pass():
            lines.append(f"{pad}Pass{_at(stmt)}")
        case LocalDecl(name=name, annotation=annotation):
            lines.append(f"{pad}Local {name}: {format_type(annotation)}{_at(stmt)}")
        case ExprStmt(value=value):
            lines.append(f"{pad}Expr {format_expr(value)}{_at(stmt)}")
        case _:
            raise TypeError(f"not a statement node: {type(stmt).__name__}")


def _block(stmts, depth: int, lines: list[str]) -> None:
    for s in stmts:
        _stmt(s, depth, lines)


def _decorator(d: Decorator) -> str:
    if not d.args and not d.keywords:
        return d.name  # `@name` and `@name()` are the same node
    return f"{d.name}({_arguments(d.args, d.keywords)})"


def _arguments(args, keywords: tuple[Keyword, ...]) -> str:
    parts = [format_expr(a) for a in args]
    parts += [f"{k.name}={format_expr(k.value)}" for k in keywords]
    return ", ".join(parts)


def _operand(expr) -> str:
    text = format_expr(expr)
    return f"({text})" if isinstance(expr, _COMPOUND) else text


def _int_text(value: int) -> str:
    try:
        return str(value)
    except ValueError:  # beyond Python's 4300-digit str() limit
        return hex(value)


def _at(node) -> str:
    return f" @{node.span.line}:{node.span.col}"
