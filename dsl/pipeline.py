"""The compile pipeline, as data: one ordered list of stages.

    ast -> typed -> loops -> schedule (split, reorder, ...) -> guard -> llvm -> asm | obj -> so

`--emit=STAGE` stops after a stage, `--print-after=STAGE` prints it on the way,
`--dump-dir` writes each stage to a file; all three fall out of `STAGES`. The
schedule's passes (one per directive) are printed and dumped the same way.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable

from dsl.grammar.diagnostics import CompileError, Diagnostic, Source
from dsl.grammar.printer import format_ast
from dsl.lowering import guard, ir
from dsl.lowering.loops import lower_program
from dsl.lowering.printer import format_program
from dsl.lowering.specialize import specialize
from dsl.lowering.typecheck import check_module
from dsl.lowering.verify import verify_program

from . import frontend
from .errors import InternalError, internal_errors
from .gc_pause import gc_paused
from .metadata import program_metadata
from .options import CompileOptions
from .remarks import vectorization_remarks

# Passes over the loop IR, in order; each has `name` and `run(kernel) -> kernel`.
LOOP_PASSES = [guard]


@dataclass
class Job:
    """Everything one compile has produced so far (each stage fills a field)."""

    source: Source
    options: CompileOptions
    base_dir: Path | None = None
    front: frontend.Frontend | None = None
    typed: ir.Program | None = None
    program: ir.Program | None = None  # loop IR, after the passes run so far
    llvm: object | None = None  # llvmlite ModuleRef, optimized at options.opt_level
    asm: str | None = None
    obj: bytes | None = None
    objects: list[bytes] | None = None  # what a library links (stop_after="so")
    metadata: str = ""
    target: object | None = None
    kernel_options: ir.KernelOptions | None = None  # overrides `@options` (for @dsl.kernel)
    printed: list[tuple[str, str]] = field(default_factory=list)


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Job], None]
    show: Callable[[Job], str | bytes]


def _parse(job: Job) -> None:
    if job.front is not None:
        return  # the decorator parses its function and dependencies itself
    job.front = frontend.load(job.source, job.options.include_paths, job.base_dir)


def _typecheck(job: Job) -> None:
    front = job.front
    typed = check_module(front.module, frontend.visible_functions(front), front.scopes,
                         machine=_target(job).machine)
    wanted = job.options.kernels
    if wanted is not None:
        missing = wanted - {k.name for k in typed.kernels}
        if missing:
            raise CompileError(Diagnostic(None, f"{job.source.name} has no kernel "
                                                f"{', '.join(map(repr, sorted(missing)))}",
                                          notes=(f"its kernels: {', '.join(k.name for k in typed.kernels)}",)))
        typed = replace(typed, kernels=tuple(k for k in typed.kernels if k.name in wanted))
    if job.kernel_options is not None and job.kernel_options != ir.KernelOptions():
        typed = replace(typed, kernels=tuple(replace(k, options=job.kernel_options) for k in typed.kernels))
    job.typed = typed
    _verify(job, job.typed, "kernel")


def _lower(job: Job) -> None:
    program = lower_program(job.typed)
    sizes = dict(job.options.specialize)
    kernels = tuple(specialize(guard.mark_proven(k), sizes) for k in program.kernels)
    job.program = replace(program, kernels=kernels)
    _verify(job, job.program, "loops")


def _verify(job: Job, program: ir.Program, level: str) -> None:
    if job.options.verify:
        verify_program(program, level)


def _schedule(job: Job) -> None:
    """Apply each kernel's `@schedule` directives, printing or dumping after each if asked."""
    from dsl.lowering.transforms.apply import apply_schedule

    machine = _target(job).machine
    remarks: list | None = [] if job.options.remarks else None
    picks = dict(job.options.schedule_picks)
    after = _PassOutput(job.options)
    try:
        kernels = tuple(apply_schedule(k, after, job.options.verify, machine, remarks, picks.get(k.name, 0))
                        for k in job.program.kernels)
    finally:  # a directive that fails: the passes before it are what one wants to see
        after.dump()
    for remark in remarks or ():
        print(remark.render(), file=sys.stderr)
    job.program = replace(job.program, kernels=kernels)


class _PassOutput:
    """`after(name, kernel)` for `apply_schedule`: prints the kernel after each
    pass (`--print-after=split`) and keeps its text for `dump()`, which writes
    DIR/03-schedule-01-<kernel>-split.txt, ...: numbered in the order the passes
    ran, so `ls` lists them between 02-loops.txt and 03-schedule.txt."""

    def __init__(self, options: CompileOptions):
        self.options = options
        self.texts: list[tuple[str, str]] = []  # (file name without number, text)

    def __call__(self, name: str, kernel: ir.Kernel) -> None:
        from dsl.lowering.printer import format_kernel

        printed = self.options.prints_after(name)
        if not printed and self.options.dump_dir is None:
            return
        text = format_kernel(kernel)
        if printed:
            print(f"// ----- after {name} ({kernel.name}) -----", file=sys.stderr)
            print(text, file=sys.stderr)
        if self.options.dump_dir is not None:
            self.texts.append((f"{kernel.name}-{name}", text))

    def dump(self) -> None:
        if not self.texts:
            return
        stage = STAGE_NAMES.index("schedule")
        width = max(2, len(str(len(self.texts))))  # every number as wide: sorted as run
        self.options.dump_dir.mkdir(parents=True, exist_ok=True)
        for number, (name, text) in enumerate(self.texts, 1):
            path = self.options.dump_dir / f"{stage:02d}-schedule-{number:0{width}d}-{name}.txt"
            path.write_text(text)


def _target(job: Job):
    """The job's `Target`, made on first use (the scheduler needs it too)."""
    if job.target is None:
        from dsl.backends.target import make_target

        opts = job.options
        job.target = make_target(opts.triple, opts.cpu, opts.features)
    return job.target


def _loop_pass(p) -> Callable[[Job], None]:
    def run(job: Job) -> None:
        kernels = tuple(p.run(k) for k in job.program.kernels)
        job.program = replace(job.program, kernels=kernels)
        _verify(job, job.program, "loops")

    return run


def _llvm(job: Job) -> None:
    from dsl.backends.errors import BackendError
    from dsl.backends.optimize import optimize, verify_llvm

    module = _llvm_module(job)
    try:  # before LLVM's optimizer sees it: invalid IR there can abort the process
        ref = verify_llvm(module)
    except BackendError as err:
        raise _invalid_llvm(job, err, str(module)) from None
    optimize(ref, job.target, job.options.opt_level)
    job.llvm = ref
    if job.options.remarks:
        for remark in vectorization_remarks(job.program, str(ref)):
            print(remark.render(), file=sys.stderr)


def _llvm_module(job: Job):
    from dsl.backends.llvm.module import build_module

    _target(job)
    job.metadata = program_metadata(job.program)
    return build_module(list(job.program.kernels), job.target, job.metadata, module_name=job.source.name)


def _objects(job: Job) -> None:
    """The llvm and obj stages for a library: the module split into parts
    (split_module), each verified before LLVM optimizes it, compiled on
    several cores (codegen_pool)."""
    from dsl.backends.codegen_pool import PartFailed, compile_parts, default_jobs
    from dsl.backends.split_module import split_module

    parts = split_module(_llvm_module(job))
    jobs = job.options.codegen_jobs or default_jobs()
    try:
        job.objects = compile_parts(parts, job.target, job.options.opt_level, jobs)
    except PartFailed as err:
        raise _invalid_llvm(job, err, err.text) from None


def _invalid_llvm(job: Job, err: Exception, module_text: str) -> InternalError:
    where = _kernel_named_in(str(err), module_text, job.program.kernels)
    return InternalError(f"internal error at {where}: the generated LLVM IR does not verify: {err}")


def _kernel_named_in(message: str, module_text: str, kernels) -> str:
    """'f.tk:3:5 (kernel k)' for the kernel whose LLVM function the verifier's
    `message` is about (kernel k's functions are `k`, `k__unit`, ...)."""
    import re

    function = re.search(r"function '?@?([\w.]+)", message)
    line = re.search(r"<string>:(\d+):", message)
    if function is None and line is not None:  # a parse error: the `define` above that line
        above = module_text.splitlines()[: int(line.group(1))]
        defines = [re.search(r"@\"?([\w.]+)", x) for x in above if x.startswith("define")]
        function = defines[-1] if defines and defines[-1] else None
    name = function.group(1) if function else ""
    owners = [k for k in kernels if name == k.name or name.startswith(k.name + "__")]
    if not owners:
        return f"an unknown kernel (LLVM function {name or '?'})"
    kernel = max(owners, key=lambda k: len(k.name))
    return f"{kernel.span.location if kernel.span else '?'} (kernel {kernel.name})"


def _asm(job: Job) -> None:
    from dsl.backends.optimize import emit_asm

    job.asm = emit_asm(job.llvm, job.target, job.options.opt_level)


def _obj(job: Job) -> None:
    from dsl.backends.optimize import emit_object

    job.obj = emit_object(job.llvm, job.target, job.options.opt_level)


def _show_program(attr: str) -> Callable[[Job], str]:
    return lambda job: format_program(getattr(job, attr))


STAGES: list[Stage] = [
    Stage("ast", _parse, lambda job: format_ast(job.front.module)),
    Stage("typed", _typecheck, _show_program("typed")),
    Stage("loops", _lower, _show_program("program")),
    Stage("schedule", _schedule, _show_program("program")),
    *(Stage(p.name, _loop_pass(p), _show_program("program")) for p in LOOP_PASSES),
    Stage("llvm", _llvm, lambda job: str(job.llvm)),
    Stage("asm", _asm, lambda job: job.asm),
    Stage("obj", _obj, lambda job: job.obj),
]
STAGE_NAMES = [s.name for s in STAGES]
EMIT_CHOICES = ["ast", "typed", "loops", "schedule", "guard", "llvm", "asm", "obj", "so"]


def run(job: Job, stop_after: str = "obj", out=None) -> Job:
    """Run the stages up to `stop_after` (inclusive), printing/dumping as asked
    (to `out`, by default the `sys.stderr` of the moment), with Python's cycle
    collector held off (`gc_paused`).

    `stop_after="so"`: the objects a shared library links, in `job.objects`.
    Unless the LLVM IR is to be printed, dumped or remarked on, a large module
    is compiled in parts then (`_objects`); otherwise as one, `[job.obj]`."""
    with gc_paused():
        return _run(job, stop_after, sys.stderr if out is None else out)


def _run(job: Job, stop_after: str, out) -> Job:
    linking = stop_after == "so"
    last = STAGE_NAMES.index("obj" if linking else stop_after)
    for index, stage in enumerate(STAGES[: last + 1]):
        if stage.name == "asm" and stop_after in ("obj", "so") and not _shown(job.options, "asm"):
            continue  # asm is a side branch of obj, made only to be printed or dumped
        if stage.name == "llvm" and linking and not _llvm_looked_at(job.options):
            with internal_errors(job.options.debug, "llvm", job.source.name):
                _objects(job)
            return job
        with internal_errors(job.options.debug, stage.name, job.source.name):
            stage.run(job)
        _print_stage(job, index, stage, out)
    if linking:
        job.objects = [job.obj]
    return job


def _llvm_looked_at(opts: CompileOptions) -> bool:
    return opts.remarks or any(_shown(opts, stage) for stage in ("llvm", "asm", "obj"))


def _shown(opts: CompileOptions, stage: str) -> bool:
    return opts.prints_after(stage) or opts.dump_dir is not None


def _print_stage(job: Job, index: int, stage: Stage, out) -> None:
    opts = job.options
    wants_print = opts.prints_after(stage.name) and stage.name != "obj"
    if not wants_print and opts.dump_dir is None:
        return
    text = stage.show(job)
    if wants_print:
        print(f"// ----- after {stage.name} -----", file=out)
        print(text, file=out)
    if opts.dump_dir is not None:
        opts.dump_dir.mkdir(parents=True, exist_ok=True)
        suffix = "o" if isinstance(text, bytes) else "txt"
        path = opts.dump_dir / f"{index:02d}-{stage.name}.{suffix}"
        path.write_bytes(text) if isinstance(text, bytes) else path.write_text(text)


def compile_source(source: Source, options: CompileOptions, stop_after: str = "obj",
                   base_dir: Path | None = None) -> Job:
    """Compile program text; raises `CompileError` for mistakes in it."""
    return run(Job(source, options, base_dir=base_dir), stop_after)


def compile_file(path, options: CompileOptions | None = None, stop_after: str = "obj") -> Job:
    """Compile a `.tk` file (and what it imports) up to `stop_after`."""
    path = Path(path)
    source = frontend.read_source(path)
    return compile_source(source, options or CompileOptions(), stop_after, base_dir=path.parent)


__all__ = ["CompileError", "Job", "STAGES", "compile_file", "compile_source", "run"]
