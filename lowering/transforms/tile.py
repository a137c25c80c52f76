"""`tile(i, j, fi, fj)`: split `i` by `fi` and `j` by `fj`, then order the loops
`i.outer, j.outer, i.inner, j.inner` — a 2-D block of the iteration space.

Needs `i` and `j` perfectly nested and `tail=mask` (tiles of a peeled split are
not perfectly nested); the reorder is checked like `reorder`.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..schedule import Directive, LoopRef
from . import reorder, split
from .nest import ScheduleError

name = "tile"


def run(kernel: ir.Kernel, d: Directive) -> ir.Kernel:
    tail = d.option("tail", "mask")
    if tail != "mask":
        raise ScheduleError(d.span, "tile() needs tail=mask (a peeled tail would break the nest)",
                            "or split and reorder step by step")
    (a, b), (fa, fb) = d.loops, d.ints
    kernel = split.run(kernel, _directive("split", (a,), (fa,), d))
    kernel = split.run(kernel, _directive("split", (b,), (fb,), d))
    refs = tuple(LoopRef(f"{ref.name}.{part}", ref.span) for part in ("outer", "inner") for ref in (a, b))
    order = (refs[0], refs[1], refs[2], refs[3])
    return reorder.run(kernel, _directive("reorder", order, (), d))


def _directive(name: str, loops, ints, d: Directive) -> Directive:
    return replace(d, name=name, loops=tuple(loops), ints=tuple(ints), options=(("tail", "mask"),))
