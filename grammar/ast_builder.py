"""Grammar rules to AST nodes: the callbacks Lark calls as it reduces each rule.

Each method is named after a rule (or alias) of `tk.lark` and receives that rule's
kept children: AST nodes, lists, and the named tokens the grammar keeps so spans
can reach from the first to the last character. Checks that the grammar cannot
express (assignment targets, slices, docstrings, nesting depth) raise here.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from lark import Transformer

from .ast import (
    Assign, AugAssign, BinOp, BoolLit, BoolOp, Call, Compare, Decorator, ExprStmt, FloatLit,
    For, FunctionDef, If, IfExp, Import, IntLit, Keyword, LocalDecl, Module, Name, Param, Pass, Return,
    Subscript, TypeExpr, UnaryOp,
)
from .diagnostics import Span
from .syntax_errors import STRING_MESSAGE, TOP_LEVEL_MESSAGE, reserved_word
from .tokens import Tok, current, fail, int_value, join, string_value, token_span

MAX_EXPR_DEPTH = 200  # deeper expressions are refused, so later passes may recurse


@dataclass(frozen=True, slots=True)
class _Doc:
    """A string statement: a docstring if it comes first, an error elsewhere."""

    value: str
    span: Span


def _span(first, last=None) -> Span:
    """From the start of `first` to the end of `last` (tokens or nodes)."""
    if last is not None:
        return join(first, last)
    return token_span(first) if type(first) is Tok else first.span


@dataclass(slots=True)
class _Nots:
    """`not` prefixes inside an operator list, innermost first, and their operand."""

    nots: list
    operand: object


class Builder(Transformer):
    """Lark callbacks building `dsl.grammar.ast` nodes; stateless, shared by all threads."""

    # -------------------------------------------------------------- declarations

    def start(self, items):
        imports, functions = [], []
        for i, item in enumerate(items):
            if isinstance(item, Import):
                imports.append(item)
            elif isinstance(item, FunctionDef):
                functions.append(item)
            elif i > 0:  # a string after the module docstring
                raise fail(item.span, STRING_MESSAGE)
        return Module(tuple(imports), tuple(functions), _module_span(current.source))

    def top_stmt(self, c):
        if isinstance(c[0], _Doc):
            return c[0]
        raise fail(c[0].span, TOP_LEVEL_MESSAGE)

    def import_stmt(self, c):
        from_, module, _import, *names = c
        names = [Name(t.value, token_span(t)) for t in names if t is not None]
        return Import(module.id, tuple(names), _span(from_, names[-1]))

    def funcdef(self, c):
        *decorators, def_, name, params, _rpar, _arrow, returns, colon, body = c
        doc = None
        if body and isinstance(body[0], _Doc):
            doc, body = body[0].value, body[1:]
        _no_strings(body)
        params = params or []
        seen = set()
        for p in params:
            if p.name in seen:
                raise fail(p.span, f"duplicate parameter '{p.name}'")
            seen.add(p.name)
        return FunctionDef(
            name.value, tuple(params), returns, tuple(body), tuple(decorators), doc,
            _span(def_, colon), token_span(name),
        )

    def decorator(self, c):
        at, name, _lpar, arguments, rpar = c
        args, keywords = _split_arguments(arguments or [])
        _check_depth(*args, *(k.value for k in keywords))
        return Decorator(name.id, args, keywords, _span(at, rpar or name))

    def params(self, c):
        return [p for p in c if p is not None]

    def param(self, c):
        name, annotation = c
        return Param(name.value, annotation, _span(name, annotation))

    def type(self, c):
        name, dims = c
        if dims is None:
            return TypeExpr(name.id, None, name.span)
        items, rsqb = dims
        return TypeExpr(name.id, tuple(items), _span(name, rsqb))

    def dims(self, c):
        return [d for d in c[1:-1] if d is not None], c[-1]

    def rtype(self, c):
        if type(c[0]) is Tok:  # -> None
            return TypeExpr("None", None, token_span(c[0]))
        return c[0]

    def dotted_name(self, c):
        return Name(".".join(t.value for t in c), _span(c[0], c[-1]))

    # ---------------------------------------------------------------- statements

    def suite(self, c):
        return c[0] if type(c[0]) is list else c

    def stmts(self, c):
        return _append(c)

    def assign(self, c):
        target, value = c
        _check_depth(target, value)
        return Assign(_target(target), value, _span(target, value))

    def augassign(self, c):
        target, op, value = c
        _check_depth(target, value)
        return AugAssign(_target(target), op.value[:-1], value, _span(target, value))

    def return_stmt(self, c):
        keyword, value = c
        if value is None:
            return Return(None, token_span(keyword))
        _check_depth(value)
        return Return(value, _span(keyword, value))

    def pass_stmt(self, c):
        return Pass(token_span(c[0]))

    def local_decl(self, c):
        name, _colon, annotation = c
        return LocalDecl(name.value, annotation, _span(name, annotation))

    def expr_stmt(self, c):
        _check_depth(c[0])
        return ExprStmt(c[0], c[0].span)

    def doc_stmt(self, c):
        return _Doc(string_value(c[0].value), token_span(c[0]))

    def for_stmt(self, c):
        for_, *targets, _in, iterable, colon, body = c
        _check_depth(iterable)
        if not isinstance(iterable, Call):
            raise fail(iterable.span, "a for loop must iterate over a call such as 'range(N)' or 'grid(M, N)'")
        _no_strings(body)
        names = tuple(Name(t.value, token_span(t)) for t in targets)
        return For(names, iterable, tuple(body), _span(for_, colon))

    def if_stmt(self, c):
        if_, cond, colon, body, *elifs, _else, _colon, else_body = c
        _check_depth(cond)
        _no_strings(body)
        orelse = tuple(else_body or ())
        _no_strings(orelse)
        for keyword, elif_cond, elif_colon, elif_body in reversed(elifs):
            orelse = (If(elif_cond, tuple(elif_body), orelse, _span(keyword, elif_colon)),)
        return If(cond, tuple(body), orelse, _span(if_, colon))

    def elif_clause(self, c):
        _check_depth(c[1])
        _no_strings(c[3])
        return c

    # --------------------------------------------------------------- expressions

    def ifexp(self, c):
        body, _if, cond, _else, orelse = c
        return IfExp(cond, body, orelse, _span(body, orelse))

    def operators(self, c):
        return _Climber(c[0]).climb(1)

    def opseq(self, c):
        return _append(c)

    def notexpr(self, c):
        return UnaryOp("not", c[1], _span(c[0], c[1]))

    def notmark(self, c):
        if type(c[1]) is _Nots:
            c[1].nots.append(c[0])
            return c[1]
        return _Nots([c[0]], c[1])

    def binop(self, c):
        left, op, right = c
        return BinOp(op.value, left, right, _span(left, right))

    def unary(self, c):
        op, operand = c
        return UnaryOp(op.value, operand, _span(op, operand))

    def name(self, c):
        return Name(c[0].value, token_span(c[0]))

    def attribute(self, c):
        # A dotted name is a qualified name (`dsl.N`) or a loop name in a schedule
        # (`i.outer`); the type checker rejects it where neither makes sense.
        return self.dotted_name(c)

    def call(self, c):
        func, _lpar, arguments, rpar = c
        args, keywords = _split_arguments(arguments or [])
        return Call(func.id, args, keywords, _span(func, rpar), func.span)

    def subscript(self, c):
        value, _lsqb, indices, rsqb = c
        # `w.qs[...]` (a field of a quantized tensor) is a dotted name: the type
        # checker knows which tensors have fields.
        return Subscript(value, tuple(indices), _span(value, rsqb))

    def indices(self, c):
        return _append(c)

    def slice(self, c):
        parts = [x for x in c if x is not None]
        raise fail(_span(parts[0], parts[-1]), "slices are not supported; index each element")

    def paren(self, c):
        return replace(c[1], span=_span(c[0], c[2]))

    def arguments(self, c):
        return _append(c)

    def keyword(self, c):
        name, value = c
        return Keyword(name.value, value, _span(name, value))

    def int_lit(self, c):
        return IntLit(int_value(c[0]), token_span(c[0]))

    def float_lit(self, c):
        return FloatLit(float(c[0].value), token_span(c[0]))

    def true_lit(self, c):
        return BoolLit(True, token_span(c[0]))

    def false_lit(self, c):
        return BoolLit(False, token_span(c[0]))

    def reserved(self, c):  # the indenter rejects these first; kept for safety
        raise fail(token_span(c[0]), reserved_word(c[0].value))


# ------------------------------------------------------------------ operators

# Python's binary operator precedence; `not` sits between `and` and comparisons.
_PRECEDENCE = {
    "or": 1, "and": 2,
    "<": 4, "<=": 4, ">": 4, ">=": 4, "==": 4, "!=": 4,
    "|": 5, "^": 6, "&": 7, "<<": 8, ">>": 8, "+": 9, "-": 9, "*": 10, "/": 10, "//": 10, "%": 10,
}
_NOT = 3
_COMPARE = 4


class _Climber:
    """Precedence climbing over the flat `[operand, op, operand, ...]` list of the
    `operators` rule (operands may carry `not` prefixes). Recursion is bounded by
    the number of precedence levels, not by the length of the expression.
    A comparison chain `a < b < c` becomes `(a < b) and (b < c)`."""

    def __init__(self, items):
        self.items = items
        self.pos = 0

    def climb(self, min_prec: int):
        left = self.operand(min_prec)
        chain_end = None  # the right operand of the comparison `left` ends with
        while self.pos < len(self.items):
            op = self.items[self.pos]
            prec = _PRECEDENCE[op.value]
            if prec < min_prec:
                break
            self.pos += 1
            right = self.climb(prec + 1)
            if prec == _COMPARE:
                first = left if chain_end is None else chain_end
                test = Compare(op.value, first, right, _span(first, right))
                left = test if chain_end is None else BoolOp("and", left, test, _span(left, test))
                chain_end = right
            else:
                node = BoolOp if prec < _NOT else BinOp
                left = node(op.value, left, right, _span(left, right))
                chain_end = None
        return left

    def operand(self, min_prec: int):
        item = self.items[self.pos]
        if type(item) is not _Nots:
            self.pos += 1
            return item
        if min_prec > _NOT:
            raise fail(token_span(item.nots[-1]), "'not' must be in parentheses here: write '(not ...)'")
        self.items[self.pos] = item.operand  # `not` covers the comparison that follows
        node = self.climb(_NOT + 1)
        for tok in item.nots:
            node = UnaryOp("not", node, _span(tok, node))
        return node


# -------------------------------------------------------------------- helpers


def _append(c: list) -> list:
    """A left-recursive list rule `xs: x | xs [sep] x`: the list so far, plus the new items."""
    if type(c[0]) is list:
        c[0].extend(c[1:])
        return c[0]
    return c


def _module_span(source) -> Span:
    text = source.text
    last = text.count("\n")
    end_col = len(text) - (text.rfind("\n") + 1) + 1
    return Span(source, source.first_line, 1, source.first_line + last, end_col)


def _no_strings(stmts) -> None:
    for s in stmts:
        if isinstance(s, _Doc):
            raise fail(s.span, STRING_MESSAGE)


def _target(node):
    if isinstance(node, (Name, Subscript)):
        return node
    what = {Call: "a function call", IntLit: "a literal", FloatLit: "a literal", BoolLit: "a literal"}
    raise fail(
        node.span,
        f"cannot assign to {what.get(type(node), 'an expression')}; "
        "the target must be a name or a tensor element like A[i]",
    )


def _split_arguments(arguments) -> tuple[tuple, tuple]:
    args, keywords, names = [], [], set()
    for a in arguments:
        if isinstance(a, Keyword):
            if a.name in names:
                raise fail(a.span, f"keyword argument '{a.name}' repeated")
            names.add(a.name)
            keywords.append(a)
        elif keywords:
            raise fail(a.span, "positional argument follows keyword argument")
        else:
            args.append(a)
    return tuple(args), tuple(keywords)


def _children(node):
    match node:
        case BinOp(left=l, right=r) | Compare(left=l, right=r) | BoolOp(left=l, right=r):
            return (l, r)
        case UnaryOp(operand=x):
            return (x,)
        case IfExp(cond=c, body=b, orelse=o):
            return (c, b, o)
        case Call(args=args, keywords=kws):
            return args + tuple(k.value for k in kws)
        case Subscript(indices=indices):
            return indices
    return ()


def _check_depth(*roots) -> None:
    """Refuse expressions more than MAX_EXPR_DEPTH deep (walked without recursion)."""
    for root in roots:
        span = root.span
        if span.end_line == span.line and span.end_col - span.col < MAX_EXPR_DEPTH:
            continue  # each level takes at least one character: cannot be too deep
        stack = [(root, 1)]
        while stack:
            node, depth = stack.pop()
            if depth > MAX_EXPR_DEPTH:
                raise fail(root.span, f"expression nested too deeply (more than {MAX_EXPR_DEPTH} levels)")
            stack.extend((child, depth + 1) for child in _children(node))
