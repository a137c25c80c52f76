"""The expressions of `dsl.ops.fused`: parsed with Python's `ast`, checked,
and turned into the text of a pointwise kernel in the language.

    >>> e = parse_expression("silu(a) * b + 1")
    >>> e.names
    ('a', 'b')
    >>> e.to_tk({"a": "v0[i]", "b": "v1[i]"})
    '((silu_f32(v0[i]) * v1[i]) + 1.0)'

Mistakes raise ValueError naming `dsl.ops.fused`, with the expression and a
caret under the part at fault.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass

from dsl.grammar.diagnostics import did_you_mean

# name -> (arguments, text of the call in the language with {0}, {1} for them)
FUNCTIONS = {
    "exp": (1, "exp_f32({0})"), "log": (1, "log_f32({0})"), "tanh": (1, "tanh_f32({0})"),
    "erf": (1, "erf_f32({0})"), "sigmoid": (1, "sigmoid_f32({0})"), "silu": (1, "silu_f32({0})"),
    "gelu": (1, "gelu_f32({0})"), "gelu_tanh": (1, "gelu_tanh_f32({0})"), "relu": (1, "relu_f32({0})"),
    "sqrt": (1, "sqrt({0})"), "abs": (1, "abs({0})"),
    "maximum": (2, "max({0}, {1})"), "minimum": (2, "min({0}, {1})"),
}
# The helpers of stdlib/mathfn.tk an expression may call (relu is defined by the kernel text).
MATHFN = ("exp_f32", "log_f32", "tanh_f32", "erf_f32", "sigmoid_f32", "silu_f32", "gelu_f32", "gelu_tanh_f32")
_OPERATORS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/"}


@dataclass(frozen=True)
class Expression:
    """A checked expression: its text, its tree and its operand names in the
    order they first appear."""

    text: str
    tree: ast.expr
    names: tuple[str, ...]

    def to_tk(self, operands: dict[str, str]) -> str:
        """The expression in the language, each operand name replaced by its text."""
        return _emit(self.tree, operands)

    def pointing_at(self, name: str, message: str) -> str:
        """`message` with the expression and a caret under the first use of `name`."""
        node = next(n for n in ast.walk(self.tree) if isinstance(n, ast.Name) and n.id == name)
        return _located(self.text, message, *_columns(self.text, node))

    def helpers(self) -> tuple[str, ...]:
        """The mathfn helpers (and `relu_f32`) the expression calls."""
        called = {FUNCTIONS[n.func.id][1].split("(")[0] for n in ast.walk(self.tree) if isinstance(n, ast.Call)}
        return tuple(h for h in (*MATHFN, "relu_f32") if h in called)


def parse_expression(text: str) -> Expression:
    """Parse and check `text`; ValueError (with a caret) for anything but
    numbers, operand names, + - * /, unary minus and the FUNCTIONS. Line
    breaks count as spaces (messages show the expression on one line)."""
    if not isinstance(text, str):
        raise TypeError(f"dsl.ops.fused: the expression must be a str, got {type(text).__name__}")
    flat = " ".join(text.split())
    try:
        tree = ast.parse(flat, mode="eval").body
    except SyntaxError as exc:
        col = min(max((exc.offset or 1) - 1, 0), len(flat))
        detail = "" if exc.msg == "invalid syntax" else f" ({exc.msg})"
        raise ValueError(_located(flat, "invalid syntax" + detail, col, col + 1)) from None
    names: list[str] = []
    _check(tree, flat, names)
    return Expression(flat, tree, tuple(names))


def _check(node: ast.expr, text: str, names: list[str]) -> None:
    match node:
        case ast.Name(id=name):
            if name in FUNCTIONS:
                _fail(text, node, f"'{name}' is a function: call it, e.g. {name}(x)")
            if name not in names:
                names.append(name)
        case ast.Constant(value=value):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                _fail(text, node, f"only finite numbers may be constants, not {value!r}")
        case ast.BinOp(op=op, left=left, right=right):
            if type(op) not in _OPERATORS:
                _fail(text, node, f"operator '{_op_text(op)}' is not supported (use + - * / and the functions)")
            _check(left, text, names)
            _check(right, text, names)
        case ast.UnaryOp(op=ast.USub() | ast.UAdd(), operand=operand):
            _check(operand, text, names)
        case ast.Call(func=ast.Name(id=name), args=args, keywords=[]):
            if name not in FUNCTIONS:
                hint = did_you_mean(name, FUNCTIONS)
                _fail(text, node.func, f"unknown function '{name}'" + (f" ({hint[0]})" if hint else "")
                      + "; known: " + ", ".join(sorted(FUNCTIONS)))
            arity = FUNCTIONS[name][0]
            if len(args) != arity or any(isinstance(a, ast.Starred) for a in args):
                _fail(text, node, f"{name}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}")
            for arg in args:
                _check(arg, text, names)
        case _:
            _fail(text, node, f"{type(node).__name__.lower()} is not supported in a fused expression "
                              "(numbers, operand names, + - * /, and calls of: " + ", ".join(sorted(FUNCTIONS)) + ")")


def _emit(node: ast.expr, operands: dict[str, str]) -> str:
    match node:
        case ast.Name(id=name):
            return operands[name]
        case ast.Constant(value=value):
            return repr(float(value))
        case ast.BinOp(op=op, left=left, right=right):
            return f"({_emit(left, operands)} {_OPERATORS[type(op)]} {_emit(right, operands)})"
        case ast.UnaryOp(op=ast.USub(), operand=operand):
            return f"(-{_emit(operand, operands)})"
        case ast.UnaryOp(operand=operand):
            return _emit(operand, operands)
        case ast.Call(func=ast.Name(id=name), args=args):
            return FUNCTIONS[name][1].format(*(_emit(a, operands) for a in args))
    raise AssertionError(f"unchecked node {node!r}")


def _op_text(op: ast.operator) -> str:
    return {ast.Pow: "**", ast.Mod: "%", ast.FloorDiv: "//", ast.MatMult: "@", ast.LShift: "<<",
            ast.RShift: ">>", ast.BitOr: "|", ast.BitAnd: "&", ast.BitXor: "^"}.get(type(op), type(op).__name__)


def _fail(text: str, node: ast.AST, message: str) -> None:
    raise ValueError(_located(text, message, *_columns(text, node)))


def _columns(text: str, node: ast.AST) -> tuple[int, int]:
    """The node's columns in characters (ast counts UTF-8 bytes)."""
    raw = text.encode()
    return len(raw[:node.col_offset].decode(errors="ignore")), len(raw[:node.end_col_offset].decode(errors="ignore"))


def _located(text: str, message: str, start: int, end: int) -> str:
    caret = " " * start + "^" + "~" * max(0, end - start - 1)
    return f"dsl.ops.fused: {message}\n    {text}\n    {caret}"
