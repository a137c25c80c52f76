"""The seed's strided batched matmul: the DSL (as the seed writes it, and in
index notation) against numba's @njit(parallel=True) version of the same loops
and numpy's matmul, interleaved in one process. Prints GFLOP/s.

    python benchmarks/seed_bmm.py [--quick]

Needs numba and threadpoolctl (the `bench` extra).
"""

from __future__ import annotations

import argparse
import sys

import numba
import numpy as np
from numba import njit, prange
from threadpoolctl import threadpool_limits

import dsl
import results
from common import build, machine, median_seconds, table

# (batch of a, batch of b, I, K, J); a batch of 1 broadcasts against the other.
CASES = [(8, 8, 64, 64, 64), (8, 8, 128, 128, 128), (4, 4, 256, 256, 256), (1, 16, 96, 96, 96),
         (16, 1, 200, 77, 129)]
QUICK = [(8, 8, 64, 64, 64), (1, 16, 96, 96, 96)]


@njit(parallel=True, fastmath=False, cache=False)
def bmm_numba(out, a, b, a_batch_stride, b_batch_stride):
    """The seed's loop nest: strides in elements, batch stride 0 for a broadcast batch."""
    n_total, rows, cols = out.shape
    inner = a.shape[2]
    a_flat, b_flat = a.ravel(), b.ravel()
    as1, as2 = a.strides[1] // 4, a.strides[2] // 4
    bs1, bs2 = b.strides[1] // 4, b.strides[2] // 4
    for flat in prange(n_total * rows * cols):
        n = flat // (rows * cols)
        i = (flat // cols) % rows
        j = flat % cols
        a_base = n * a_batch_stride + i * as1
        b_base = n * b_batch_stride + j * bs2
        acc = np.float32(0.0)
        for k in range(inner):
            acc += a_flat[a_base + k * as2] * b_flat[b_base + k * bs1]
        out[n, i, j] = acc


def run(cases, threads: list[int], repeats: int) -> list[list[str]]:
    lib = build("seed_bmm.tk")
    rng = np.random.default_rng(0)
    rows = []
    for na, nb, m, k, n in cases:
        batch = max(na, nb)
        a = rng.standard_normal((na, m, k), np.float32)
        b = rng.standard_normal((nb, k, n), np.float32)
        a_view, b_view = np.broadcast_to(a, (batch, m, k)), np.broadcast_to(b, (batch, k, n))
        out = np.empty((batch, m, n), np.float32)
        want = np.matmul(a_view, b_view)
        flops = 2.0 * batch * m * n * k
        strides = (a.strides[0] // 4 if na > 1 else 0, b.strides[0] // 4 if nb > 1 else 0)
        runs = {
            "seed": lambda: lib.bmm_seed(a_view, b_view, out),
            "scheduled": lambda: lib.bmm_seed_scheduled(a_view, b_view, out),
            "index": lambda: lib.bmm_index(a_view, b_view, out),
            "numba": lambda: bmm_numba(out, a, b, *strides),
            "numpy": lambda: np.matmul(a_view, b_view, out=out),
        }
        for name, fn in runs.items():  # every version computes the same thing
            out.fill(np.nan)
            fn()
            assert np.allclose(out, want, rtol=1e-4, atol=1e-3), name
        for t in threads:
            dsl.set_num_threads(t)
            numba.set_num_threads(t)
            with threadpool_limits(limits=t):
                gflops = {name: flops / median_seconds(fn, repeats) / 1e9 for name, fn in runs.items()}
            rows.append([f"{na}/{nb} x {m}x{k}x{n}", t, *(f"{gflops[x]:.1f}" for x in runs)])
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two cases, fewer repeats")
    results.add_json_option(parser)
    args = parser.parse_args()
    repeats = 3 if args.quick else 5
    threads = sorted({1, numba.config.NUMBA_NUM_THREADS})
    rec = results.start(args, repeats=repeats, threads=threads, quick=args.quick)
    rows = run(QUICK if args.quick else CASES, threads, repeats)
    print(f"Batched matmul f32, GFLOP/s  ({machine()}; medians of {repeats} samples)")
    header = ["batch a/b x I x K x J", "threads", "dslc seed as written", "dslc + contract(i)",
              "dslc index notation", "numba", "numpy"]
    print(table(header, rows))
    rec.table("bmm", "Batched matmul f32, GFLOP/s", header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
