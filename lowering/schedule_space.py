"""The candidates of a schedule with open parameters.

    @schedule(split(i, choice(32, 64, 128)), one_of(parallel(i.outer), unroll(i.inner, 4)))

has 3 x 2 = 6 concrete schedules. `candidates` lists them in a fixed order,
the first being every first value (what runs when nobody tunes); the
autotuner times them and remembers the index of the fastest (`pick`).

    >>> [describe(c) for c in candidates(kernel.schedule)][:2]     # doctest: +SKIP
    ['split(i, 32), parallel(i.outer)', 'split(i, 32), unroll(i.inner, 4)']
"""

from __future__ import annotations

import itertools
from dataclasses import replace

from .schedule import Choice, Directive

MAX_CANDIDATES = 512  # a larger space is cut here, in order (the first values first)


def is_open(schedule: tuple) -> bool:
    """Does the schedule leave anything for the autotuner to choose?"""
    return any(len(_options_of(d)) > 1 for d in schedule)


def candidates(schedule: tuple) -> list[tuple[Directive, ...]]:
    """Every concrete schedule (no `Choice` left), at most MAX_CANDIDATES."""
    per_directive = [_options_of(d) for d in schedule]
    return [tuple(c) for c in itertools.islice(itertools.product(*per_directive), MAX_CANDIDATES)]


def pick(schedule: tuple, index: int) -> tuple[Directive, ...]:
    """The `index`-th candidate; 0 (the default) when out of range."""
    options = candidates(schedule)
    return options[index] if 0 <= index < len(options) else options[0] if options else ()


def _options_of(d) -> list[Directive]:
    if isinstance(d, Choice):
        return [c for alt in d.values for c in _options_of(alt)]
    ints = [v.values if isinstance(v, Choice) else (v,) for v in d.ints]
    keys = [k for k, _ in d.options]
    opts = [v.values if isinstance(v, Choice) else (v,) for _, v in d.options]
    out = []
    for chosen_ints in itertools.product(*ints):
        for chosen_opts in itertools.product(*opts):
            out.append(replace(d, ints=tuple(chosen_ints), options=tuple(zip(keys, chosen_opts))))
    return out


def describe(schedule: tuple[Directive, ...]) -> str:
    """A concrete schedule as source text: 'split(i, 64), vectorize(i.inner, 8)'."""
    parts = []
    for d in schedule:
        args = [ref.name for ref in d.loops] + [str(v) for v in d.ints]
        args += [f"{k}={v}" for k, v in d.options]
        parts.append(f"{d.name}({', '.join(args)})")
    return ", ".join(parts)
