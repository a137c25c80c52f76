"""Syntax errors people understand: from Lark's view of a failure (the token, the
terminals the parser would have accepted) and the indenter's bookkeeping (the
open brackets, the first token of each line), choose a message and a span.

The rules are tried in order, most specific first; each returns a (message,
span) pair or None. Messages name source text, never grammar symbols.
"""

from __future__ import annotations

from .diagnostics import Diagnostic, Span, closest
from .tokens import Tok, after, current, token_span

STRING_MESSAGE = "a string literal is only allowed as a docstring (the first statement of a function or file)"
TOP_LEVEL_MESSAGE = "only 'def' and 'from ... import' are allowed at the top level of a kernel file"

_LAYOUT = {"_NL": "end of line", "_INDENT": "indent", "_DEDENT": "end of block", "$END": "end of file"}

_COLON_AFTER = {
    "FOR": "after the for header",
    "IF": "after the if condition",
    "ELIF": "after the elif condition",
    "ELSE": "after 'else'",
    "DEF": "after the function signature",
}

_CLOSING = {"call": ("RPAR", "expected ')' or ',' in call"), "paren": ("RPAR", "expected ')'"),
            "subscript": ("RSQB", "expected ']' or ',' in subscript")}

# What must follow a token, when something else did.
_AFTER = {
    "DEF": "expected a function name after 'def'",
    "DOT": "expected a name after '.'",
    "ARROW": "expected a return type after '->'",
    "AT": "expected a decorator name after '@'",
    "FROM": "expected a module name after 'from' (relative imports are not supported)",
}

_RESERVED = {
    "while": "'while' loops are not supported; use 'for ... in range(...)'",
    "break": "'break' is not supported; loops always run to the end of their range",
    "continue": "'continue' is not supported; use 'if' around the rest of the loop body",
    "class": "classes are not supported; a kernel file holds functions",
    "is": "'is' is not supported; compare values with '=='",
    "as": "'as' is not supported; import names as they are",
}


def reserved_word(word: str) -> str:
    """The message for a Python keyword the kernel language does not have."""
    return _RESERVED.get(word, f"'{word}' is not supported in the kernel language")


def describe(tok: Tok) -> str:
    """How a token is named in a message: its text in quotes, or 'end of line'."""
    if tok.type in _LAYOUT:
        return _LAYOUT[tok.type]
    text = tok.value if len(tok.value) <= 20 else tok.value[:17] + "..."
    return f"'{text}'"


def bad_character(text: str, pos: int, line: int, column: int) -> Diagnostic:
    """The diagnostic for a character no token can start with."""
    source = current.source
    row = line + source.first_line - 1
    span = Span(source, row, column, row, column + 1)
    ch = text[pos]
    if ch in "\"'":
        kind = "triple-quoted string literal" if text.startswith(ch * 3, pos) else "string literal"
        return Diagnostic(span, f"unterminated {kind}")
    if ord(ch) > 127:
        shown = f"'{ch}' (U+{ord(ch):04X})"
        if ("a" + ch).isidentifier():
            return Diagnostic(span, f"unexpected character {shown}: identifiers must be ASCII")
        return Diagnostic(span, f"unexpected character {shown}")
    if not ch.isprintable():
        return Diagnostic(span, f"unexpected character U+{ord(ch):04X}")
    hints = {"!": "; use 'not' for logical negation", ";": "; write one statement per line"}
    return Diagnostic(span, f"unexpected character '{ch}'{hints.get(ch, '')}")


class _Failure:
    """What is known at a syntax error, with the names the rules use."""

    def __init__(self, tok: Tok, expected: set[str], layout):
        self.tok = tok
        self.kind = tok.type
        self.expected = expected
        self.layout = layout
        self.prev = layout.prev if tok is layout.last else layout.last
        starts = layout.line_starts or [tok]
        # The first token of the failing token's line; for a token that begins
        # a line, of the line before (the header of a missing block).
        self.head = starts[-2] if tok is starts[-1] and len(starts) > 1 else starts[-1]
        self.inside = layout.brackets[-1][1] if layout.brackets else None
        self.at_line_end = self.kind in ("_NL", "_DEDENT", "$END")

    def here(self) -> Span:
        """Where to point: at the token, or just after the last one at a line end."""
        if self.at_line_end and self.prev is not None:
            return after(self.prev)
        return token_span(self.tok)

    def wants_expression(self) -> bool:
        return "NAME" in self.expected and "INT" in self.expected


def explain(tok: Tok, expected: set[str], layout, unclosed: Tok | None) -> Diagnostic:
    """The diagnostic for a token the parser cannot accept."""
    if unclosed is not None and unclosed.start_pos < (tok.start_pos or 0):
        return Diagnostic(token_span(unclosed), f"unclosed '{unclosed}'")
    f = _Failure(tok, expected, layout)
    for rule in _RULES:
        found = rule(f)
        if found is not None:
            return Diagnostic(found[1], found[0])
    return Diagnostic(f.here(), f"invalid syntax: unexpected {describe(tok)}")


def _layout_rule(f: _Failure):
    if f.kind == "_INDENT":
        return "unexpected indent", token_span(f.tok)
    if "_INDENT" in f.expected:
        message = f"expected an indented block after '{f.head.value}'"
        if f.kind == "$END":
            return f"unexpected end of file: {message}", f.here()
        return message, token_span(f.tok)
    if f.kind == "$END":
        return "unexpected end of file", f.here()
    return None


def _misplaced_rule(f: _Failure):
    """Tokens that are never right where they are."""
    if f.kind == "STRING":
        return STRING_MESSAGE, token_span(f.tok)
    if f.prev is not None and f.prev.type == "STRING":
        return STRING_MESSAGE, token_span(f.prev)
    if f.kind == "NONE":
        return "'None' is only allowed as a return type ('-> None')", token_span(f.tok)
    nested = len(f.layout.indent_level) > 1
    if f.kind == "DEF" and nested:
        return "nested functions are not supported; 'def' is only allowed at the top level", token_span(f.tok)
    if f.kind == "FROM" and nested:
        return "'from ... import' is only allowed at the top level", token_span(f.tok)
    if f.kind == "AT" and nested:
        return "decorators are only allowed at the top level, before a 'def'", token_span(f.tok)
    if f.kind == "IMPORT" and f.tok is f.layout.line_starts[-1]:
        return "only 'from module import name' imports are supported", token_span(f.tok)
    if f.kind in ("ELSE", "ELIF") and "ELSE" not in f.expected:
        return f"'{f.tok}' without a matching 'if'", token_span(f.tok)
    if "DEF" in f.expected and "AT" in f.expected and "NAME" not in f.expected:
        return "expected 'def' after the decorators", token_span(f.tok)
    return None


def _assignment_rule(f: _Failure):
    if f.kind == "EQUAL":
        if f.inside == "params":
            return "default parameter values are not supported", token_span(f.tok)
        if f.layout.assigned and f.inside is None:
            return "chained assignment is not supported; write one assignment per line", token_span(f.tok)
        if f.inside is None and f.head.type == "NAME" and "_NL" in f.expected and "PLUS" not in f.expected:
            return ("a declaration takes no value: a local array starts at zero, and a scalar local "
                    f"needs none (write '{f.head} = value')"), token_span(f.tok)
        return "'=' is assignment; did you mean '=='?", token_span(f.tok)
    if f.prev is not None and f.prev.type == "COLON" and f.head.type == "NAME" and f.inside is None:
        return f"expected a type after ':', as in '{f.head}: f32[4]' (a local array)", f.here()
    if f.kind == "COMMA" and f.inside in (None, "paren") and f.head.type != "FOR":
        return "unexpected ','; tuples are not supported", token_span(f.tok)
    return None


def _declaration_rule(f: _Failure):
    """Inside a parameter list, a tensor type, or a from-import."""
    if f.inside == "params":
        if f.prev.type == "COLON":
            return "expected a type after ':'", f.here()
        if "COLON" in f.expected and f.prev.type == "NAME":
            name = f.prev.value
            return f"parameter '{name}' needs a type, as in '{name}: f32'", token_span(f.prev)
        if "NAME" in f.expected and "RPAR" in f.expected or f.expected == {"NAME"}:
            return "expected a parameter name", f.here()
        if "RPAR" in f.expected:
            return "expected ')' or ',' in the parameter list", f.here()
    if f.head.type == "DEF" and f.inside is None and "LPAR" in f.expected:
        return "expected '(' after the function name", f.here()
    if f.inside == "dims":
        return "a tensor dimension must be a name or an integer literal", f.here()
    after_prev = _AFTER.get(f.prev.type) if f.prev is not None else None
    if after_prev is not None and f.kind not in f.expected:
        return after_prev, f.here()
    if "IMPORT" in f.expected:
        return "expected 'import' after the module name", f.here()
    if f.head.type == "FROM" and f.expected <= {"NAME", "LPAR"}:
        return "expected a name to import", f.here()
    return None


def _header_rule(f: _Failure):
    """Block headers: the colon, and the parts of a for header."""
    if "COLON" in f.expected and (f.kind == "_NL" or f.expected <= {"COLON", "ARROW"}):
        where = _COLON_AFTER.get(f.head.type)
        return (f"expected ':' {where}" if where else "expected ':'"), f.here()
    if f.head.type == "FOR" and f.inside in (None, "paren"):
        if "IN" in f.expected:
            if f.kind in ("LSQB", "DOT"):
                return "loop variables must be plain names", token_span(f.tok)
            return "expected 'in' after the loop variables", f.here()
        if "NAME" in f.expected and "INT" not in f.expected:
            return "expected a loop variable name", f.here()
    return None


def _expression_rule(f: _Failure):
    if f.kind == "LSQB":
        if f.wants_expression():
            return "list literals are not supported", token_span(f.tok)
        if f.prev is not None and f.prev.type == "RSQB":
            return "index a tensor with one subscript, as in A[i, j], not A[i][j]", token_span(f.tok)
        return "only a tensor name can be indexed", token_span(f.tok)
    if f.wants_expression():
        if f.at_line_end:
            return "expected an expression", f.here()
        return f"expected an expression, found {describe(f.tok)}", token_span(f.tok)
    closing = _CLOSING.get(f.inside)
    if closing is not None and closing[0] in f.expected:
        return closing[1], f.here()
    if "ELSE" in f.expected and "NAME" not in f.expected:
        return "expected 'else' in the conditional expression 'a if cond else b'", f.here()
    return None


def _keyword_typo_rule(f: _Failure):
    """`retrun x`, `esle:`, `fro i in ...`: a line starting with a misspelled keyword."""
    if f.head.type == "NAME" and f.prev is f.head and len(f.head.value) >= 3:
        guess = closest(f.head.value, _STATEMENT_KEYWORDS)
        if guess is not None:
            return f"invalid syntax: unknown statement '{f.head}'; did you mean '{guess}'?", token_span(f.head)
    return None


_STATEMENT_KEYWORDS = ("def", "for", "if", "elif", "else", "return", "pass", "from", "import")

_RULES = (
    _keyword_typo_rule, _layout_rule, _misplaced_rule, _assignment_rule,
    _declaration_rule, _header_rule, _expression_rule,
)
