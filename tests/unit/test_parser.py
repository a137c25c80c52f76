"""The parser: AST shapes, precedence, spans, the printer, and syntax errors."""

from __future__ import annotations

import logging
import textwrap
import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dsl.grammar import ast as A
from dsl.grammar.diagnostics import CompileError, Source
from dsl.grammar.parser import _lark, parse
from dsl.grammar.printer import format_ast, format_expr

SAXPY = '''\
# comment
from quant_common import scale_min_k4, other

@schedule(tile(m, n, 6, 16), vectorize(n))
@options(reassociate=True)
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    """Docstring."""
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
'''


def parse_text(text: str, first_line: int = 1) -> A.Module:
    return parse(Source("k.tk", textwrap.dedent(text), first_line))


def body(text: str) -> tuple:
    """The statements of a one-function module whose body is `text`."""
    return parse_text("def f(x: f32):\n" + textwrap.indent(textwrap.dedent(text), "    ")).functions[0].body


def expr(text: str):
    return body(f"y = {text}\n")[0].value


def error(text: str, first_line: int = 1):
    with pytest.raises(CompileError) as info:
        parse(Source("k.tk", text, first_line))
    assert len(info.value.diagnostics) == 1
    return info.value.diagnostics[0]


# ---------------------------------------------------------------- structure


def test_saxpy():
    m = parse_text(SAXPY)
    assert [(i.module, [n.id for n in i.names]) for i in m.imports] == [("quant_common", ["scale_min_k4", "other"])]
    (f,) = m.functions
    assert f.name == "saxpy" and f.docstring == "Docstring." and f.returns is None
    assert [(p.name, p.annotation.name, p.annotation.dims) for p in f.params][0] == ("alpha", "f32", None)
    assert [d.id for d in f.params[1].annotation.dims] == ["N"]
    sched, opts = f.decorators
    assert sched.name == "schedule" and [a.func for a in sched.args] == ["tile", "vectorize"]
    assert opts.args == () and opts.keywords[0].name == "reassociate"
    assert opts.keywords[0].value.value is True
    (loop,) = f.body
    assert isinstance(loop, A.For) and [t.id for t in loop.targets] == ["i"]
    assert loop.iter.func == "range" and loop.iter.args[0].id == "N"
    (assign,) = loop.body
    assert isinstance(assign.target, A.Subscript) and assign.target.value.id == "out"
    assert format_expr(assign.value) == "(alpha * x[i]) + y[i]"


def test_printer_golden():
    assert format_ast(parse_text(SAXPY)) == textwrap.dedent("""\
        Import quant_common: scale_min_k4, other @2:1
        FunctionDef saxpy @6:1
          Decorator schedule(tile(m, n, 6, 16), vectorize(n))
          Decorator options(reassociate=True)
          Param alpha: f32
          Param x: f32[N]
          Param y: f32[N]
          Param out: f32[N]
          Docstring 'Docstring.'
          For i in range(N) @8:5
            Assign out[i] = (alpha * x[i]) + y[i] @9:9
        """)


def test_if_elif_else_and_return():
    m = parse_text("""\
        def helper(x: f32, k: i32) -> f32:
            if x > 0.0 and not (k == 3):
                return x * 2.0
            elif x < -1e-5:
                pass
            else:
                x += 1.0
            return fma(x, x, 1.0) if k != 0 else -x
        """)
    f = m.functions[0]
    assert f.returns.name == "f32"
    branch, ret = f.body
    assert isinstance(branch.body[0], A.Return)
    (elif_,) = branch.orelse
    assert isinstance(elif_, A.If) and isinstance(elif_.body[0], A.Pass)
    assert isinstance(elif_.orelse[0], A.AugAssign) and elif_.orelse[0].op == "+"
    assert isinstance(ret.value, A.IfExp) and ret.value.body.func == "fma"


def test_grid_loop_index_notation_and_calls():
    stmts = body("""\
        for n, i, j in grid(N, I, J):
            acc = 0.0
        for (a, b) in grid(M, N):
            pass
        C[m, n] = sum(A[m, k] * B[k, n])
        other_kernel(a, b, axis=1)
        y = math.exp(x)
        return
        """)
    assert [t.id for t in stmts[0].targets] == ["n", "i", "j"] and stmts[0].iter.func == "grid"
    assert [t.id for t in stmts[1].targets] == ["a", "b"]
    assert isinstance(stmts[2], A.Assign) and stmts[2].value.func == "sum"
    call = stmts[3].value
    assert isinstance(stmts[3], A.ExprStmt) and call.keywords[0].name == "axis"
    assert stmts[4].value.func == "math.exp" and stmts[5].value is None


@pytest.mark.parametrize("op", ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>"])
def test_augmented_assignment(op):
    (s,) = body(f"x[i] {op}= 2\n")
    assert isinstance(s, A.AugAssign) and s.op == op and isinstance(s.target, A.Subscript)


def test_types_dotted_and_none_return():
    f = parse_text("def g(a: dsl.f32[dsl.N, 4], b: u8[NB, 144,]) -> None:\n    pass\n").functions[0]
    a, b = f.params
    assert a.annotation.name == "dsl.f32" and [d.id for d in a.annotation.dims[:1]] == ["dsl.N"]
    assert a.annotation.dims[1] == A.IntLit(4, a.annotation.dims[1].span)
    assert [d.value for d in b.annotation.dims[1:]] == [144]
    assert f.returns.name == "None" and f.returns.dims is None


# --------------------------------------------------------------- precedence


@pytest.mark.parametrize(
    "text, printed",
    [
        ("(q >> 4) & 0xF | 0b1010 ^ ~y << 2 // 3 % 2 ** 2", "((q >> 4) & 15) | (10 ^ ((~y) << ((2 // 3) % (2 ** 2))))"),
        ("-x ** 2", "-(x ** 2)"),
        ("2 ** -1", "2 ** (-1)"),
        ("a ** b ** c", "a ** (b ** c)"),
        ("a - b - c", "(a - b) - c"),
        ("a + b * c", "a + (b * c)"),
        ("not a == b", "not (a == b)"),
        ("not a and b or c", "((not a) and b) or c"),
        ("a or b and c", "a or (b and c)"),
        ("a if b else c if d else e", "a if b else (c if d else e)"),
        ("x if a or b else y", "x if (a or b) else y"),
        ("a < b + 1 == c", "(a < (b + 1)) and ((b + 1) == c)"),
        ("a & b == c", "(a & b) == c"),
        ("not not x", "not (not x)"),
        ("-(a + b)", "-(a + b)"),
    ],
)
def test_precedence(text, printed):
    assert format_expr(expr(text)) == printed


def test_chained_comparison():
    e = expr("a < b <= c")
    assert isinstance(e, A.BoolOp) and e.op == "and"
    assert (e.left.op, e.left.left.id, e.left.right.id) == ("<", "a", "b")
    assert (e.right.op, e.right.left.id, e.right.right.id) == ("<=", "b", "c")


@pytest.mark.parametrize(
    "text, value",
    [("0", 0), ("1_000", 1000), ("0xFF", 255), ("0o17", 15), ("0b1010", 10), ("0x_ff", 255),
     ("1.0", 1.0), ("1.", 1.0), (".5", 0.5), ("1e-5", 1e-5), ("1_000.5", 1000.5), ("2E3", 2000.0),
     ("True", True), ("False", False)],
)
def test_literals(text, value):
    e = expr(text)
    assert e.value == value and type(e.value) is type(value)


def test_huge_integer_is_exact():
    digits = "9" * 6000  # beyond Python's 4300-digit int(str) limit
    assert expr(digits).value == 10**6000 - 1
    assert expr("0x" + "f" * 100).value == 16**100 - 1


# -------------------------------------------------------------------- spans


def test_spans():
    f = parse_text(SAXPY).functions[0]
    assert (f.span.line, f.span.col, f.span.end_line, f.span.end_col) == (6, 1, 6, 58)
    assert (f.name_span.line, f.name_span.col, f.name_span.end_col) == (6, 5, 10)
    x = f.params[1]
    assert (x.span.col, x.span.end_col, x.annotation.span.col, x.annotation.span.end_col) == (23, 32, 26, 32)
    loop = f.body[0]
    assert (loop.span.line, loop.span.col, loop.span.end_col) == (8, 5, 23)
    assert (loop.iter.func_span.col, loop.iter.func_span.end_col, loop.iter.span.end_col) == (14, 19, 22)
    assign = loop.body[0]
    assert (assign.span.line, assign.span.col, assign.span.end_col) == (9, 9, 37)
    assert (assign.value.span.col, assign.value.left.span.end_col) == (18, 30)
    assert (f.decorators[0].span.line, f.decorators[0].span.col, f.decorators[0].span.end_col) == (4, 1, 43)


def test_first_line_offset_and_base_indentation():
    text = "    def k(a: f32[N]):\n        a[0] = 1\n"
    f = parse(Source("model.py", text, first_line=40)).functions[0]
    assert (f.span.line, f.span.col) == (40, 5)
    assert (f.body[0].span.line, f.body[0].span.col) == (41, 9)
    d = error("def k(a: f32):\n    a = $\n", first_line=40)
    assert (d.span.line, d.span.col) == (41, 9)
    assert "model.py" not in d.render() and "k.tk:41:9" in d.render()


@pytest.mark.parametrize(
    "text",
    ["", "\n\n", "# only a comment", "  # indented comment\n\n", '"""module docstring"""\n'],
)
def test_empty_modules(text):
    m = parse(Source("k.tk", text))
    assert m.imports == () and m.functions == ()


def test_layout_variants():
    expected = parse_text("def f(x: f32):\n    if x:\n        pass\n    return x\n")
    shapes = format_ast(expected).replace("@3:9", "@3:?")
    for text in [
        "def f(x: f32):\r\n    if x:\r\n        pass\r\n    return x",  # CRLF, no final newline
        "def f(x: f32):\n\tif x:\n\t\tpass\n\treturn x\n",  # tabs
        "def f(x: f32):  # c\n\n    # c\n    if (x\n  ):\n        pass\n    return \\\n  x\n",
        "def f(x: f32):\n    if x: pass\n    return x\n",
    ]:
        printed = format_ast(parse(Source("k.tk", text)))
        assert [line.split(" @")[0] for line in printed.splitlines()] == [
            line.split(" @")[0] for line in shapes.splitlines()
        ]


# ------------------------------------------------------------ syntax errors

F = "def f(x: f32):\n"

ERRORS = [
    (F + "    for i in range(N)\n        pass\n", 2, 22, "expected ':' after the for header"),
    (F + "    if x > 1\n        pass\n", 2, 13, "expected ':' after the if condition"),
    (F + "    if x:\n        pass\n    elif x\n        pass\n", 4, 11, "expected ':' after the elif condition"),
    (F + "    if x:\n        pass\n    else\n        pass\n", 4, 9, "expected ':' after 'else'"),
    ("def f(x: f32)\n    pass\n", 1, 14, "expected ':' after the function signature"),
    (F + "    for i in range(N):\n    pass\n", 3, 5, "expected an indented block after 'for'"),
    (F + "    pass\n        x = 1\n", 3, 9, "unexpected indent"),
    (F + "    if x:\n        pass\n  x = 1\n", 4, 3, "unindent does not match any outer indentation level"),
    (F + "    y = g(x, 2\n    return y\n", 2, 10, "unclosed '('"),
    (F + "    y = g(x))\n", 2, 13, "unmatched ')'"),
    (F + "    y = (1 + 2]\n", 2, 15, "closing ']' does not match opening '('"),
    (F + "    y = \n", 2, 8, "expected an expression"),
    (F + "    y = a in b\n", 2, 11, "invalid syntax: unexpected 'in'"),
    (F + "    y = g(a b)\n", 2, 13, "expected ')' or ',' in call"),
    (F + "    if x = 1:\n        pass\n", 2, 10, "'=' is assignment; did you mean '=='?"),
    (F + "    y = $x\n", 2, 9, "unexpected character '$'"),
    (F + "    é = 1\n", 2, 5, "unexpected character 'é' (U+00E9): identifiers must be ASCII"),
    ("def f(x: f32):\n", 1, 15, "unexpected end of file: expected an indented block after 'def'"),
    ("def f(x: f32", 1, 6, "unclosed '('"),
    (F + "    while x < 3:\n        x += 1\n", 2, 5, "'while' loops are not supported; use 'for ... in range(...)'"),
    (F + "    y = A[1:2]\n", 2, 11, "slices are not supported; index each element"),
    (F + "    y = 'abc'\n", 2, 9,
     "a string literal is only allowed as a docstring (the first statement of a function or file)"),
    ("x = 1\n", 1, 1, "only 'def' and 'from ... import' are allowed at the top level of a kernel file"),
    ("import numpy\n", 1, 1, "only 'from module import name' imports are supported"),
    ("def f(x):\n    pass\n", 1, 7, "parameter 'x' needs a type, as in 'x: f32'"),
    ("def f(x: f32[N+1]):\n    pass\n", 1, 15, "a tensor dimension must be a name or an integer literal"),
    (F + "    for i range(N):\n        pass\n", 2, 11, "expected 'in' after the loop variables"),
    (F + "    for i in N:\n        pass\n", 2, 14,
     "a for loop must iterate over a call such as 'range(N)' or 'grid(M, N)'"),
    (F + "    x + 1 = 2\n", 2, 5,
     "cannot assign to an expression; the target must be a name or a tensor element like A[i]"),
    (F + "    x = y = 2\n", 2, 11, "chained assignment is not supported; write one assignment per line"),
    (F + "    y = x if x > 0\n", 2, 19, "expected 'else' in the conditional expression 'a if cond else b'"),
    (F + "    def g():\n        pass\n", 2, 5,
     "nested functions are not supported; 'def' is only allowed at the top level"),
    (F + "    else:\n        pass\n", 2, 5, "'else' without a matching 'if'"),
    (F + "    y = 007\n", 2, 9,
     "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers"),
    (F + '    y = "abc\n', 2, 9, "unterminated string literal"),
    (F + "    y = '''abc\n", 2, 9, "unterminated triple-quoted string literal"),
    (F + "    y = g(x=1, 2)\n", 2, 16, "positional argument follows keyword argument"),
    (F + "    return 1, 2\n", 2, 13, "unexpected ','; tuples are not supported"),
    (F + "    y = a == not b\n", 2, 14, "'not' must be in parentheses here: write '(not ...)'"),
    ("def (x: f32):\n    pass\n", 1, 5, "expected a function name after 'def'"),
    ("@dec\nx = 1\n", 2, 1, "expected 'def' after the decorators"),
    (F + "    y = A[i][j]\n", 2, 13, "index a tensor with one subscript, as in A[i, j], not A[i][j]"),
    (F + "    y = x.\n", 2, 11, "expected a name after '.'"),
    (F + "    y: f32 = 1.0\n", 2, 12, "a declaration takes no value: a local array starts at zero, "
     "and a scalar local needs none (write 'y = value')"),
    (F + "    t:\n", 2, 7, "expected a type after ':', as in 't: f32[4]' (a local array)"),
    (F + "    t: [4]\n", 2, 8, "expected a type after ':', as in 't: f32[4]' (a local array)"),
    (F + "    t: f32[4] = 0.0\n", 2, 15, "a declaration takes no value: a local array starts at zero, "
     "and a scalar local needs none (write 't = value')"),
    (F + "    retrun x\n", 2, 5, "invalid syntax: unknown statement 'retrun'; did you mean 'return'?"),
    ("def f x: f32):\n    pass\n", 1, 7, "expected '(' after the function name"),
    ("def f(x: f32 y: f32):\n    pass\n", 1, 14, "expected ')' or ',' in the parameter list"),
    ("def f(x: f32 = 1):\n    pass\n", 1, 14, "default parameter values are not supported"),
    (F + "    y = [x]\n", 2, 9, "list literals are not supported"),
    (F + "    y = None\n", 2, 9, "'None' is only allowed as a return type ('-> None')"),
    ("from a b\n", 1, 8, "expected 'import' after the module name"),
    (F + "    x = 1\n\tx = 2\n", 3, 2, "unexpected indent"),
]


@pytest.mark.parametrize("text, line, col, message", ERRORS)
def test_syntax_error(text, line, col, message):
    d = error(text)
    assert (d.span.line, d.span.col, d.message) == (line, col, message)


@pytest.mark.parametrize("text, line, col, message", ERRORS[:20])
def test_error_renders_line_and_caret(text, line, col, message):
    rendered = error(text).render()
    head, source_line, caret = rendered.splitlines()[:3]
    assert head == f"k.tk:{line}:{col}: error: {message}"
    assert source_line.strip() == text.splitlines()[line - 1].strip()
    assert caret.strip().startswith("^") and caret.index("^") == 4 + col - 1
    for word in ("Traceback", "lark", "Token", "$END", "_NL", "NAME"):
        assert word not in rendered


def test_non_ascii_outside_code_is_fine():
    f = parse_text('def f(x: f32):\n    """Größe → ok."""\n    pass  # ünïcode\n').functions[0]
    assert f.docstring == "Größe → ok."


# ------------------------------------------------------ pathological inputs


def test_deep_parentheses_are_refused_not_crashed():
    d = error(F + "    y = " + "(" * 5000 + "x" + ")" * 5000 + "\n")
    assert d.message == "expression nested too deeply" and d.span.line == 2


@pytest.mark.parametrize("text", ["+".join(["x"] * 5000), "-" * 5000 + "x", "**".join(["x"] * 5000),
                                  "not " * 5000 + "x", "x if c else " * 300 + "x"])
def test_long_expressions_are_refused_not_crashed(text):
    d = error(F + "    y = " + text + "\n")
    assert d.message == "expression nested too deeply (more than 200 levels)"


def test_moderate_nesting_parses():
    assert format_expr(expr("(" * 150 + "x" + ")" * 150)) == "x"
    assert expr("-(" * 100 + "x" + ")" * 100).op == "-"
    assert len(expr("+".join(["x"] * 150)).span.source.text) > 0


def test_deep_blocks():
    deep = F + "".join("    " * (i + 1) + "if x:\n" for i in range(200)) + "    " * 201 + "pass\n"
    d = error(deep)
    assert d.message == "blocks nested too deeply" and d.span.line == 102
    ok = F + "".join("    " * (i + 1) + "if x:\n" for i in range(90)) + "    " * 91 + "pass\n"
    assert isinstance(parse(Source("k.tk", ok)).functions[0].body[0], A.If)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_programs_fail_politely(data):
    """Any edit of a valid kernel parses, or fails with one positioned diagnostic."""
    text = SAXPY
    for _ in range(data.draw(st.integers(1, 3))):
        pos = data.draw(st.integers(0, len(text)))
        piece = data.draw(st.sampled_from(list("()[]:,.=+-*/<>!@#\"' \t\n\\x0é") + ["if ", "    ", "\n    ", "not "]))
        text = text[:pos] + piece + text[pos + data.draw(st.integers(0, 2)):]
    try:
        parse(Source("k.tk", text))
    except CompileError as e:
        (d,) = e.diagnostics
        assert d.span is not None and d.span.line >= 1 and d.span.col >= 1
        assert not any(w in d.message for w in ("Token", "__", "$END", "_NL", "RULE"))


# ------------------------------------------------------- engine and speed


def test_grammar_has_no_conflicts(caplog):
    from lark import Lark, logger

    grammar = _lark().source_grammar
    logger.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.DEBUG, logger="lark"):
            Lark(grammar, parser="lalr", lexer="basic", debug=True, maybe_placeholders=True)
    finally:
        logger.setLevel(logging.WARNING)
    assert not [r for r in caplog.records if "conflict" in r.getMessage().lower()]


def test_lark_is_built_once():
    assert _lark() is _lark()


def test_threads_parse_independently():
    texts = [SAXPY.replace("saxpy", f"k{i}") for i in range(8)]
    results: dict[int, str] = {}

    def work(i: int) -> None:
        for _ in range(20):
            results[i] = format_ast(parse(Source(f"t{i}.tk", texts[i], first_line=i + 1)))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(f"FunctionDef k{i} @{6 + i}:1" in results[i] for i in range(8))


def test_the_same_text_is_parsed_once_and_errors_every_time():
    from dsl.grammar import parser

    text = "def f(x: f32[N], y: f32[N]):\n    y[i] = x[i] + 1.0\n"
    first = parse(Source("same.tk", text))
    assert parse(Source("same.tk", text)) is first
    assert parse(Source("other.tk", text)) is not first  # spans name their file
    for _ in range(2):
        with pytest.raises(CompileError):
            parse(Source("bad.tk", "def f(:\n"))
    for k in range(parser.PARSED_KEPT + 1):
        parse(Source(f"many{k}.tk", text))
    assert len(parser._parsed) == parser.PARSED_KEPT and parse(Source("same.tk", text)) is not first
