"""GEMM: the DSL's matmul (benchmarks/gemm.tk) against numpy (OpenBLAS), at 1
and 2 threads, in one process, the samples alternating (each sample on 2
threads after a short idle time: see common.SETTLE). Prints GFLOP/s and the ratio.

    python benchmarks/gemm.py [--quick] [--cpu CPU]

`--cpu znver3` compiles the kernel for another x86 CPU than this one: on a
newer machine, the code the issue's Zen 3 would run (AVX2, FMA). Run it as
`OPENBLAS_CORETYPE=Zen python benchmarks/gemm.py --cpu znver3` so that
OpenBLAS runs its AVX2 kernels too (the header names the core it runs).

Needs threadpoolctl (the `bench` extra) to set OpenBLAS's thread count.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np
from threadpoolctl import threadpool_info, threadpool_limits

import dsl
import results
from common import build, interleaved, machine, settle_for, table

SIZES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
         (2048, 2048, 2048), (512, 3584, 3584), (17, 17, 17), (77, 77, 77), (129, 129, 129),
         (200, 200, 200), (1000, 1000, 1000)]
QUICK = [(64, 64, 64), (256, 256, 256), (77, 77, 77), (512, 512, 512)]


def run(sizes, threads: list[int], repeats: int, cpu: str | None = None) -> list[list[str]]:
    lib = build("gemm.tk", cpu)
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
                s = interleaved({"dslc": lambda: lib.gemm(a, b, c), "numpy": lambda: np.matmul(a, b, out=c)},
                                repeats, settle=settle_for(t))
            ours, blas = s["dslc"], s["numpy"]
            rows.append([f"{m}x{k}x{n}", t, f"{flops / ours / 1e9:.1f}", f"{flops / blas / 1e9:.1f}",
                         f"{blas / ours:.2f}", f"{err:.1e}"])
    return rows


def openblas_core() -> str:
    """The core type whose kernels numpy's OpenBLAS runs (OPENBLAS_CORETYPE sets it)."""
    cores = [i.get("architecture") for i in threadpool_info() if i.get("internal_api") == "openblas"]
    return cores[0] if cores else "unknown"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few sizes, fewer repeats")
    parser.add_argument("--cpu", help="compile for this LLVM CPU (default: this machine's), e.g. znver3")
    results.add_json_option(parser)
    args = parser.parse_args()
    rec = results.start(args, repeats=3 if args.quick else 5, threads=[1, 2], quick=args.quick, cpu=args.cpu,
                        openblas_core=openblas_core())
    sizes = QUICK if args.quick else SIZES
    rows = run(sizes, [1, 2], repeats=3 if args.quick else 5, cpu=args.cpu)
    print(f"GEMM f32, C = A @ B  ({machine()}; dslc compiled for {args.cpu or 'this CPU'}, "
          f"OpenBLAS core {openblas_core()}; medians of {3 if args.quick else 5} samples)")
    header = ["M x K x N", "threads", "dslc GFLOP/s", "numpy GFLOP/s", "dslc/numpy", "rel err"]
    print(table(header, rows))
    rec.table("gemm", "GEMM f32, C = A @ B (benchmarks/gemm.tk against numpy)", header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
