"""`dslc`: the ahead-of-time compiler's command line."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from dsl.grammar.diagnostics import CompileError

from .cli_build import build_many, build_stdlib, compile_one, outputs_in, stdlib_files
from .cli_tuning import parse_sizes, tune_file
from .errors import InternalError
from .options import CompileOptions, from_env
from dsl.lowering.transforms.apply import PRINTABLE as SCHEDULE_PASSES

from .pipeline import EMIT_CHOICES, STAGE_NAMES

SUFFIX_TO_EMIT = {".so": "so", ".o": "obj", ".s": "asm", ".ll": "llvm"}


@click.command(context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("files", nargs=-1, type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path),
              help="Write the result here (text stages print to stdout without -o). One input only.")
@click.option("-H", "--header", type=click.Path(dir_okay=False, path_type=Path),
              help="Also write a C header declaring the exported kernels. One input only.")
@click.option("--out-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Build every input into DIR/<name>.so and its header DIR/<name>.h (other --emit "
                   "stages: DIR/<name>.o, .s, .ll, .loops, ...); needed for several inputs, and "
                   "instead of -o and -H.")
@click.option("--stdlib", "stdlib", is_flag=True,
              help="Build every standard-library module (stdlib/*.tk) instead of FILES: into the "
                   "compile cache that dsl.ops loads from (so no first call pays a compile), or, "
                   "with --out-dir, into DIR/<module>.so + .h.")
@click.option("--no-progress", is_flag=True,
              help="Never draw the progress bar (drawn only for several inputs or --stdlib, and only "
                   "when stderr is a terminal; DSL_NO_PROGRESS=1 does the same).")
@click.option("--emit", type=click.Choice(EMIT_CHOICES),
              help="Stop after this stage: ast, typed (kernel IR), loops (loop IR), schedule (after the "
                   "schedule directives), guard (bounds checks added), llvm, asm, obj or so. "
                   "Default: from the -o suffix (.so .o .s .ll), else so.")
@click.option("--target", "triple", metavar="TRIPLE", help="LLVM target triple (default: this machine).")
@click.option("--cpu", metavar="CPU", help="Target CPU, e.g. znver3, haswell, x86-64-v3, neoverse-n1 (default: host).")
@click.option("--features", metavar="FEATURES", help="LLVM feature string, e.g. +avx2,+fma (default: host's).")
@click.option("--isa", metavar="LEVELS",
              help="x86-64 only: build every kernel once per ISA level (e.g. avx2,baseline; levels: "
                   "baseline, sse4, avx2, avx512) into one .so that picks, when loaded, the first level "
                   "this CPU runs; DSL_ISA=LEVEL at load time forces another. Default: this machine's CPU.")
@click.option("-O", "opt_level", type=click.IntRange(0, 3), default=3, show_default=True,
              help="LLVM optimization level, -O0 to -O3.")
@click.option("-I", "include", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="Search this directory for imported .tk modules (repeatable).")
@click.option("--print-after", "print_after", multiple=True, metavar="STAGE",
              help=f"Print the IR after a stage or pass to stderr (repeatable): {', '.join(STAGE_NAMES)}, "
                   f"or a schedule directive: {', '.join(SCHEDULE_PASSES)}.")
@click.option("--print-after-all", is_flag=True, help="Print the IR after every stage and pass.")
@click.option("--remarks", is_flag=True,
              help="Print, per loop nest, what the scheduler did and why (e.g. which nests became "
                   "the matmul micro-kernel, and why others did not).")
@click.option("--dump-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write every stage to DIR, one numbered file per stage (00-ast.txt ... 07-obj.o), and "
                   "every schedule pass in between (03-schedule-01-KERNEL-split.txt, ...).")
@click.option("--kernel", "kernels", multiple=True, metavar="NAME",
              help="Build only this kernel of the file (repeatable); the others are not compiled.")
@click.option("--specialize", metavar="DIM=N,...",
              help="Compile for these exact sizes (dims become constants; calls with other sizes fail "
                   "a check), e.g. M=64,N=64,K=64.")
@click.option("--autotune", metavar="DIM=N,...",
              help="Time the candidates of open schedules (choice(...), one_of(...)) on data of these "
                   "sizes and build the fastest; the choice is cached. E.g. M=512,N=512,K=512.")
@click.option("--autotune-budget", type=click.FloatRange(min=0.1), default=120.0, show_default=True,
              metavar="SECONDS", help="Time limit of the autotuning search, per kernel.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), metavar="N",
              help="Processes LLVM may compile one library's parts in (default: DSL_CODEGEN_JOBS, else "
                   "one per core, at most 4). The library is the same for any N.")
def main(files, output, header, out_dir, stdlib, no_progress, emit, triple, cpu, features, isa, opt_level,
         include, print_after, print_after_all, remarks, dump_dir, kernels, specialize, autotune, autotune_budget,
         jobs):
    """Compile kernel files (.tk) to shared libraries, objects, assembly or IR.

    \b
    Examples:
      dslc saxpy.tk -o saxpy.so -H saxpy.h    # library + C header
      dslc saxpy.tk --emit=loops              # print the loop IR
      dslc saxpy.tk --emit=asm -O3            # print assembly
      dslc saxpy.tk --print-after-all -o saxpy.so
      dslc saxpy.tk --target aarch64-linux-gnu -o saxpy.so   # NEON, links with aarch64-linux-gnu-gcc
      dslc saxpy.tk --target x86_64 --isa avx2,baseline -o saxpy.so
      dslc a.tk b.tk --out-dir build/        # build/a.so + build/a.h, build/b.so + ...
      dslc --stdlib                          # the whole standard library, into the cache

    Each exported kernel returns int32: 0 on success, k > 0 when check k-1
    failed (sizes disagree, outputs overlap inputs, an index is out of bounds);
    the header lists the checks. Exit status: 0 ok, 1 errors in the program,
    2 bad usage, 3 internal compiler error.
    """
    _check_inputs(files, output, header, out_dir, stdlib)
    emit = emit or SUFFIX_TO_EMIT.get(output.suffix if output else "", "so")
    if emit == "obj" and output is None and out_dir is None:
        raise click.UsageError("--emit=obj writes a binary file: give -o FILE")
    if emit == "so" and output is None and len(files) == 1 and out_dir is None:
        output = Path(files[0].stem + ".so")
    if header is not None and emit in ("ast", "typed"):
        raise click.UsageError(f"-H needs the kernels lowered, but --emit={emit} stops before: "
                               "use --emit=loops or later")
    names = set(print_after) | ({"all"} if print_after_all else set())
    _check_print_after(names, emit)
    if emit not in ("ast", "typed", "loops", "schedule", "guard"):
        _check_target(triple, cpu, features)
    if isa is not None:
        _check_isa(isa, emit, triple, cpu, features)
    opts = from_env(CompileOptions(opt_level=opt_level, triple=triple, cpu=cpu, features=features,
                                   print_after=frozenset(names), remarks=remarks, dump_dir=dump_dir,
                                   include_paths=tuple(include)))
    opts = opts.with_(specialize=tuple(sorted(parse_sizes(specialize, "--specialize").items())),
                      kernels=frozenset(kernels) if kernels else None, codegen_jobs=jobs or opts.codegen_jobs)
    tune_sizes = parse_sizes(autotune, "--autotune")

    def tune(file: Path, file_opts: CompileOptions) -> CompileOptions:
        return tune_file(file, file_opts, tune_sizes, autotune_budget) if tune_sizes else file_opts

    # The bar would tangle with IR printed on stderr.
    show_progress = not (no_progress or names or remarks)
    if stdlib and out_dir is None:
        if tune_sizes or opts.specialize or isa:
            raise click.UsageError("--stdlib fills the cache dsl.ops loads from, for any sizes and this CPU: "
                                   "--autotune, --specialize and --isa need --out-dir")
        sys.exit(build_stdlib(opts, show_progress))
    if stdlib or out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        jobs = outputs_in(out_dir, stdlib_files() if stdlib else list(files), emit)
        sys.exit(build_many(jobs, emit, opts, isa, tune, show_progress))
    try:
        compile_one(files[0], output, header, emit, tune(files[0], opts), isa)
    except CompileError as err:
        click.echo(err.render(), err=True)
        sys.exit(1)
    except InternalError as err:
        click.echo(f"dslc: {err}", err=True)
        sys.exit(3)
    except OSError as err:
        click.echo(f"dslc: {err}", err=True)
        sys.exit(1)


def _check_inputs(files: tuple[Path, ...], output, header, out_dir, stdlib: bool) -> None:
    """One input with -o/-H, or several with --out-dir, or --stdlib alone."""
    if stdlib and files:
        raise click.UsageError("--stdlib builds the standard library: give no FILES with it")
    if not stdlib and not files:
        raise click.UsageError("missing FILE: give a .tk file (or several, with --out-dir), or --stdlib")
    if out_dir is not None and (output is not None or header is not None):
        raise click.UsageError("--out-dir names every output (DIR/<name>.so, DIR/<name>.h): drop -o and -H")
    if len(files) > 1 and (output is not None or header is not None):
        raise click.UsageError(f"-o and -H name one output, but {len(files)} inputs were given: "
                               "use --out-dir DIR (DIR/<name>.so + DIR/<name>.h per input)")
    if len(files) > 1 and out_dir is None:
        raise click.UsageError(f"{len(files)} inputs: give --out-dir DIR (DIR/<name>.so + DIR/<name>.h per input)")


def _check_print_after(names: set[str], emit: str) -> None:
    """Every --print-after name is a printable stage (or schedule directive) that
    this compile reaches."""
    printable = [n for n in STAGE_NAMES if n != "obj"]
    for name in sorted(names - {"all"}):
        if name in ("obj", "so"):
            raise click.UsageError(f"--print-after={name}: {name} is binary and is not printed; "
                                   "use --dump-dir to keep the object file")
        if name not in printable and name not in SCHEDULE_PASSES:
            raise click.UsageError(f"unknown stage {name!r} for --print-after; stages: {', '.join(printable)}")
        stage = "schedule" if name in SCHEDULE_PASSES else name
        last = "obj" if emit == "so" else emit
        if STAGE_NAMES.index(stage) > STAGE_NAMES.index(last):
            raise click.UsageError(f"--print-after={name} would print nothing: --emit={emit} stops before it")


def _check_target(triple: str | None, cpu: str | None, features: str | None) -> None:
    """Reject a target LLVM does not know, before compiling: for an unknown CPU or
    feature LLVM only prints a warning, then may abort the process in code
    generation ('LLVM ERROR: 64-bit code requested on a subtarget ...')."""
    if triple is None and cpu is None and features is None:
        return
    from dsl.backends.target import make_target, new_target_machine

    target = make_target(triple, cpu, features)
    try:
        complaints = _native_stderr(lambda: new_target_machine(target, 0))
    except RuntimeError as exc:
        raise click.UsageError(f"--target {target.triple}: {exc}") from None
    for line in complaints.splitlines():
        if "is not a recognized" in line:
            option = "--cpu" if "processor" in line else "--features"
            raise click.UsageError(f"{option}: {line.split(' (ignoring', 1)[0]} ({target.triple})")


def _native_stderr(action) -> str:
    """What `action()` writes to file descriptor 2 (LLVM's C++ warnings)."""
    import os
    import tempfile

    sys.stderr.flush()
    with tempfile.TemporaryFile() as captured:
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            action()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        captured.seek(0)
        return captured.read().decode(errors="replace")


def _check_isa(isa: str, emit: str, triple: str | None, cpu: str | None, features: str | None) -> None:
    from .multi_isa import check_isa_options

    if emit != "so":
        raise click.UsageError(f"--isa builds a shared library with one copy per level: not --emit={emit}")
    try:
        check_isa_options(isa, triple, cpu, features)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None


if __name__ == "__main__":
    main()
