"""Compile time (cold and cached) and Python call overhead of `@dsl.kernel`
and of `dsl.ops`.

    python benchmarks/overhead.py

Cold: a fresh cache directory, so the kernel goes through the whole pipeline
(parse, check, lower, LLVM -O3, link). Cached (disk): a new process-level state
finds the `.so` in the cache. First calls of dsl.ops: a new process and an
empty cache, so the call compiles its kernel (a contraction's is the largest
the library builds; `dslc --stdlib` builds matmul's ahead of time). Call overhead: a saxpy on 1-element arrays,
median of many calls, next to a plain numpy `np.add(x, y, out=out)`. dsl.ops
on tiny arrays (4 x 16, 16 x 16): the time of a whole call, next to numpy and
torch (when installed) doing the same, 1 thread each.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

REPEATS = 7
KERNEL = '''
from dsl import f32, N

import dsl


@dsl.kernel
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
'''


def _load_module(folder: Path, name: str):
    import importlib.util

    path = folder / f"{name}.py"
    path.write_text(textwrap.dedent(KERNEL))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compile_times(folder: Path) -> tuple[list[float], list[float]]:
    import dsl.jit

    cold, cached = [], []
    for k in range(REPEATS):
        os.environ["DSL_CACHE_DIR"] = str(folder / f"cache{k}")
        module = _load_module(folder, f"kernel_{k}")
        start = time.perf_counter()
        module.saxpy.compile()
        cold.append(time.perf_counter() - start)
        dsl.jit._memory_cache.clear()
        again = _load_module(folder, f"kernel_{k}")
        start = time.perf_counter()
        again.saxpy.compile()
        cached.append(time.perf_counter() - start)
    return cold, cached


FIRST_CALL = """
import time
import numpy as np
import dsl.ops
a = np.ones((64, 64), np.float32)
start = time.perf_counter()
dsl.ops.{call}
print(time.perf_counter() - start)
"""
FIRST_CALLS = [("dsl.ops.contract('ij,jk->ik', a, b)", "contract('ij,jk->ik', a, a)"),
               ("dsl.ops.matmul(a, b)", "matmul(a, a)")]


def first_calls(folder: Path, repeats: int = 3) -> list[list[str]]:
    """Seconds of each first call, f32 64 x 64 operands: (median, min, max)
    over `repeats` processes, each with a cache directory of its own."""
    rows = []
    for label, call in FIRST_CALLS:
        times = []
        for k in range(repeats):
            env = {**os.environ, "DSL_CACHE_DIR": str(folder / f"first{len(rows)}_{k}")}
            out = subprocess.run([sys.executable, "-c", FIRST_CALL.format(call=call)], env=env, check=True,
                                 capture_output=True, text=True).stdout
            times.append(float(out.split()[-1]))
        rows.append([f"{label}, first call (s)", f"{statistics.median(times):.2f}", f"{min(times):.2f}",
                     f"{max(times):.2f}"])
    return rows


def call_overhead(folder: Path, n_calls: int = 20000) -> tuple[float, float]:
    module = _load_module(folder, "kernel_calls")
    x, y, out = (np.ones(1, np.float32) for _ in range(3))
    saxpy = module.saxpy
    saxpy(2.0, x, y, out)
    samples, numpy_samples = [], []
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(n_calls):
            saxpy(2.0, x, y, out)
        samples.append((time.perf_counter() - start) / n_calls)
        start = time.perf_counter()
        for _ in range(n_calls):
            np.add(x, y, out=out)
        numpy_samples.append((time.perf_counter() - start) / n_calls)
    return statistics.median(samples), statistics.median(numpy_samples)


def ops_calls(repeats: int = REPEATS) -> list[list[str]]:
    """Microseconds per dsl.ops call on tiny arrays, where the call's own
    Python (checks, dispatch) is most of the time, next to the same op in
    numpy and torch (1 thread each), sampled in turn."""
    import dsl
    from common import interleaved

    try:
        import torch
        import torch.nn.functional as F
        torch.set_num_threads(1)
    except ImportError:
        torch = None
    dsl.set_num_threads(1)
    rng = np.random.default_rng(0)
    x, y, o = (rng.standard_normal((4, 16)).astype(np.float32) for _ in range(3))
    a, c = rng.standard_normal((16, 16)).astype(np.float32), np.empty((16, 16), np.float32)
    v, w = rng.standard_normal(16).astype(np.float32), np.ones(16, np.float32)
    t = {k: torch.from_numpy(val) for k, val in dict(x=x, y=y, o=o, a=a, c=c, v=v, w=w).items()} if torch else {}
    cases = [
        ("add (4,16) + (4,16), out=", lambda: dsl.ops.add(x, y, out=o), lambda: np.add(x, y, out=o),
         lambda: torch.add(t["x"], t["y"], out=t["o"])),
        ("add (4,16) + (16,), out=", lambda: dsl.ops.add(x, v, out=o), lambda: np.add(x, v, out=o),
         lambda: torch.add(t["x"], t["v"], out=t["o"])),
        ("exp (4,16), out=", lambda: dsl.ops.exp(x, out=o), lambda: np.exp(x, out=o),
         lambda: torch.exp(t["x"], out=t["o"])),
        ("sum (4,16)", lambda: dsl.ops.sum(x), lambda: np.sum(x), lambda: torch.sum(t["x"])),
        ("softmax (4,16), last axis", lambda: dsl.ops.softmax(x), None, lambda: torch.softmax(t["x"], -1)),
        ("layer_norm (4,16)", lambda: dsl.ops.layer_norm(x, w, v), None,
         lambda: F.layer_norm(t["x"], (16,), t["w"], t["v"])),
        ("matmul 16x16 @ 16x16, out=", lambda: dsl.ops.matmul(a, a, out=c), lambda: np.matmul(a, a, out=c),
         lambda: torch.matmul(t["a"], t["a"], out=t["c"])),
        ("matmul 16x16 @ (16x16).T, out=", lambda: dsl.ops.matmul(a, a.T, out=c), lambda: np.matmul(a, a.T, out=c),
         lambda: torch.matmul(t["a"], t["a"].T, out=t["c"])),
        ("matvec 16x16", lambda: dsl.ops.matvec(a, v), lambda: np.matmul(a, v), lambda: torch.mv(t["a"], t["v"])),
        ("contract ik,kj->ij 16x16", lambda: dsl.ops.contract("ik,kj->ij", a, a),
         lambda: np.einsum("ik,kj->ij", a, a), lambda: torch.einsum("ik,kj->ij", t["a"], t["a"])),
    ]
    rows = []
    for name, ours, numpy_fn, torch_fn in cases:
        fns = {"dslc": ours, **({"numpy": numpy_fn} if numpy_fn else {}), **({"torch": torch_fn} if torch else {})}
        times = interleaved(fns, repeats, min_time=0.02)
        rows.append([name, *(f"{times[k] * 1e6:.2f}" if k in times else "-" for k in ("dslc", "numpy", "torch"))])
    return rows


def main() -> int:
    import argparse

    import results
    from common import table

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    results.add_json_option(parser)
    rec = results.start(parser.parse_args(), repeats=REPEATS)
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        sys.path.insert(0, str(folder))
        cold, cached = compile_times(folder)
        per_call, numpy_call = call_overhead(folder)
        first = first_calls(folder)
    print(f"{'measure':<34} {'median':>10} {'min':>10} {'max':>10}")
    print(f"{'compile, cold (s)':<34} {statistics.median(cold):>10.4f} {min(cold):>10.4f} {max(cold):>10.4f}")
    print(f"{'compile, cached on disk (s)':<34} {statistics.median(cached):>10.4f} {min(cached):>10.4f} {max(cached):>10.4f}")
    print(f"{'call overhead, saxpy N=1 (us)':<34} {per_call * 1e6:>10.2f}")
    print(f"{'numpy np.add N=1, for scale (us)':<34} {numpy_call * 1e6:>10.2f}")
    rec.table("overhead", "Compile time and call overhead", ["measure", "median", "min", "max"], [
        ["compile, cold (s)", f"{statistics.median(cold):.4f}", f"{min(cold):.4f}", f"{max(cold):.4f}"],
        ["compile, cached on disk (s)", f"{statistics.median(cached):.4f}", f"{min(cached):.4f}", f"{max(cached):.4f}"],
        ["call overhead, saxpy N=1 (us)", f"{per_call * 1e6:.2f}", "", ""],
        ["numpy np.add N=1, for scale (us)", f"{numpy_call * 1e6:.2f}", "", ""]])
    print()
    print(table(["dsl.ops, new process, empty cache", "median", "min", "max"], first))
    rec.table("first_calls", "First calls of dsl.ops (f32 64 x 64): a new process, an empty cache",
              ["call", "median s", "min s", "max s"], first)
    rows = ops_calls()
    header = ["call", "dslc us", "numpy us", "torch us"]
    print()
    print(table(header, rows))
    rec.table("ops_calls", "dsl.ops calls on tiny arrays, microseconds per call (1 thread)", header, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
