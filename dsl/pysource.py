"""The source of a Python function, as the kernel language sees it.

The decorator hands the function's own text to the one grammar: decorators are
cut off (they are Python's business), and the `Source` keeps the file's name
and line numbers so messages point into the `.py` file.

`@dsl.kernel(schedule="split(i, 8)")` becomes the kernel's `@schedule(...)`.
When the schedule is a string literal in the file, its text is laid out on the
literal's own lines and columns (the rest of the decorator blanked), so every
span in it is a place in the `.py` file, and `PySource.line` shows the file's
real lines there. A schedule given otherwise (a variable, an f-string) has no
place in the file: `located` moves its diagnostics to the `schedule=` argument
(or the decorator) and quotes the text in a note.
"""

from __future__ import annotations

import ast
import inspect
import io
import re
import tokenize
from contextlib import contextmanager
from dataclasses import dataclass, field, replace

from dsl.grammar.diagnostics import CompileError, Diagnostic, Source, Span

_DEF = re.compile(r"^[ \t]*def\s", re.MULTILINE)
_HEAD = "@schedule("
_WORD = re.compile(r"\w+|\S")


@dataclass(frozen=True)
class ComputedSchedule:
    """A schedule not written as a literal in the decorator: its text, and the place to blame
    instead (1-based line and columns, and that line's real text)."""

    text: str
    line: int
    col: int
    end_col: int
    line_text: str


@dataclass(frozen=True, eq=False)
class PySource(Source):
    """A kernel's text in which some lines are the compiler's, not the user's
    (the `@schedule(...)` made from `schedule=`): `line()` shows the file's real
    line for those ('' for none), so a message never echoes made-up text."""

    real_lines: dict[int, str] = field(default_factory=dict)
    computed: ComputedSchedule | None = None  # set when the schedule is not a literal in the file

    def line(self, number: int) -> str:
        if number in self.real_lines:
            return self.real_lines[number]
        return super().line(number)


def function_source(fn, schedule: str | None = None) -> Source:
    """The text of `fn` from its `def` on, with line numbers of its file; with
    `schedule`, preceded by that `@schedule(...)` (see the module doc)."""
    try:
        lines, first = inspect.getsourcelines(fn)
    except (OSError, TypeError) as exc:
        raise TypeError(f"@dsl.kernel needs the source of '{getattr(fn, '__name__', fn)}', "
                        f"which Python cannot find ({exc}); define it in a file") from None
    # Not dedented: the grammar takes the first line's indentation as the base
    # level, and unchanged text keeps columns right in messages.
    text = "".join(lines)
    match = _DEF.search(text)
    if match is None:
        raise TypeError(f"@dsl.kernel: cannot find 'def' in the source of '{fn.__name__}'")
    skipped = text[: match.start()].count("\n")
    filename = inspect.getsourcefile(fn) or "<unknown>"
    body = Source(filename, text[match.start():], first_line=first + skipped)
    if schedule is None:
        return body
    return _scheduled(body, lines[:skipped], first, schedule)


def referenced_names(source: Source) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source.text))


def _scheduled(body: Source, decorators: list[str], first: int, schedule: str) -> PySource:
    """`body` preceded by `@schedule(<schedule>)`. `decorators` are the file's
    lines above the `def`, the first of them numbered `first`."""
    indent = body.text[: len(body.text) - len(body.text.lstrip(" \t"))]
    arguments = _schedule_arguments(decorators)
    for value in arguments:
        rows = _lay_out(value, schedule, indent, first)
        if rows is not None:
            top = min(rows)
            text = "".join(rows.get(n, "") + "\n" for n in range(top, body.first_line)) + body.text
            real = {n: decorators[n - first].rstrip("\r\n") for n in range(top, body.first_line)}
            return PySource(body.name, text, top, real_lines=real)
    flat = " ".join(schedule.split())
    at = _blame(arguments, decorators, first, body)
    text = f"{indent}{_HEAD}{flat})\n{body.text}"
    # The made-up line shows nothing: `located` moves its diagnostics to `at`.
    return PySource(body.name, text, body.first_line - 1, real_lines={body.first_line - 1: ""},
                    computed=replace(at, text=flat))


def _schedule_arguments(lines: list[str]) -> list[list[tokenize.TokenInfo]]:
    """The tokens of each `schedule=` keyword argument's value in `lines`
    (rows counted from 1 at `lines[0]`)."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO("".join(lines)).readline))
    except (tokenize.TokenError, SyntaxError):
        return []
    found = []
    for k, tok in enumerate(tokens[:-2]):
        if tok.type == tokenize.NAME and tok.string == "schedule" and tokens[k + 1].string == "=":
            value, depth = [], 0
            for t in tokens[k + 2:]:
                if t.type == tokenize.OP and t.string in ",)]}" and depth == 0:
                    break
                if t.type == tokenize.OP and t.string in "([{":
                    depth += 1
                elif t.type == tokenize.OP and t.string in ")]}":
                    depth -= 1
                value.append(t)
            found.append([t for t in value if t.type not in (tokenize.NL, tokenize.COMMENT)])
    return found


def _lay_out(value: list[tokenize.TokenInfo], schedule: str, indent: str, first: int) -> dict[int, str] | None:
    """`@schedule(...)` with the literal's text at its lines and columns in the
    file, as {line number: text}; None unless `value` is a plain string literal
    (or several, concatenated) equal to `schedule`."""
    strings = [t for t in value if t.type == tokenize.STRING]
    if not strings or any(t.type != tokenize.STRING and t.string not in "()" for t in value):
        return None
    try:
        if ast.literal_eval(" ".join(t.string for t in strings)) != schedule:
            return None
    except (ValueError, SyntaxError):
        return None
    rows: dict[int, str] = {}
    for t in strings:
        prefix = re.match(r"[A-Za-z]*", t.string)[0]
        quote = 3 if t.string[len(prefix):][:3] in ('"""', "'''") else 1
        content = t.string[len(prefix) + quote: len(t.string) - quote]
        if set(prefix.lower()) - {"r", "u"} or ("\\" in content and "r" not in prefix.lower()):
            return None  # escapes make the value's columns differ from the file's
        row, col = first + t.start[0] - 1, t.start[1] + len(prefix) + quote
        for k, piece in enumerate(content.split("\n")):
            rows[row + k] = rows.get(row + k, "").ljust(0 if k else col) + piece
    # Pieces of a concatenation are read apart here: they must not split a word.
    if _WORD.findall(" ".join(rows[n] for n in sorted(rows))) != _WORD.findall(schedule):
        return None
    start = min(rows)
    head = indent + _HEAD
    if rows[start][: len(head)].strip():
        if start - 1 < first:
            return None
        start -= 1  # no room before the text on its line: the line above is blank here
        rows[start] = ""
    rows[start] = head + rows[start][len(head):]
    rows[max(rows)] += ")"
    return rows


def _blame(arguments, decorators: list[str], first: int, body: Source) -> ComputedSchedule:
    """Where a computed schedule's diagnostics point: its `schedule=` value,
    else the decorator nearest the `def`, else the `def`."""
    if len(arguments) == 1 and arguments[0]:
        start, end = arguments[0][0].start, arguments[0][-1].end
        text = decorators[start[0] - 1].rstrip("\r\n")
        end_col = end[1] + 1 if end[0] == start[0] else len(text) + 1
        return ComputedSchedule("", first + start[0] - 1, start[1] + 1, end_col, text)
    for k in reversed(range(len(decorators))):
        text = decorators[k].rstrip("\r\n")
        if text.lstrip().startswith("@"):
            col = len(text) - len(text.lstrip()) + 1
            return ComputedSchedule("", first + k, col, len(text) + 1, text)
    text = body.line(body.first_line)
    col = len(text) - len(text.lstrip()) + 1
    return ComputedSchedule("", body.first_line, col, len(text) + 1, text)


@contextmanager
def located():
    """Re-raise a `CompileError` with the diagnostics on computed schedules
    moved to the file (see `relocate`)."""
    try:
        yield
    except CompileError as err:
        moved = relocate(err)
        if moved is err:
            raise
        raise moved from None


def relocate(err: CompileError) -> CompileError:
    """`err` with each diagnostic on a computed schedule's made-up line pointing
    at its `schedule=` argument instead, the schedule quoted in a note with a
    caret at the place; `err` itself when there are none."""
    diagnostics = [_relocated(d) for d in err.diagnostics]
    if all(new is old for new, old in zip(diagnostics, err.diagnostics)):
        return err
    return CompileError(diagnostics)


def _relocated(d: Diagnostic) -> Diagnostic:
    span = d.span
    source = span.source if span is not None else None
    if not isinstance(source, PySource) or source.computed is None or span.line != source.first_line:
        return d
    c = source.computed
    offset = source.text.index(_HEAD) + len(_HEAD)
    at = min(max(span.col - 1 - offset, 0), len(c.text))
    width = span.end_col - span.col if span.end_line == span.line else len(c.text) - at
    lead = "in the schedule (not a string literal in the decorator): "
    note = f"{lead}{c.text}\n{' ' * (len('note: ' + lead) + at)}^{'~' * max(0, min(width, len(c.text) - at) - 1)}"
    # A plain Source holding the real line: relocating again changes nothing.
    shown = Source(source.name, c.line_text + "\n", first_line=c.line)
    return replace(d, span=Span(shown, c.line, c.col, c.line, c.end_col), notes=(*d.notes, note))
