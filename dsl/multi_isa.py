"""`dslc --isa avx2,baseline`: one x86-64 library holding every kernel once per
ISA level, dispatched once at load time (see `dsl.backends.dispatch`).

    >>> job = build_multi_isa(Path("saxpy.tk"), CompileOptions(), "avx2,baseline",
    ...                       Path("saxpy.so"))                     # doctest: +SKIP
    >>> dsl.load("saxpy.so").saxpy(...)   # DSL_ISA=baseline forces the baseline copy
"""

from __future__ import annotations

from pathlib import Path

from dsl.backends.dispatch import dispatch_module, rename_variant
from dsl.backends.errors import BackendError
from dsl.backends.isa import parse_isas
from dsl.backends.link import link_shared
from dsl.backends.optimize import emit_object
from dsl.backends.target import make_target

from .options import CompileOptions
from .pipeline import Job, compile_file


def check_isa_options(isa: str, triple: str | None, cpu: str | None, features: str | None) -> None:
    """Raise ValueError when `--isa` cannot go with the other target options."""
    parse_isas(isa)
    if cpu is not None or features is not None:
        raise ValueError("--isa chooses the CPU of each copy: it does not go with --cpu or --features")
    if make_target(triple).arch != "x86_64":
        raise ValueError(f"--isa builds x86-64 levels; the target is {make_target(triple).triple}")


def build_multi_isa(file: Path, opts: CompileOptions, isa: str, output: Path) -> Job:
    """Compile `file` once per level of `isa` and link the copies with their
    dispatcher into `output`; return the first level's job (for the header)."""
    isas = parse_isas(isa)
    objects, exported, first = [], None, None
    for level in isas:
        job = compile_file(file, opts.with_(cpu=level.cpu, features=""), stop_after="llvm")
        names = rename_variant(job.llvm, level.name)
        if exported is not None and names != exported:
            raise BackendError(f"the {level.name} copy exports {names}, the others {exported}")
        exported, first = names, first or job
        objects.append(emit_object(job.llvm, job.target, opts.opt_level))
    base = make_target(opts.triple, cpu="x86-64", features="")
    module = dispatch_module(exported, isas, base.triple, str(first.llvm.data_layout))
    objects.append(emit_object(module, base, opts.opt_level))
    link_shared(objects, output, base)
    return first
