"""`dslc --specialize` and `dslc --autotune`: sizes given on the command line.

    dslc mm.tk --specialize M=64,N=64,K=64 -o mm64.so     # dims become constants
    dslc mm.tk --autotune M=512,N=512,K=512 -o mm.so      # time open schedules here

Autotuning builds every candidate of each kernel whose schedule leaves
choices open, times them on random data of the given sizes (contiguous), and
builds the library with the fastest; the choice is kept in the compile cache
(`dsl.autotune.TuningRecords`), so the next run with the same sizes, target and
options reuses it without timing anything.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import click

from .autotune import TuningRecords, search, shape_class, terminal_progress
from .cache import make_key
from .metadata import kernel_spec
from .options import CompileOptions, default_cache_dir
from .pipeline import compile_file


def parse_sizes(text: str | None, option: str) -> dict[str, int]:
    """'M=64,N=128' -> {'M': 64, 'N': 128}; a usage error names the bad part."""
    if not text:
        return {}
    sizes = {}
    for part in text.split(","):
        name, eq, value = part.strip().partition("=")
        if not eq or not name.isidentifier() or not value.strip().isdigit() or int(value) < 1:
            raise click.BadParameter(f"expected DIM=SIZE[,DIM=SIZE...] with sizes >= 1, got {part.strip()!r}",
                                     param_hint=option)
        sizes[name] = int(value)
    return sizes


def tune_file(file: Path, opts: CompileOptions, sizes: dict[str, int], budget: float) -> CompileOptions:
    """`opts` with `schedule_picks` for every kernel of `file` with an open schedule.

    `budget`: seconds per kernel's search (> 0, else a usage error)."""
    if not budget > 0:  # also refuses NaN
        raise click.BadParameter(f"must be a positive number of seconds, got {budget!r}",
                                 param_hint="--autotune-budget")
    job = compile_file(file, opts, stop_after="loops")
    sources = [(s.name, s.text) for s in job.front.sources]
    records = TuningRecords(default_cache_dir(opts))
    picks = []
    for kernel in job.program.kernels:
        key = make_key(kind="aot-tune", kernel=kernel.name, sources=sources, options=opts.cache_key_part(),
                       target=job.target.key() if job.target else None)
        pick = _tune_kernel(file, opts, kernel, sizes, budget, records, key)
        if pick is not None:
            picks.append((kernel.name, pick))
    return opts.with_(schedule_picks=tuple(picks))


def _tune_kernel(file: Path, opts: CompileOptions, kernel, sizes, budget: float, records, key: str) -> int | None:
    """The pick for `kernel`: recorded, or found by a search now (and recorded
    if it was timed); None when its schedule leaves nothing open."""
    from dsl.lowering.schedule_space import candidates, describe

    options = candidates(kernel.schedule)
    if len(options) <= 1:
        return None
    spec = kernel_spec(kernel)
    args = _arg_specs(spec, sizes)
    klass = shape_class({d: sizes[d] for p in spec.params for d in p.dims if isinstance(d, str)},
                        tuple(True for p in spec.params if p.kind == "tensor"))
    pick = records.get(key, klass)
    if pick is not None and pick < len(options):
        return pick
    names = [describe(o) for o in options]
    # The candidates' libraries live until their timing is over, then go.
    with tempfile.TemporaryDirectory(prefix="dslc-tune-") as folder:
        builds = [(i, _builder(file, opts.with_(schedule_picks=((kernel.name, i),)), kernel.name, i, Path(folder)))
                  for i in range(len(options))]
        outcome = search(kernel.name, builds, args, budget, terminal_progress(kernel.name), warn=_warning,
                         names=names)
    if outcome.tuned:  # a fallback (nothing timed) already said so in a warning
        records.put(key, klass, outcome, names[outcome.pick])
        print(f"dslc: autotune {kernel.name}: {names[outcome.pick]} "
              f"({outcome.seconds * 1e3:.3f} ms; {outcome.timed} of {len(options)} timed)", file=sys.stderr)
    return outcome.pick


def _warning(text: str) -> None:
    """A warning as dslc prints its diagnostics: one line on stderr."""
    click.echo(f"dslc: warning: {text}", err=True)


def _builder(file: Path, opts: CompileOptions, name: str, index: int, folder: Path):
    def build() -> Path:
        from dsl.backends.link import link_shared

        job = compile_file(file, opts, stop_after="so")
        return link_shared(job.objects, folder / f"{name}-{index}.so", job.target)

    return build


def _arg_specs(spec, sizes: dict[str, int]) -> list[dict]:
    from .call import NUMPY_NAME

    out = []
    for p in spec.params:
        if p.kind == "scalar":
            out.append({"kind": "scalar", "value": 1.0 if p.dtype.startswith("f") else 1})
            continue
        missing = [d for d in p.dims if isinstance(d, str) and d not in sizes]
        if missing:
            raise click.UsageError(f"--autotune needs a size for {', '.join(missing)} "
                                   f"(kernel {spec.name}, parameter '{p.name}'), e.g. {missing[0]}=512")
        shape = [d if isinstance(d, int) else sizes[d] for d in p.dims]
        strides = [1] * len(shape)
        for axis in range(len(shape) - 2, -1, -1):
            strides[axis] = strides[axis + 1] * shape[axis + 1]
        import numpy as np

        out.append({"kind": "tensor", "dtype": np.dtype(NUMPY_NAME[p.dtype]).str, "shape": shape,
                    "strides": strides, "output": p.output})
    return out
