"""Shared pieces of the benchmark scripts: building kernels, timing, tables."""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import dsl
from dsl.backends.link import link_shared
from dsl.options import CompileOptions
from dsl.pipeline import compile_file

HERE = Path(__file__).resolve().parent


def build(tk_name: str, cpu: str | None = None):
    """Compile benchmarks/<tk_name> for this machine (or LLVM CPU `cpu`) to a
    temporary .so and load it (the file is deleted once loaded), e.g.
    `build("gemm.tk").gemm`."""
    job = compile_file(HERE / tk_name, CompileOptions(cpu=cpu), stop_after="so")
    with tempfile.TemporaryDirectory(prefix="dslc-bench-") as folder:
        out = Path(folder) / (Path(tk_name).stem + ".so")
        link_shared(job.objects, out, job.target)
        # Loading maps the library: it outlives its file, which goes with the folder.
        return dsl.load(out)


def median_seconds(fn, repeats: int, min_time: float = 0.05) -> float:
    """Median over `repeats` samples; each sample loops until `min_time` passed."""
    return interleaved({"fn": fn}, repeats, min_time)["fn"]


# Idle time before each multi-threaded sample. On two cores, the thread pools
# of the library timed just before (OpenBLAS, torch's OpenMP, ours) keep
# spinning for tens of milliseconds after their last call and take a core:
# interleaved at 2 threads, 256^3 ran at 39-72 GFLOP/s (dslc) and 37-75
# (torch), against 148-178 after 0.1 s of idle time, the speed each reaches
# when it runs alone.
SETTLE = 0.1
WARM_CALLS = 3


def interleaved(fns: dict, repeats: int, min_time: float = 0.05, clock=time.perf_counter,
                settle: float = 0.0) -> dict:
    """Median seconds per call of each function; the samples alternate, so a
    change in the machine's state hits every function alike. `clock` may be
    `time.thread_time` for single-threaded calls on a shared machine: the
    time slices other processes take are then not counted. `settle`: seconds
    of idle time (then a few untimed calls) before each sample, for
    multi-threaded calls (see SETTLE)."""
    for fn in fns.values():
        fn()
    samples: dict = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            if settle:
                time.sleep(settle)
                for _ in range(WARM_CALLS):
                    fn()
            calls, start = 0, clock()
            while True:
                fn()
                calls += 1
                elapsed = clock() - start
                if elapsed >= min_time:
                    break
            samples[name].append(elapsed / calls)
    _count_case()
    return {name: statistics.median(s) for name, s in samples.items()}


def settle_for(threads: int) -> float:
    """The `settle` of `interleaved` for calls on `threads` threads."""
    return SETTLE if threads > 1 else 0.0


def _count_case() -> None:
    """One more case timed: a byte in $BENCH_STATUS_FILE, which benchmarks/report.py
    counts to show how far a script has got."""
    path = os.environ.get("BENCH_STATUS_FILE")
    if path:
        with open(path, "a") as f:
            f.write(".")


def machine() -> str:
    from dsl.backends.target import host_target

    t = host_target()
    import os

    return f"{t.cpu}, {os.cpu_count()} cores, vector {t.vector_bits} bits"


def table(header: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
    line = lambda cells: "  ".join(str(c).rjust(w) for c, w in zip(cells, widths))  # noqa: E731
    return "\n".join([line(header), line(["-" * w for w in widths]), *map(line, rows)])
