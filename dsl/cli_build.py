"""What `dslc` builds: one file, several files into a folder, the standard library.

    dslc a.tk -o a.so -H a.h              # compile_one
    dslc a.tk b.tk --out-dir build/       # build_many: build/a.so + build/a.h, build/b.so + build/b.h
    dslc --stdlib                         # build_stdlib: every stdlib module into the compile cache
    dslc --stdlib --out-dir build/        # ... or into build/<module>.so + .h

Several inputs show a progress bar on a terminal (`dsl.progress`); a file
with errors is reported and the others are still built (all errors of a run
at once), and the exit status is the worst of them.
"""

from __future__ import annotations

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path

import click

from dsl.grammar.diagnostics import CompileError

from .errors import InternalError
from .options import CompileOptions
from .pipeline import compile_file
from .progress import Progress

TEXT_STAGES = ("ast", "typed", "loops", "schedule", "guard", "llvm", "asm")
# What --out-dir names each stage's file: DIR/<stem><suffix>.
OUT_DIR_SUFFIX = {"so": ".so", "obj": ".o", "asm": ".s", "llvm": ".ll", "ast": ".ast", "typed": ".typed",
                  "loops": ".loops", "schedule": ".schedule", "guard": ".guard"}


def compile_one(file: Path, output: Path | None, header: Path | None, emit: str, opts: CompileOptions,
                isa: str | None = None) -> None:
    """Compile `file` up to `emit` and write `output` (text stages without one
    go to stdout) and, if asked, the C `header`."""
    if isa is not None:
        from .multi_isa import build_multi_isa

        job = build_multi_isa(file, opts, isa, output)
        if header is not None:
            _write_header(job, header, multi_isa=True)
        return
    job = compile_file(file, opts, stop_after=emit)
    if emit in TEXT_STAGES:
        from .pipeline import STAGES

        text = next(s for s in STAGES if s.name == emit).show(job)
        _write_text(output, text)
    elif emit == "obj":
        output.write_bytes(job.obj)
    else:
        from dsl.backends.link import link_shared

        link_shared(job.objects, output, job.target)
    if header is not None:
        _write_header(job, header)


def outputs_in(out_dir: Path, files: list[Path], emit: str) -> list[tuple[Path, Path, Path | None]]:
    """(input, output, header or None) per file: DIR/<stem>.so and DIR/<stem>.h.
    Two inputs with the same name would overwrite each other: a usage error."""
    seen: dict[str, Path] = {}
    for file in files:
        if file.stem in seen:
            raise click.UsageError(f"{seen[file.stem]} and {file} would both write "
                                   f"{out_dir / (file.stem + OUT_DIR_SUFFIX[emit])}: rename one")
        seen[file.stem] = file
    with_header = emit in ("so", "obj")
    return [(f, out_dir / (f.stem + OUT_DIR_SUFFIX[emit]), out_dir / (f.stem + ".h") if with_header else None)
            for f in files]


def build_many(jobs, emit: str, opts: CompileOptions, isa: str | None, tune, show_progress: bool,
               label: str = "dslc") -> int:
    """Build every (input, output, header) of `jobs`; `tune(file, opts)` gives a
    file's options (autotuning). Returns the exit status: 0, 1 (errors in a
    program, or a file not written) or 3 (an internal compiler error)."""
    status, failed = 0, 0
    with Progress(label, len(jobs), enabled=None if show_progress else False) as bar:
        for done, (file, output, header) in enumerate(jobs):
            bar.update(done, file.name)
            file_opts = opts if opts.dump_dir is None or len(jobs) == 1 else opts.with_(dump_dir=opts.dump_dir / file.stem)
            code = _build_reporting(bar, lambda: compile_one(file, output, header, emit, tune(file, file_opts), isa))
            failed += code != 0
            status = max(status, code)
        bar.update(len(jobs), f"{len(jobs) - failed} built" + (f", {failed} failed" if failed else ""))
    if failed and len(jobs) > 1:
        click.echo(f"dslc: {failed} of {len(jobs)} inputs failed", err=True)
    return status


def build_stdlib(opts: CompileOptions, show_progress: bool) -> int:
    """Compile every standard-library module that exports kernels through the
    disk cache `dsl.ops` loads from (`stdlib_library`), so no later call pays
    a compile: one module per core at a time, the largest first. Prints where
    the cache is and how long each build took."""
    from .options import default_cache_dir

    names = stdlib_modules()
    status, seconds = 0, {}
    with Progress("dslc --stdlib", len(names), enabled=None if show_progress else False) as bar:
        bar.update(0, "")
        for done, (name, code, text, took) in enumerate(_each_module_built(names, opts), 1):
            if text is not None:
                _report(bar, text)
            seconds[name] = None if code else took
            status = max(status, code)
            bar.update(done, name)
        bar.update(len(names), "done")
    click.echo(f"dslc: standard library in {default_cache_dir(opts)} (build or cache lookup, per module):", err=True)
    click.echo("\n".join(f"  {name:<14} {'failed' if seconds[name] is None else f'{seconds[name]:6.2f} s'}"
                         for name in names), err=True)
    return status


def _each_module_built(names: list[str], opts: CompileOptions):
    """(name, exit status, error text or None, seconds) of each module, as
    their builds finish. Builds run in forked processes, one per core (the
    compiler holds the GIL throughout); the cache takes each result atomically."""
    from .ops.library import stdlib_path

    workers = min(len(names), os.cpu_count() or 1)
    if workers < 2:
        yield from (_build_module(name, opts) for name in names)
        return
    largest_first = sorted(names, key=lambda name: -stdlib_path(name).stat().st_size)
    if not opts.codegen_jobs:
        opts = opts.with_(codegen_jobs=1)  # the cores are busy with modules already (unless -j says)
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork")) as pool:
        for future in as_completed([pool.submit(_build_module, name, opts) for name in largest_first]):
            yield future.result()


def _build_module(name: str, opts: CompileOptions) -> tuple[str, int, str | None, float]:
    from .ops.library import stdlib_library

    start = time.monotonic()
    code, text = _outcome(lambda: stdlib_library(name, opts))
    return name, code, text, time.monotonic() - start


def stdlib_modules() -> list[str]:
    """The stdlib modules with exported kernels (others only hold helpers that
    these import), e.g. ['conv', 'dense', ..., 'reduce']."""
    from .ops.library import _STDLIB_DIR

    names = []
    for path in sorted(_STDLIB_DIR.glob("*.tk")):
        if compile_file(path, CompileOptions(), stop_after="typed").typed.kernels:
            names.append(path.stem)
    return names


def stdlib_files() -> list[Path]:
    from .ops.library import stdlib_path

    return [stdlib_path(name) for name in stdlib_modules()]


def _build_reporting(bar: Progress, action) -> int:
    """Run `action`; report its failure (above the bar, or plainly) and return
    the exit status it earns."""
    code, text = _outcome(action)
    if text is not None:
        _report(bar, text)
    return code


def _outcome(action) -> tuple[int, str | None]:
    """Run `action`: (0, None), or the exit status its failure earns and the
    failure's text."""
    try:
        action()
        return 0, None
    except CompileError as err:
        return 1, err.render()
    except InternalError as err:
        return 3, f"dslc: {err}"
    except OSError as err:
        return 1, f"dslc: {err}"


def _report(bar: Progress, text: str) -> None:
    if bar.enabled:
        bar.message(text)
    else:
        click.echo(text, err=True)


def _write_text(output: Path | None, text: str) -> None:
    if output is None:
        click.echo(text.rstrip("\n"))
    else:
        output.write_text(text if text.endswith("\n") else text + "\n")


def _write_header(job, header: Path, multi_isa: bool = False) -> None:
    from dsl.backends.header import header_text

    if job.program is None:
        raise click.UsageError("-H needs the kernels to be lowered: use --emit=loops or later")
    guard = "".join(c if c.isalnum() else "_" for c in header.name.upper())
    header.write_text(header_text(list(job.program.kernels), guard, multi_isa))
