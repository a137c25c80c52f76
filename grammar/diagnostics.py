"""Source text, spans and diagnostics: how the compiler talks to people.

Every AST and IR node carries a `Span`. A user mistake becomes a `Diagnostic`;
all diagnostics of a run are raised together as one `CompileError`, which renders
as `file:line:col: error: message`, the source line, and a caret under the span.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True, eq=False)
class Source:
    """A piece of program text and where it came from.

    `first_line` is the line number of the text's first line in `name`: a kernel
    taken out of a Python file keeps that file's line numbers in its messages.
    """

    name: str
    text: str
    first_line: int = 1

    def line(self, number: int) -> str:
        lines = self.text.splitlines()
        index = number - self.first_line
        return lines[index] if 0 <= index < len(lines) else ""


@dataclass(frozen=True, slots=True)
class Span:
    """A range in a `Source`: 1-based lines and columns, end exclusive."""

    source: Source
    line: int
    col: int
    end_line: int
    end_col: int

    def __repr__(self) -> str:
        return f"{self.source.name}:{self.line}:{self.col}"

    def to(self, other: "Span") -> "Span":
        """The span from the start of `self` to the end of `other`."""
        return Span(self.source, self.line, self.col, other.end_line, other.end_col)

    @property
    def location(self) -> str:
        return f"{self.source.name}:{self.line}:{self.col}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    span: Span | None
    message: str
    severity: str = "error"
    notes: tuple[str, ...] = ()

    def render(self) -> str:
        """`file:line:col: error: message`, the line, a caret, then notes."""
        if self.span is None:
            head = f"{self.severity}: {self.message}"
            return "\n".join([head, *(f"note: {n}" for n in self.notes)])
        span = self.span
        text = span.source.line(span.line).rstrip("\n").expandtabs(1)
        width = span.end_col - span.col if span.end_line == span.line else len(text) - span.col + 1
        caret = " " * (span.col - 1) + "^" + "~" * max(0, width - 1)
        parts = [f"{span.location}: {self.severity}: {self.message}"]
        if text:
            parts += [f"    {text}", f"    {caret}"]
        parts += [f"note: {n}" for n in self.notes]
        return "\n".join(parts)


class CompileError(Exception):
    """One or more user mistakes found by the compiler; `str()` renders them all."""

    def __init__(self, diagnostics: list[Diagnostic] | Diagnostic):
        if isinstance(diagnostics, Diagnostic):
            diagnostics = [diagnostics]
        self.diagnostics = list(diagnostics)
        super().__init__(self.render())

    def render(self) -> str:
        """Every diagnostic rendered in order (see `Diagnostic.render`), then
        "N errors generated." when there is more than one error."""
        count = len([d for d in self.diagnostics if d.severity == "error"])
        body = "\n".join(d.render() for d in self.diagnostics)
        tail = f"\n{count} errors generated." if count > 1 else ""
        return body + tail


@dataclass
class DiagnosticBag:
    """Collects diagnostics so a pass can report all mistakes at once."""

    items: list[Diagnostic] = field(default_factory=list)

    def error(self, span: Span | None, message: str, *notes: str) -> None:
        diagnostic = Diagnostic(span, message, "error", tuple(notes))
        if diagnostic not in self.items:  # an inlined function is checked at each call
            self.items.append(diagnostic)

    def has_errors(self) -> bool:
        return any(d.severity == "error" for d in self.items)

    def raise_if_errors(self) -> None:
        if self.has_errors():
            ordered = sorted(self.items, key=_position)
            raise CompileError(ordered)


def _position(d: Diagnostic) -> tuple:
    if d.span is None:
        return ("", 0, 0)
    return (d.span.source.name, d.span.line, d.span.col)


def closest(name: str, candidates) -> str | None:
    """The candidate most like `name` (for 'did you mean ...?'), or None."""
    import difflib

    found = difflib.get_close_matches(name, sorted(candidates), n=1, cutoff=0.6)
    return found[0] if found else None


def did_you_mean(name: str, candidates) -> tuple[str, ...]:
    guess = closest(name, candidates)
    return (f"did you mean '{guess}'?",) if guess else ()
