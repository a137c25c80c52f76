"""Apply a kernel's schedule: each directive is a named pass over the loop IR.

Passes run in the order written; the verifier runs after each, and `after(name,
kernel)` lets the driver print or dump the IR (`--print-after=split`). A
directive that cannot apply stops the compile with a diagnostic at its span.
"""

from __future__ import annotations

from dataclasses import replace

from dsl.grammar.diagnostics import CompileError, Diagnostic

from .. import ir
from ..verify import verify
from . import fuse, parallel, reorder, split, tile, unroll, vectorize
from .nest import ScheduleError

PASSES = {p.name: p for p in (split, tile, reorder, unroll, parallel, fuse, vectorize)}


def apply_schedule(kernel: ir.Kernel, after=None, check: bool = True) -> ir.Kernel:
    for directive in kernel.schedule:
        try:
            kernel = PASSES[directive.name].run(kernel, directive)
        except ScheduleError as err:
            raise CompileError(Diagnostic(err.span, err.message, notes=tuple(err.notes))) from None
        if check:
            verify(kernel, "loops")
        if after is not None:
            after(directive.name, kernel)
    return replace(kernel, schedule=())
