"""A user's quantized kernel against the library: examples/q4k_matvec_silu.tk
(`w: q4_k[N, K]`, the SiLU fused) versus dsl.ops.qmatvec followed by numpy's
SiLU, interleaved in one process, 1 and 2 threads.

    python benchmarks/quant_user.py [--sizes 4096x4096,11008x4096]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import dsl
from common import interleaved, machine, table

ROOT = Path(__file__).resolve().parent.parent


def build_example():
    out = Path(tempfile.mkdtemp(prefix="dslc-bench-")) / "q4k_matvec_silu.so"
    subprocess.run([sys.executable, "-m", "dsl.cli", str(ROOT / "examples" / "q4k_matvec_silu.tk"), "-o", str(out)],
                   check=True)
    return dsl.load(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="4096x4096,11008x4096")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    lib = build_example()
    rng = np.random.default_rng(0)
    rows = []
    for size in args.sizes.split(","):
        n, k = (int(v) for v in size.split("x"))
        w = dsl.ops.quantize(rng.standard_normal((n, k)).astype(np.float32), "q4_k")
        x = rng.standard_normal(k).astype(np.float32)
        y = np.empty(n, np.float32)

        def user():
            lib.q4k_matvec_silu(w, x, y)

        def library():
            z = dsl.ops.qmatvec(w, x, "q4_k", (n, k))
            return z / (1 + np.exp(-z))

        user()
        want = library()
        err = float(np.max(np.abs(y - want)) / max(1.0, np.max(np.abs(want))))
        for threads in (1, 2):
            dsl.set_num_threads(threads)
            t = interleaved({"user": user, "library": library}, args.repeats)
            rows.append([f"{n}x{k}", str(threads), f"{t['user'] * 1e3:.3f}", f"{t['library'] * 1e3:.3f}",
                         f"{t['library'] / t['user']:.2f}", f"{err:.1e}"])
    dsl.set_num_threads(0)
    print(machine())
    print(table(["N x K", "threads", "user kernel ms", "qmatvec + numpy SiLU ms", "speed-up", "max rel. diff"], rows))


if __name__ == "__main__":
    main()
