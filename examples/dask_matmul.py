"""Multiply two large matrices block by block with `dsl.ops.matmul` on a local
Dask cluster of worker processes: each task computes one block of C from a row
panel of A and a column panel of B, and the kernels compile (or come from the
disk cache) inside the workers. Dask is an optional extra:

    pip install -e ".[dask]"
    python examples/dask_matmul.py [--size 4096] [--block 1024] [--workers 2]

Prints the time, numpy's time for the same product, and the largest error
relative to the largest element of C.
"""

from __future__ import annotations

import argparse
import logging
import os
import time

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster

import dsl


def block_product(a_panel: np.ndarray, b_panel: np.ndarray) -> np.ndarray:
    """One block of C: a row panel of A times a column panel of B, in a worker."""
    dsl.set_num_threads(1)  # one thread per worker process: Dask runs the blocks side by side
    return dsl.ops.matmul(a_panel, b_panel)


def worker_pid(_: int) -> int:
    return os.getpid()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=4096)
    parser.add_argument("--block", type=int, default=1024)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    n, bs = args.size, args.block
    rng = np.random.default_rng(0)
    a_np = rng.standard_normal((n, n), dtype=np.float32)
    b_np = rng.standard_normal((n, n), dtype=np.float32)

    cluster = LocalCluster(n_workers=args.workers, threads_per_worker=1, processes=True,
                           dashboard_address=None, silence_logs=logging.ERROR)
    with cluster, Client(cluster) as client:
        a = da.from_array(a_np, chunks=(bs, bs))
        b = da.from_array(b_np, chunks=(bs, bs))
        # 'ij' from 'ik' and 'kj': concatenate=True hands each task whole panels over k.
        c = da.blockwise(block_product, "ij", a, "ik", b, "kj", dtype=np.float32, concatenate=True)
        client.gather(client.map(worker_pid, range(args.workers)))  # workers up before timing
        start = time.perf_counter()
        c_np = c.compute()
        seconds = time.perf_counter() - start
        pids = set(client.run(os.getpid).values())

    start = time.perf_counter()
    want = a_np @ b_np
    numpy_seconds = time.perf_counter() - start
    error = float(np.max(np.abs(c_np - want)) / np.max(np.abs(want)))
    blocks = (n + bs - 1) // bs
    print(f"C = A @ B, {n}x{n}, {blocks}x{blocks} blocks of {bs} on {len(pids)} worker processes "
          f"(pids {sorted(pids)}, not this one: {os.getpid() not in pids})")
    print(f"dask + dsl.ops.matmul: {seconds:.3f} s ({2 * n ** 3 / seconds / 1e9:.1f} GFLOP/s, "
          f"with the transfers); numpy in this process: {numpy_seconds:.3f} s")
    print(f"max relative error: {error:.2e}")
    return 0 if error < 1e-5 else 1


if __name__ == "__main__":
    raise SystemExit(main())
