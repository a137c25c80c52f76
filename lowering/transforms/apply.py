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
from ..machine import Machine
from . import auto_parallel, contract, fuse, if_convert, parallel, reorder, split, tile, unroll, vectorize
from .nest import ScheduleError

PASSES = {p.name: p for p in (split, tile, reorder, unroll, parallel, fuse, vectorize, contract)}
PRINTABLE = (*PASSES, "auto")  # names `--print-after` accepts for the schedule's passes


def apply_schedule(kernel: ir.Kernel, after=None, check: bool = True, machine: Machine = Machine(),
                   remarks: list | None = None) -> ir.Kernel:
    """Run the kernel's directives; a kernel without `@schedule` gets the automatic one.

    `remarks`, when a list, receives `Diagnostic`s (severity 'remark') saying
    what was done to each loop nest and why (`dslc --remarks`).
    """
    if not kernel.schedule and not kernel.auto_schedule:  # `@schedule()`: exactly as written
        return kernel
    kernel = if_convert.run(kernel)
    if not kernel.schedule:
        kernel = contract.auto(kernel, machine, remarks)
        kernel = auto_parallel.run(kernel, remarks)
        if check:
            verify(kernel, "loops")
        if after is not None:
            after("auto", kernel)
        return kernel
    for directive in kernel.schedule:
        try:
            if directive.name == "contract":
                kernel = contract.run(kernel, directive, machine, remarks)
            else:
                kernel = PASSES[directive.name].run(kernel, directive)
        except ScheduleError as err:
            raise CompileError(Diagnostic(err.span, err.message, notes=tuple(err.notes))) from None
        if check:
            verify(kernel, "loops")
        if after is not None:
            after(directive.name, kernel)
    return replace(kernel, schedule=())
