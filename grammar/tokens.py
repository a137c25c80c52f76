"""Tokens, their spans and their literal values: what the scanner, the AST
builder and the error messages share.

Spans need the `Source` being parsed; `parse` puts it in a thread-local
(`current.source`) for the duration of one call, so parsing is thread-safe.
"""

from __future__ import annotations

import ast as pyast
import inspect
import threading
import warnings
from dataclasses import fields

from .diagnostics import CompileError, Diagnostic, Source, Span

current = threading.local()  # .source: the Source being parsed on this thread


class Tok:
    """A token: what Lark's parser needs (`type`) and positions, 1-based, end exclusive.

    Three times cheaper to make than `lark.Token`; `str()` is the token's text.
    """

    __slots__ = ("type", "value", "start_pos", "line", "column", "end_line", "end_column", "end_pos")

    def __init__(self, type, value, start_pos, line, column, end_line, end_column, end_pos):
        self.type = type
        self.value = value
        self.start_pos = start_pos
        self.line = line
        self.column = column
        self.end_line = end_line
        self.end_column = end_column
        self.end_pos = end_pos

    def __str__(self) -> str:
        return self.value

    def __repr__(self) -> str:
        return f"Tok({self.type!r}, {self.value!r}, {self.line}:{self.column})"


# ---------------------------------------------------------------------- spans

_new = object.__new__
_SPAN_FIELDS = ("source", "line", "col", "end_line", "end_col")
# A frozen dataclass's __init__ costs ~1.5 us; spans are the parser's most common
# allocation, so fill the slots directly (same object, 3x faster) when Span has them.
if tuple(f.name for f in fields(Span)) == _SPAN_FIELDS and hasattr(Span, "__slots__"):
    _SET = tuple(Span.__dict__[name].__set__ for name in _SPAN_FIELDS)
else:  # pragma: no cover - Span changed shape: fall back to the constructor
    _SET = None


def make_span(source: Source, line: int, col: int, end_line: int, end_col: int) -> Span:
    """`Span(source, line, col, end_line, end_col)`, built quickly."""
    if _SET is None:  # pragma: no cover
        return Span(source, line, col, end_line, end_col)
    span = _new(Span)
    set_source, set_line, set_col, set_end_line, set_end_col = _SET
    set_source(span, source)
    set_line(span, line)
    set_col(span, col)
    set_end_line(span, end_line)
    set_end_col(span, end_col)
    return span


def token_span(tok: Tok) -> Span:
    """The span of a token of the source being parsed on this thread."""
    source = current.source
    offset = source.first_line - 1
    return make_span(source, tok.line + offset, tok.column, tok.end_line + offset, tok.end_column)


def join(first, last) -> Span:
    """From the start of `first` to the end of `last`; each a token or a node."""
    source = current.source
    if type(first) is Tok:
        line, col = first.line + source.first_line - 1, first.column
    else:
        line, col = first.span.line, first.span.col
    if type(last) is Tok:
        end_line, end_col = last.end_line + source.first_line - 1, last.end_column
    else:
        end_line, end_col = last.span.end_line, last.span.end_col
    return make_span(source, line, col, end_line, end_col)


def after(tok: Tok) -> Span:
    """A one-character span just after `tok`: where a missing token belongs."""
    span = token_span(tok)
    return make_span(span.source, span.end_line, span.end_col, span.end_line, span.end_col + 1)


def fail(span: Span | None, message: str, *notes: str) -> CompileError:
    """A CompileError with one diagnostic, to raise."""
    return CompileError(Diagnostic(span, message, "error", tuple(notes)))


# ------------------------------------------------------------ literal values


def int_value(tok: Tok) -> int:
    """The value of an integer literal, of any size."""
    text = tok.value.replace("_", "")
    if text[:2].lower() in ("0x", "0o", "0b"):
        return int(text, 0)
    if len(text) > 1 and text[0] == "0" and text.strip("0"):
        raise fail(
            token_span(tok),
            "leading zeros in decimal integer literals are not permitted; use an 0o prefix for octal integers",
        )
    # Python refuses str -> int beyond 4300 digits; convert in chunks to keep any size.
    value = 0
    for i in range(0, len(text), 1000):
        chunk = text[i : i + 1000]
        value = value * 10 ** len(chunk) + int(chunk)
    return value


def string_value(literal: str) -> str:
    """The text of a docstring, with indentation cleaned like `inspect.getdoc`."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # invalid escapes warn in Python 3.12+
        try:
            value = pyast.literal_eval(literal)
        except (ValueError, SyntaxError):
            value = literal.strip("\"'rRuU")
    return inspect.cleandoc(value)
