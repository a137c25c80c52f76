"""GEMM: the DSL's matmul (benchmarks/gemm.tk) against numpy (OpenBLAS), at 1
and 2 threads, in one process, the samples alternating (each sample on 2
threads after a short idle time: see common.SETTLE). Prints GFLOP/s, the ratio,
and both against the FMA peak of the cores used (fma_peak.py's loop, sampled
with each case): `dslc % peak`, and `peak/numpy`, the highest ratio to
OpenBLAS any kernel could reach at that size.

    python benchmarks/gemm.py [--quick] [--cpu CPU] [--zen3]

`--cpu znver3` compiles the kernel for another x86 CPU than this one: on a
newer machine, the code the issue's Zen 3 would run (AVX2, FMA). Run it as
`OPENBLAS_CORETYPE=Zen python benchmarks/gemm.py --cpu znver3` so that
OpenBLAS runs its AVX2 kernels too (the header names the core it runs).
`--zen3` adds that run's table to this one's (a second process, as `make
bench` does): on a machine with AVX-512, the closest it comes to Zen 3.

Needs threadpoolctl (the `bench` extra) to set OpenBLAS's thread count.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import dsl
import results
from common import build, interleaved, machine, settle_for, table
from fma_peak import fma_loop

SIZES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
         (2048, 2048, 2048), (512, 3584, 3584), (17, 17, 17), (77, 77, 77), (129, 129, 129),
         (200, 200, 200), (1000, 1000, 1000)]
QUICK = [(64, 64, 64), (256, 256, 256), (77, 77, 77), (512, 512, 512)]


def run(sizes, threads: list[int], repeats: int, cpu: str | None = None) -> list[list[str]]:
    lib = build("gemm.tk", cpu)
    peak = fma_loop()  # timed with each case, so at the clock the case ran at
    rows = []
    rng = np.random.default_rng(0)
    for m, k, n in sizes:
        a = rng.standard_normal((m, k), np.float32)
        b = rng.standard_normal((k, n), np.float32)
        c = np.empty((m, n), np.float32)
        flops = 2.0 * m * n * k
        lib.gemm(a, b, c)
        err = float(np.max(np.abs(c - a @ b)) / max(1.0, float(np.max(np.abs(a @ b)))))
        for t in threads:
            dsl.set_num_threads(t)
            with threadpool_limits(limits=t):
                fns = {"dslc": lambda: lib.gemm(a, b, c), "numpy": lambda: np.matmul(a, b, out=c)}
                s = interleaved(fns | ({"peak": peak[0]} if peak else {}), repeats, settle=settle_for(t))
            ours, blas = flops / s["dslc"] / 1e9, flops / s["numpy"] / 1e9
            top = peak[1] / s["peak"] / 1e9 * t if peak else None  # both cores at one core's peak
            rows.append([f"{m}x{k}x{n}", t, f"{ours:.1f}", f"{blas:.1f}", f"{ours / blas:.2f}",
                         f"{100 * ours / top:.0f}" if top else "-", f"{top / blas:.2f}" if top else "-",
                         f"{err:.1e}"])
    return rows


def openblas_core() -> str:
    """The core type whose kernels numpy's OpenBLAS runs (OPENBLAS_CORETYPE sets it)."""
    cores = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return cores[0] if cores else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few sizes, fewer repeats")
    parser.add_argument("--cpu", help="compile for this LLVM CPU (default: this machine's), e.g. znver3")
    parser.add_argument("--zen3", action="store_true",
                        help="also run, in a second process, the kernel compiled for znver3 against OpenBLAS's "
                             "AVX2 kernels (OPENBLAS_CORETYPE=Zen), and record that table too")
    results.add_json_option(parser)
    args = parser.parse_args()
    repeats = 3 if args.quick else 9
    rec = results.start(args, repeats=repeats, threads=[1, 2], quick=args.quick, cpu=args.cpu,
                        openblas_core=openblas_core())
    sizes = QUICK if args.quick else SIZES
    rows = run(sizes, [1, 2], repeats=repeats, cpu=args.cpu)
    print(f"GEMM f32, C = A @ B  ({machine()}; dslc compiled for {args.cpu or 'this CPU'}, "
          f"OpenBLAS core {openblas_core()}; medians of {repeats} samples)")
    header = ["M x K x N", "threads", "dslc GFLOP/s", "numpy GFLOP/s", "dslc/numpy", "dslc % peak", "peak/numpy",
              "rel err"]
    print(table(header, rows))
    rec.table("gemm", "GEMM f32, C = A @ B (benchmarks/gemm.tk against numpy)", header, rows)
    if args.zen3:
        rows, core = as_zen3(args.quick)
        print(f"\nThe same, as Zen 3 runs it: dslc compiled for znver3, OpenBLAS core {core}")
        print(table(header, rows))
        rec.table("gemm_zen3", "GEMM f32 as Zen 3 runs it: AVX2 code (cpu=znver3) against OpenBLAS's "
                  "AVX2 kernels (OPENBLAS_CORETYPE=Zen)", header, rows,
                  note=f"A second process on this machine; OpenBLAS ran its {core} kernels there.")
    return 0


def as_zen3(quick: bool) -> tuple[list[list[str]], str]:
    """The table of `gemm.py --cpu znver3` run under OPENBLAS_CORETYPE=Zen
    (OpenBLAS picks its core when loaded, so in a process of its own), and
    the core OpenBLAS ran there."""
    with tempfile.TemporaryDirectory(prefix="dslc-bench-") as folder:
        out = Path(folder) / "zen3.json"
        argv = [sys.executable, __file__, "--cpu", "znver3", "--json", str(out), *(["--quick"] if quick else [])]
        subprocess.run(argv, check=True, stdout=subprocess.DEVNULL, env=dict(os.environ, OPENBLAS_CORETYPE="Zen"))
        data = json.loads(out.read_text())
    recorded = next(t for t in data["tables"] if t["key"] == "gemm")
    rows = [[row[c] for c in recorded["columns"]] for row in recorded["rows"]]
    return rows, data["settings"]["openblas_core"]


if __name__ == "__main__":
    sys.exit(main())
