"""A progress bar on stderr for long runs: drawn only on a terminal.

    with Progress("dslc", total=len(files)) as bar:
        for f in files:
            bar.step(f.name)          # "dslc [#######·······] 3/7 b.tk"
            build(f)

On a pipe, a file or in CI (stderr not a terminal), or with `DSL_NO_PROGRESS=1`
(commands also take `--no-progress`), nothing is drawn and every call is a
no-op, so logs stay clean. The line is redrawn in place with a carriage
return; `message` prints a whole line (a diagnostic, say) above the bar
without tangling the two.
"""

from __future__ import annotations

import sys
import time

from .options import progress_disabled

WIDTH = 24  # cells in the bar
MAX_NOTE = 48  # characters of the note after the counts


def wanted(stream=None, disabled: bool = False) -> bool:
    """Whether to draw: `stream` (default stderr) is a terminal, and neither
    `disabled` (a --no-progress flag) nor DSL_NO_PROGRESS says otherwise."""
    stream = sys.stderr if stream is None else stream
    if disabled or progress_disabled():
        return False
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


class Progress:
    """`label [####····] done/total note`, redrawn on `stream` (default stderr).

    `enabled=None` asks `wanted(stream)`; the bar closes itself (with a newline)
    when used as a context manager, or on `close()`.
    """

    def __init__(self, label: str, total: int, stream=None, enabled: bool | None = None):
        self.label, self.total = label, max(0, int(total))
        self.stream = sys.stderr if stream is None else stream
        self.enabled = wanted(self.stream) if enabled is None else enabled
        self.done, self.note = 0, ""
        self.started = time.monotonic()
        self._shown = 0  # length of the line on screen, to blank what a shorter line leaves

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def update(self, done: int, note: str = "", total: int | None = None) -> None:
        """Show `done` of `total` items finished, with `note` after the counts."""
        if total is not None:
            self.total = max(0, int(total))
        self.done, self.note = done, note
        self._draw()

    def step(self, note: str = "") -> None:
        """Announce the next item (`note`: what is being done now), counts unchanged."""
        self.note = note
        self._draw()

    def advance(self, note: str = "") -> None:
        """One more item finished."""
        self.update(self.done + 1, note or self.note)

    def message(self, text: str) -> None:
        """Print `text` as whole lines (on the bar's stream), then redraw the bar."""
        if not self.enabled:
            return
        self._clear()
        self.stream.write(text.rstrip("\n") + "\n")
        self._draw()

    def clear(self) -> None:
        """Blank the bar's line (for output that is not ours, a warning say);
        the next update draws it again."""
        if self.enabled:
            self._clear()
            self.stream.flush()

    def close(self) -> None:
        """End the bar's line, once: the next output starts on a fresh line."""
        if self.enabled and self._shown:
            self.stream.write("\n")
            self.stream.flush()
        self._shown = 0
        self.enabled = False

    def line(self) -> str:
        """The text of the bar as drawn now (without the carriage return)."""
        total = max(self.total, 1)
        filled = min(WIDTH, WIDTH * self.done // total)
        bar = "#" * filled + "." * (WIDTH - filled)
        note = self.note if len(self.note) <= MAX_NOTE else self.note[:MAX_NOTE - 3] + "..."
        elapsed = time.monotonic() - self.started
        return f"{self.label} [{bar}] {self.done}/{self.total} {_clock(elapsed)}" + (f" {note}" if note else "")

    def _draw(self) -> None:
        if not self.enabled:
            return
        text = self.line()
        self.stream.write("\r" + text + " " * max(0, self._shown - len(text)))
        self.stream.flush()
        self._shown = len(text)

    def _clear(self) -> None:
        if self._shown:
            self.stream.write("\r" + " " * self._shown + "\r")
            self._shown = 0


def _clock(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}:{seconds:02d}"
