"""The copies of a multi-ISA library (`dslc --isa avx2,baseline`) against the
host-CPU build and numpy: GEMM (benchmarks/gemm.tk) GFLOP/s on one thread.

The copy is chosen when the library is loaded (DSL_ISA), so each copy runs in
its own process; the processes take turns, `--rounds` times, and each cell is
the median over the rounds of per-round medians.

    python benchmarks/multi_isa.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import HERE, machine, table

SIZES = [(64, 64, 64), (256, 256, 256), (512, 512, 512), (77, 77, 77), (1000, 1000, 1000)]
QUICK = [(64, 64, 64), (256, 256, 256)]

CHILD = r"""
import json, sys
import numpy as np
from threadpoolctl import threadpool_limits
import dsl
sys.path.insert(0, sys.argv[3])
from common import median_seconds

lib = dsl.load(sys.argv[1])
rng = np.random.default_rng(0)
out = {}
for m, k, n in json.loads(sys.argv[2]):
    a, b = rng.standard_normal((m, k), np.float32), rng.standard_normal((k, n), np.float32)
    c = np.empty((m, n), np.float32)
    with threadpool_limits(limits=1):
        out[f"{m}x{k}x{n}"] = [median_seconds(lambda: lib.gemm(a, b, c), 5),
                               median_seconds(lambda: np.matmul(a, b, out=c), 5)]
print(json.dumps(out))
"""


def _dslc(out: Path, *flags: str) -> Path:
    subprocess.run([sys.executable, "-m", "dsl.cli", str(HERE / "gemm.tk"), "-o", str(out), *flags], check=True)
    return out


def _round(lib: Path, isa: str | None, sizes) -> dict:
    env = {**os.environ, "DSL_NUM_THREADS": "1"}
    env.pop("DSL_ISA", None)
    if isa:
        env["DSL_ISA"] = isa
    done = subprocess.run([sys.executable, "-c", CHILD, str(lib), json.dumps(sizes), str(HERE)], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="two sizes, two rounds")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sizes = QUICK if args.quick else SIZES
    rounds = 2 if args.quick else args.rounds
    tmp = Path(tempfile.mkdtemp(prefix="dslc-bench-"))
    runs = {"host": (_dslc(tmp / "host.so"), None),
            "avx2": (_dslc(tmp / "multi.so", "--isa", "avx2,baseline"), "avx2"),
            "baseline": (tmp / "multi.so", "baseline")}
    samples: dict[str, list[dict]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, (lib, isa) in runs.items():
            samples[name].append(_round(lib, isa, sizes))
    rows = []
    for m, k, n in sizes:
        key, flops = f"{m}x{k}x{n}", 2.0 * m * k * n
        gflops = {name: flops / statistics.median(s[key][0] for s in got) / 1e9 for name, got in samples.items()}
        blas = flops / statistics.median(s[key][1] for got in samples.values() for s in got) / 1e9
        rows.append([key, *(f"{gflops[name]:.1f}" for name in runs), f"{blas:.1f}"])
    print(f"GEMM f32, 1 thread, GFLOP/s ({machine()}; medians of {rounds} interleaved rounds)")
    print(table(["size", "host build", "--isa avx2 copy", "--isa baseline copy", "numpy"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
