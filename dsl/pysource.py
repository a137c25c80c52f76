"""The source of a Python function, as the kernel language sees it.

The decorator hands the function's own text to the one grammar: decorators are
cut off (they are Python's business), and the `Source`
keeps the file's name and line numbers so messages point into the `.py` file.
"""

from __future__ import annotations

import inspect
import re

from dsl.grammar.diagnostics import Source

_DEF = re.compile(r"^[ \t]*def\s", re.MULTILINE)


def function_source(fn) -> Source:
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
    return Source(filename, text[match.start():], first_line=first + skipped)


def referenced_names(source: Source) -> set[str]:
    return set(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", source.text))


def with_schedule(source: Source, schedule: str | None) -> Source:
    """`source` with `@schedule(<schedule>)` above its `def` (one line, same
    indentation, numbered as the line above the `def`, where the decorator is)."""
    if schedule is None:
        return source
    if "\n" in schedule.strip():
        schedule = " ".join(schedule.split())
    indent = source.text[: len(source.text) - len(source.text.lstrip(" \t"))]
    text = f"{indent}@schedule({schedule})\n{source.text}"
    return Source(source.name, text, first_line=source.first_line - 1)
