"""The steps of docs/tutorial.md: a matmul made faster one schedule directive at
a time (benchmarks/tutorial.tk), each step's GFLOP/s beside numpy's (OpenBLAS),
interleaved in one process: every round times each step once, the table shows
the median round.

    python benchmarks/tutorial.py [--size 512] [--rounds 5]

Needs threadpoolctl (the `bench` extra) to set OpenBLAS's thread count. Each
timed call includes zeroing C (the first steps accumulate into it), about 1%
of the fastest step's time at 512.
"""

from __future__ import annotations

import argparse
import statistics
import sys

import numpy as np
from threadpoolctl import threadpool_limits

import dsl
import results
from common import build, machine, median_seconds, table

STEPS = ["step1_naive", "step2_reorder", "step3_tile", "step4_parallel", "step5_contract"]


def calls(lib, a, b, c) -> dict:
    """name -> a function computing C = A @ B from a zeroed C."""
    def step(kernel):
        def run():
            c.fill(0.0)
            kernel(a, b, c)
        return run

    fns = {name: step(getattr(lib, name)) for name in STEPS}
    fns["numpy"] = lambda: np.matmul(a, b, out=c)
    return fns


def check(lib, a, b) -> None:
    want = a.astype(np.float64) @ b.astype(np.float64)
    bound = a.shape[1] * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))
    for name in STEPS:
        c = np.zeros((a.shape[0], b.shape[1]), np.float32)
        getattr(lib, name)(a, b, c)
        if not (np.abs(c - want) <= bound).all():
            sys.exit(f"{name}: wrong result")


def measure(fns: dict, threads: int, rounds: int, flops: float) -> dict:
    dsl.set_num_threads(threads)
    samples = {name: [] for name in fns}
    with threadpool_limits(limits=threads):
        for _ in range(rounds):
            for name, fn in fns.items():
                samples[name].append(median_seconds(fn, 1, min_time=0.2))
    return {name: flops / statistics.median(s) / 1e9 for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--rounds", type=int, default=5)
    results.add_json_option(parser)
    args = parser.parse_args()
    rec = results.start(args, repeats=args.rounds, threads=[1, 2], size=args.size, sampling="interleaved rounds")
    n = args.size
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((n, n)).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    lib = build("tutorial.tk")
    check(lib, a, b)
    fns = calls(lib, a, b, c)
    flops = 2.0 * n ** 3
    one = measure(fns, 1, args.rounds, flops)
    two = measure(fns, 2, args.rounds, flops)
    print(f"# {machine()}; M = K = N = {n}; GFLOP/s, median of {args.rounds} interleaved rounds")
    rows = [[name, f"{one[name]:.1f}", f"{two[name]:.1f}", f"{one[name] / one['numpy']:.2f}"]
            for name in fns]
    header = ["step", "1 thread", "2 threads", "vs numpy (1 thread)"]
    print(table(header, rows))
    rec.table("steps", f"The tutorial's steps, M = K = N = {n}, GFLOP/s", header, rows)


if __name__ == "__main__":
    main()
