"""Text to tokens: the scanner and the indenter.

`Scanner` matches the grammar's terminals (from the Lark object, so `tk.lark`
stays the one definition) with one regex; `Layout` applies Python's layout
rules to the result. Both raise `CompileError` for what they alone can see:
bad characters, brackets, indentation, reserved words.
"""

from __future__ import annotations

import re

from lark import Lark
from lark.indenter import Indenter

from .diagnostics import CompileError, Span
from .syntax_errors import bad_character, reserved_word
from .tokens import Tok, fail, token_span

MAX_BLOCK_DEPTH = 100  # like CPython's limit on indentation levels
MAX_BRACKET_DEPTH = 200  # like CPython's limit on nested parentheses


class Scanner:
    """Lark's terminals for this grammar, in Lark's priority order, as one regex.

    Keywords are not in the regex: a NAME whose text is a keyword takes the
    keyword's type, as in Lark's lexer.
    """

    def __init__(self, lark: Lark):
        terminals = sorted(
            lark.terminals, key=lambda t: (-t.priority, -t.pattern.max_width, -len(t.pattern.value), t.name)
        )
        name = re.compile(next(t for t in terminals if t.name == "NAME").pattern.to_regexp())
        self.keywords = {
            t.pattern.value: t.name for t in terminals if t.pattern.type == "str" and name.fullmatch(t.pattern.value)
        }
        # RESERVED is a list of words: look them up like keywords, rather than
        # try a 19-way alternative before every token.
        reserved = next(t for t in terminals if t.name == "RESERVED").pattern.to_regexp()
        for word in re.findall(r"[A-Za-z_]+", reserved):
            if re.fullmatch(reserved, word) and name.fullmatch(word):
                self.keywords[word] = "RESERVED"
        kept = [t for t in terminals if t.name not in self.keywords.values()]
        alternatives = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in kept)
        # Blanks before a token are skipped in the same match: a third fewer matches.
        self.regex = re.compile(f"[ \\t\\f]*(?:{alternatives})")
        self.ignore = frozenset(lark.ignore_tokens)

    def tokens(self, text: str):
        """The tokens of `text`; a character no token starts with is a CompileError."""
        match, keywords, ignore = self.regex.match, self.keywords, self.ignore
        pos, line, line_start, size = 0, 1, 0, len(text)
        while pos < size:
            m = match(text, pos)
            if m is None:
                pos += len(text[pos:]) - len(text[pos:].lstrip(" \t\f"))
                raise CompileError(bad_character(text, pos, line, pos - line_start + 1))
            kind, end = m.lastgroup, m.end()
            pos = m.start(kind)
            value = text[pos:end]
            column = pos - line_start + 1
            newlines = value.count("\n")
            if newlines:
                line_start = text.rfind("\n", pos, end) + 1
                end_line, end_column = line + newlines, end - line_start + 1
            else:
                end_line, end_column = line, column + end - pos
            if kind not in ignore:
                if kind == "NAME":
                    kind = keywords.get(value, kind)
                yield Tok(kind, value, pos, line, column, end_line, end_column, end)
            line, pos = end_line, end


def unclosed_bracket(scanner: Scanner, text: str) -> Tok | None:
    """The innermost bracket still open at the end of the input, if any: a second
    pass over the tokens, made only after a syntax error."""
    layout = Layout(text)
    try:
        for _ in layout.process(scanner.tokens(text)):
            pass
    except CompileError:
        pass
    return layout.unclosed


def end_token(last: Tok | None) -> Tok:
    """`$END`, placed just after the last real token (for 'unexpected end of file')."""
    if last is None:
        return Tok("$END", "", 0, 1, 1, 1, 2, 0)
    return Tok("$END", "", last.end_pos, last.end_line, last.end_column, last.end_line, last.end_column + 1, 0)


def _indent_width(indent: str) -> int:
    """Columns of leading whitespace; a tab moves to the next multiple of 8, like Python."""
    width = 0
    for ch in indent:
        width = (width // 8 + 1) * 8 if ch == "\t" else width + 1
    return width


_CLOSER = {"LPAR": "RPAR", "LSQB": "RSQB"}


class Layout(Indenter):
    """Python's layout rules over the token stream: `_INDENT`/`_DEDENT` tokens,
    newlines ignored inside brackets, and bookkeeping for error messages (open
    brackets and what they are, where logical lines start, the previous token).

    The indentation of the first line of code is the base level, so a kernel cut
    out of an indented Python block parses with its original columns.
    """

    NL_type = "_NL"
    OPEN_PAREN_types = ["LPAR", "LSQB"]
    CLOSE_PAREN_types = ["RPAR", "RSQB"]
    INDENT_type = "_INDENT"
    DEDENT_type = "_DEDENT"
    tab_len = 8

    def __init__(self, text: str):
        super().__init__()
        self.text = text
        self.brackets: list[tuple[Tok, str]] = []  # (opening token, "call"|"params"|...)
        self.line_starts: list[Tok] = []  # first token of each logical line so far
        self.prev: Tok | None = None  # the real token before `last`
        self.last: Tok | None = None  # the last real token handed to the parser
        self.assigned = False  # this logical line already had a top-level '='
        self.unclosed: Tok | None = None  # set when the input ends inside brackets
        self._line_start = True

    def handle_NL(self, token: Tok):
        if self.brackets:
            return
        self._line_start = True
        self.assigned = False
        if token.end_pos >= len(self.text):
            indent = self.indent_level[0]  # the end of the file closes every block
        else:
            indent = _indent_width(token.value.rsplit("\n", 1)[1])
        if not self.line_starts:
            self.indent_level = [indent]  # comments before the first line of code
            return
        yield token
        if indent > self.indent_level[-1]:
            if len(self.indent_level) > MAX_BLOCK_DEPTH:
                raise fail(_at_line_start(token), "blocks nested too deeply")
            self.indent_level.append(indent)
            yield _layout_token(self.INDENT_type, token)
            return
        while len(self.indent_level) > 1 and indent < self.indent_level[-1]:
            self.indent_level.pop()
            yield _layout_token(self.DEDENT_type, token)
        if indent != self.indent_level[-1]:
            raise fail(_at_line_start(token), "unindent does not match any outer indentation level")

    def _process(self, stream):
        for tok in stream:
            kind = tok.type
            if kind == "_NL":
                yield from self.handle_NL(tok)
                continue
            if self._line_start:
                self._start_line(tok)
            if kind in _CLOSER or kind == "RPAR" or kind == "RSQB" or kind == "RESERVED":
                self._check(tok)
            self.prev, self.last = self.last, tok
            yield tok
            if kind in _CLOSER:
                self.brackets.append((tok, self._bracket_kind(tok)))
            elif kind == "RPAR" or kind == "RSQB":
                self.brackets.pop()
            elif kind == "EQUAL" and not self.brackets:
                self.assigned = True
        if self.brackets:
            self.unclosed = self.brackets[-1][0]
            raise fail(token_span(self.unclosed), f"unclosed '{self.unclosed}'")

    def _start_line(self, tok: Tok) -> None:
        if not self.line_starts and tok.column > 1:
            line_begin = self.text.rfind("\n", 0, tok.start_pos) + 1
            self.indent_level = [_indent_width(self.text[line_begin : tok.start_pos])]
        self.line_starts.append(tok)
        self._line_start = False

    def _check(self, tok: Tok) -> None:
        """Errors the token stream alone can show: brackets, reserved words."""
        kind = tok.type
        if kind in _CLOSER and len(self.brackets) >= MAX_BRACKET_DEPTH:
            raise fail(token_span(tok), "expression nested too deeply")
        if kind in ("RPAR", "RSQB"):
            if not self.brackets:
                raise fail(token_span(tok), f"unmatched '{tok}'")
            opener = self.brackets[-1][0]
            if _CLOSER[opener.type] != kind:
                raise fail(token_span(tok), f"closing '{tok}' does not match opening '{opener}'")
        elif kind == "RESERVED":
            raise fail(token_span(tok), reserved_word(tok.value))

    def _bracket_kind(self, tok: Tok) -> str:
        head = self.line_starts[-1].type
        if tok.type == "LSQB":
            return "dims" if head == "DEF" else "subscript"
        if head == "DEF" and not self.brackets:
            return "params"
        return "call" if self.prev is not None and self.prev.type == "NAME" else "paren"


def _layout_token(kind: str, nl: Tok) -> Tok:
    """An indent/dedent token placed at the first character of the next line."""
    return Tok(kind, "", nl.end_pos, nl.end_line, nl.end_column, nl.end_line, nl.end_column + 1, nl.end_pos)


def _at_line_start(nl: Tok) -> Span:
    return token_span(_layout_token("_INDENT", nl))
