"""Compile every examples/*.tk to a shared library with `dslc`, run each kernel
on random inputs, and compare with numpy: one line per kernel (the error is
relative to the largest value of the reference, or absolute below 1). Then
build and run the C program of examples/c/ against two of the libraries.

    python examples/run_examples.py [--build-dir DIR]
"""

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import dsl
from references import CASES

HERE = Path(__file__).resolve().parent


def build(tk: Path, out_dir: Path) -> Path:
    so = out_dir / f"{tk.stem}.so"
    cmd = [sys.executable, "-m", "dsl.cli", str(tk), "-o", str(so), "-H", str(so.with_suffix(".h"))]
    subprocess.run(cmd, check=True)
    return so


def run_case(lib, name: str) -> tuple[float, float]:
    args, reference = CASES[name]()
    kernel = getattr(lib, name)
    kernel(*args)  # warm up
    times = []
    for _ in range(5):
        start = time.perf_counter()
        kernel(*args)
        times.append(time.perf_counter() - start)
    elapsed = statistics.median(times)
    got, want = reference(*args)
    if not got.size:
        return 0.0, elapsed
    scale = max(1.0, float(np.max(np.abs(want))))
    return float(np.max(np.abs(got - want))) / scale, elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-dir", type=Path, default=HERE / "build")
    args = parser.parse_args()
    args.build_dir.mkdir(parents=True, exist_ok=True)
    failures = 0
    print(f"{'kernel':<20} {'max error':>14} {'time (median of 5)':>20}")
    for tk in sorted(HERE.glob("*.tk")):
        lib = dsl.load(build(tk, args.build_dir))
        for name in sorted(lib.specs):
            if name not in CASES:
                print(f"{name:<20} {'(no reference)':>14}")
                continue
            err, seconds = run_case(lib, name)
            ok = err < 1e-3
            failures += not ok
            print(f"{name:<20} {err:>14.3g} {seconds * 1e3:>17.3f} ms{'' if ok else '  MISMATCH'}")
    c_program = subprocess.run(["sh", str(HERE / "c" / "build_and_run.sh"), str(args.build_dir / "c")],
                               env={**os.environ, "DSLC": f"{sys.executable} -m dsl.cli"})
    print(f"{'examples/c/main.c':<20} {'ok' if c_program.returncode == 0 else 'FAILED':>14}")
    failures += c_program.returncode != 0
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
