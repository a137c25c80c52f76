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
from ..schedule import LoopRef
from ..schedule_space import pick as pick_candidate
from . import (auto_parallel, contract, fuse, hoist, if_convert, interleave_stores, pack_operand, parallel, reorder,
               split, tile, transpose_loads, unroll, vectorize)
from .nest import ScheduleError, find_loops

PASSES = {p.name: p for p in (split, tile, reorder, unroll, parallel, fuse, vectorize, hoist, pack_operand, contract)}
# names `--print-after` accepts for the schedule's passes
PRINTABLE = (*PASSES, "auto", transpose_loads.name, interleave_stores.name)
# Directives on one loop: after unroll, each runs on every copy of its loop
# (`vectorize(j)`: `j.u0`, `j.u1`, ...). The others take one copy's name
# (`pack` makes one buffer, `reorder` and `fuse` pair loops up).
ON_EACH_COPY = ("split", "unroll", "parallel", "hoist", "vectorize")


def apply_schedule(kernel: ir.Kernel, after=None, check: bool = True, machine: Machine = Machine(),
                   remarks: list | None = None, pick: int = 0) -> ir.Kernel:
    """Run the kernel's directives; a kernel without `@schedule` gets the automatic one.

    `remarks`, when a list, receives `Diagnostic`s (severity 'remark') saying
    what was done to each loop nest and why (`dslc --remarks`). A schedule with
    open parameters (`choice`, `one_of`) runs its candidate number `pick`
    (`lowering.schedule_space`; 0: every first value).
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
        return _last_passes(kernel, machine, check, after)
    for directive in pick_candidate(kernel.schedule, pick):
        try:
            kernel = _run_directive(kernel, directive, machine, remarks)
        except ScheduleError as err:
            raise CompileError(Diagnostic(err.span, err.message, notes=tuple(err.notes))) from None
        if check:
            verify(kernel, "loops")
        if after is not None:
            after(directive.name, kernel)
    return replace(_last_passes(kernel, machine, check, after), schedule=())


def _run_directive(kernel: ir.Kernel, d, machine: Machine, remarks: list | None) -> ir.Kernel:
    """One directive; on a loop that unroll copied, once on each copy."""
    if d.name == "contract":
        return contract.run(kernel, d, machine, remarks)
    targets = [d]
    if d.name in ON_EACH_COPY:
        ref = d.loops[0]
        targets = [replace(d, loops=(LoopRef(s.name, ref.span),)) for s in find_loops(kernel.body, ref.name, ref.span)]
    for one in targets:
        if d.name == "vectorize":
            kernel = vectorize.run(kernel, one, machine, remarks)
        else:
            kernel = PASSES[d.name].run(kernel, one)
    return kernel


def _last_passes(kernel: ir.Kernel, machine: Machine, check: bool, after) -> ir.Kernel:
    """The last passes of every schedule, the automatic one too (its packing
    of a B stored by rows of K is written for transpose_loads)."""
    for name, run in ((transpose_loads.name, lambda k: transpose_loads.run(k, machine)),
                      (interleave_stores.name, interleave_stores.run)):
        changed = run(kernel)
        if changed is not kernel:
            kernel = changed
            if check:
                verify(kernel, "loops")
            if after is not None:
                after(name, kernel)
    return kernel
