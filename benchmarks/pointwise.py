"""Pointwise ops, reductions, softmax and norms: dsl.ops against numpy and
torch, interleaved in one process at 1 and 2 threads, with a STREAM triad
(C, gcc -O3 -fopenmp) measured in the same run as the bandwidth reference.

    python benchmarks/pointwise.py [--quick]

Every output goes into preallocated memory where the library allows it
(torch's layer_norm / rms_norm / softmax allocate theirs: that is how they
are called). Needs torch and threadpoolctl; rows whose library is missing
are left out.
"""

from __future__ import annotations

import argparse
import ctypes
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import dsl
import results as bench_results  # `results` is a local name below
from common import machine, median_seconds, table

TRIAD_C = r"""
#include <omp.h>
void triad(float *a, const float *b, const float *c, float s, long n) {
    #pragma omp parallel for schedule(static)
    for (long i = 0; i < n; i++) a[i] = b[i] + s * c[i];
}
void set_threads(int n) { omp_set_num_threads(n); }
"""


def stream_triad():
    """The triad as a C function (a = b + s c), built with the system compiler."""
    tmp = Path(tempfile.mkdtemp(prefix="dslc-triad-"))
    (tmp / "triad.c").write_text(TRIAD_C)
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", "-o", str(tmp / "triad.so"),
                    str(tmp / "triad.c")], check=True)
    lib = ctypes.CDLL(str(tmp / "triad.so"))
    lib.triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_long]
    return lib


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def cases(n: int, rows: int, torch):
    """(name, unit, amount per call, {impl: fn}) for every benchmarked op."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(n, np.float32), rng.standard_normal(n, np.float32)
    out = np.empty_like(x)
    m = rng.standard_normal((rows, 1024), np.float32)
    m_out = np.empty_like(m)
    big = rng.standard_normal((rows, 4096), np.float32)
    big_out = np.empty_like(big)
    w, b = rng.standard_normal(4096, np.float32), rng.standard_normal(4096, np.float32)
    ops = dsl.ops
    gb = lambda bytes_per: n * bytes_per / 1e9  # noqa: E731
    table_ = [
        ("copy", "GB/s", gb(8), {"dslc": lambda: ops.copy(x, out=out), "numpy": lambda: np.copyto(out, x)}),
        ("add", "GB/s", gb(12), {"dslc": lambda: ops.add(x, y, out=out), "numpy": lambda: np.add(x, y, out=out)}),
        ("exp", "Gelem/s", n / 1e9, {"dslc": lambda: ops.exp(x, out=out), "numpy": lambda: np.exp(x, out=out)}),
        ("silu", "Gelem/s", n / 1e9, {"dslc": lambda: ops.silu(x, out=out)}),
        ("gelu", "Gelem/s", n / 1e9, {"dslc": lambda: ops.gelu(x, out=out)}),
        ("gelu tanh", "Gelem/s", n / 1e9, {"dslc": lambda: ops.gelu(x, approximate="tanh", out=out)}),
        ("sum", "GB/s", gb(4), {"dslc": lambda: ops.sum(x), "numpy": lambda: np.sum(x)}),
        (f"softmax {rows}x1024", "ms", None, {"dslc": lambda: ops.softmax(m, out=m_out)}),
        (f"layer_norm {rows}x4096", "ms", None, {"dslc": lambda: ops.layer_norm(big, w, b, out=big_out)}),
        (f"rms_norm {rows}x4096", "ms", None, {"dslc": lambda: ops.rms_norm(big, w, out=big_out)}),
    ]
    if torch is not None:
        tx, ty, tout = torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(out)
        tm, tbig, tw, tb = (torch.from_numpy(a) for a in (m, big, w, b))
        F = torch.nn.functional
        extra = {
            "copy": lambda: tout.copy_(tx), "add": lambda: torch.add(tx, ty, out=tout),
            "exp": lambda: torch.exp(tx, out=tout), "silu": lambda: torch.ops.aten.silu.out(tx, out=tout),
            "gelu": lambda: torch.ops.aten.gelu.out(tx, out=tout),
            "gelu tanh": lambda: torch.ops.aten.gelu.out(tx, approximate="tanh", out=tout),
            "sum": lambda: torch.sum(tx),
            f"softmax {rows}x1024": lambda: torch.softmax(tm, -1),
            f"layer_norm {rows}x4096": lambda: F.layer_norm(tbig, (4096,), tw, tb),
            f"rms_norm {rows}x4096": lambda: F.rms_norm(tbig, (4096,), tw, eps=1e-6),
        }
        for name, _, _, impls in table_:
            impls["torch"] = extra[name]
    return table_


def run(n: int, rows: int, threads: list[int], repeats: int) -> tuple[list[list[str]], list[list[str]]]:
    torch = _torch()
    triad_lib = stream_triad()
    a, b, c = (np.random.default_rng(1).standard_normal(n, np.float32) for _ in range(3))
    ptr = lambda arr: arr.ctypes.data  # noqa: E731
    bench = cases(n, rows, torch)
    results, stream = [], []
    for t in threads:
        dsl.set_num_threads(t)
        triad_lib.set_threads(t)
        if torch is not None:
            torch.set_num_threads(t)
        triad = median_seconds(lambda: triad_lib.triad(ptr(a), ptr(b), ptr(c), 3.0, n), repeats)
        bandwidth = 12 * n / triad / 1e9
        stream.append([t, f"{bandwidth:.1f}"])
        for name, unit, amount, impls in bench:
            times = {k: median_seconds(fn, repeats) for k, fn in impls.items()}
            row = [name, t]
            for impl in ("dslc", "numpy", "torch"):
                sec = times.get(impl)
                row.append("-" if sec is None else (f"{sec * 1e3:.2f}" if amount is None else f"{amount / sec:.2f}"))
            row.append(unit)
            ref = times.get("torch", times.get("numpy"))
            row.append(f"{ref / times['dslc']:.2f}" if ref else "-")
            row.append(f"{amount / times['dslc'] / bandwidth:.0%}" if unit == "GB/s" else "")
            results.append(row)
    return results, stream


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smaller arrays, fewer repeats")
    bench_results.add_json_option(parser)
    args = parser.parse_args()
    n, rows, repeats = ((1 << 22), 1024, 3) if args.quick else ((1 << 24), 4096, 5)
    rec = bench_results.start(args, repeats=repeats, threads=[1, 2], quick=args.quick, elements=n)
    results, stream = run(n, rows, [1, 2], repeats)
    print(f"Pointwise f32, {n} elements ({machine()}; medians of {repeats} samples; a shared machine)")
    print(table(["threads", "STREAM triad GB/s"], stream))
    print()
    header = ["op", "threads", "dslc", "numpy", "torch", "unit", "speedup vs torch (numpy)", "of triad"]
    print(table(header, results))
    rec.table("stream", f"STREAM triad (C, gcc -O3 -fopenmp), {n} elements", ["threads", "STREAM triad GB/s"], stream)
    rec.table("ops", f"Pointwise f32, {n} elements", header, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
