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
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import dsl
import results as bench_results  # `results` is a local name below
from common import interleaved, machine, settle_for, table

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


def _activations(x, out, label: str, torch) -> list:
    """Rows for the math functions on `x` (the large array, or one that stays in L2)."""
    ops, n = dsl.ops, x.size
    rows = [
        (f"exp{label}", {"dslc": lambda: ops.exp(x, out=out), "numpy": lambda: np.exp(x, out=out)}),
        (f"tanh{label}", {"dslc": lambda: ops.tanh(x, out=out), "numpy": lambda: np.tanh(x, out=out)}),
        (f"erf{label}", {"dslc": lambda: ops.erf(x, out=out)}),
        (f"silu{label}", {"dslc": lambda: ops.silu(x, out=out)}),
        (f"gelu{label}", {"dslc": lambda: ops.gelu(x, out=out)}),
        (f"gelu tanh{label}", {"dslc": lambda: ops.gelu(x, approximate="tanh", out=out)}),
    ]
    if torch is not None:
        tx, tout = torch.from_numpy(x), torch.from_numpy(out)
        aten = torch.ops.aten
        theirs = [lambda: torch.exp(tx, out=tout), lambda: torch.tanh(tx, out=tout), lambda: torch.erf(tx, out=tout),
                  lambda: aten.silu.out(tx, out=tout), lambda: aten.gelu.out(tx, out=tout),
                  lambda: aten.gelu.out(tx, approximate="tanh", out=tout)]
        for (_, impls), fn in zip(rows, theirs):
            impls["torch"] = fn
    return [(name, "Gelem/s", n / 1e9, 8 * n if not label.endswith("(L2)") else None, impls) for name, impls in rows]


def cases(n: int, rows: int, torch):
    """(name, unit, amount per call, bytes moved or None when in cache, {impl: fn})
    for every benchmarked op."""
    rng = np.random.default_rng(0)
    x, y, z = (rng.standard_normal(n, np.float32) for _ in range(3))
    out = np.empty_like(x)
    small = rng.standard_normal(1 << 16, np.float32)
    small_out = np.empty_like(small)
    m = rng.standard_normal((rows, 1024), np.float32)
    m_out = np.empty_like(m)
    m_small, m_small_out = m[:64].copy(), np.empty_like(m[:64])
    big = rng.standard_normal((rows, 4096), np.float32)
    big_out = np.empty_like(big)
    w, b = rng.standard_normal(4096, np.float32), rng.standard_normal(4096, np.float32)
    tmp = np.empty_like(x)
    ops = dsl.ops

    def numpy_chain():  # silu(x) * y + z, op by op into preallocated memory
        np.negative(x, out=tmp)
        np.exp(tmp, out=tmp)
        np.add(tmp, 1, out=tmp)
        np.divide(x, tmp, out=tmp)
        np.multiply(tmp, y, out=tmp)
        np.add(tmp, z, out=out)

    table_ = [
        ("copy", "GB/s", 8 * n / 1e9, 8 * n, {"dslc": lambda: ops.copy(x, out=out), "numpy": lambda: np.copyto(out, x)}),
        ("add", "GB/s", 12 * n / 1e9, 12 * n, {"dslc": lambda: ops.add(x, y, out=out),
                                               "numpy": lambda: np.add(x, y, out=out)}),
        *_activations(x, out, "", torch),
        *_activations(small, small_out, " 64K (L2)", torch),
        ("fused silu(x)*y+z", "Gelem/s", n / 1e9, 16 * n, {
            "dslc": lambda: ops.fused("silu(x) * y + z", x=x, y=y, z=z, out=out), "numpy": numpy_chain}),
        ("sum", "GB/s", 4 * n / 1e9, 4 * n, {"dslc": lambda: ops.sum(x), "numpy": lambda: np.sum(x)}),
        ("max", "GB/s", 4 * n / 1e9, 4 * n, {"dslc": lambda: ops.max(x), "numpy": lambda: np.max(x)}),
        ("max 64K (L2)", "GB/s", 4 * small.size / 1e9, None, {"dslc": lambda: ops.max(small),
                                                              "numpy": lambda: np.max(small)}),
        (f"softmax {rows}x1024", "ms", None, 8 * m.size, {"dslc": lambda: ops.softmax(m, out=m_out)}),
        ("softmax 64x1024 (L2)", "ms", None, None, {"dslc": lambda: ops.softmax(m_small, out=m_small_out)}),
        (f"layer_norm {rows}x4096", "ms", None, 8 * big.size, {"dslc": lambda: ops.layer_norm(big, w, b, out=big_out)}),
        (f"rms_norm {rows}x4096", "ms", None, 8 * big.size, {"dslc": lambda: ops.rms_norm(big, w, out=big_out)}),
        # Other layouts: the axis not the contiguous one, a Fortran-ordered array.
        (f"softmax {rows}x1024 axis 0", "ms", None, 8 * m.size,
         {"dslc": lambda: ops.softmax(m, axis=0, out=m_out)}),
        (f"layer_norm {rows}x1024 axis 0", "ms", None, 8 * m.size,
         {"dslc": lambda: ops.layer_norm(m, axis=0, out=m_out)}),
        (f"argmax {rows}x1024 rows", "GB/s", 4 * m.size / 1e9, 4 * m.size,
         {"dslc": lambda: ops.argmax(m, axis=1), "numpy": lambda: np.argmax(m, axis=1)}),
        (f"sum {rows}x4096 Fortran", "GB/s", 4 * big.size / 1e9, 4 * big.size,
         {"dslc": lambda: ops.sum(big.T), "numpy": lambda: np.sum(big.T)}),
        (f"exp {rows}x4096 Fortran", "Gelem/s", big.size / 1e9, 8 * big.size,
         {"dslc": lambda: ops.exp(big.T, out=big_out.T), "numpy": lambda: np.exp(big.T, out=big_out.T)}),
    ]
    if torch is not None:
        tx, ty, tz, tout = (torch.from_numpy(a) for a in (x, y, z, out))
        tm, tms, tbig, tw, tb, tsmall = (torch.from_numpy(a) for a in (m, m_small, big, w, b, small))
        F = torch.nn.functional
        extra = {
            "copy": lambda: tout.copy_(tx), "add": lambda: torch.add(tx, ty, out=tout),
            "fused silu(x)*y+z": lambda: torch.add(F.silu(tx) * ty, tz, out=tout),
            "sum": lambda: torch.sum(tx), "max": lambda: torch.max(tx),
            "max 64K (L2)": lambda: torch.max(tsmall),
            f"softmax {rows}x1024": lambda: torch.softmax(tm, -1),
            "softmax 64x1024 (L2)": lambda: torch.softmax(tms, -1),
            f"layer_norm {rows}x4096": lambda: F.layer_norm(tbig, (4096,), tw, tb),
            f"rms_norm {rows}x4096": lambda: F.rms_norm(tbig, (4096,), tw, eps=1e-6),
            f"softmax {rows}x1024 axis 0": lambda: torch.softmax(tm, 0),
            f"layer_norm {rows}x1024 axis 0": lambda: F.layer_norm(tm.T, (rows,)),
            f"argmax {rows}x1024 rows": lambda: torch.argmax(tm, 1),
            f"sum {rows}x4096 Fortran": lambda: torch.sum(tbig.T),
        }
        for name, _, _, _, impls in table_:
            if name in extra:
                impls["torch"] = extra[name]
    return table_


def _bound(unit: str, amount, traffic, bandwidth: float) -> str:
    """The best a row can reach moving its bytes at the triad's bandwidth."""
    if traffic is None:
        return "in cache"
    seconds = traffic / (bandwidth * 1e9)
    return f"{seconds * 1e3:.2f}" if amount is None else f"{amount / seconds:.2f}"


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
        clock = time.thread_time if t == 1 else time.perf_counter
        triad = interleaved({"triad": lambda: triad_lib.triad(ptr(a), ptr(b), ptr(c), 3.0, n)}, repeats,
                            clock=clock)["triad"]
        bandwidth = 12 * n / triad / 1e9
        stream.append([t, f"{bandwidth:.1f}"])
        for name, unit, amount, traffic, impls in bench:
            # 1 thread: the calling thread's CPU time (every library computes on it), which
            # other processes' time slices on this shared machine do not inflate.
            times = interleaved(impls, repeats, clock=clock, settle=settle_for(t))
            row = [name, t]
            for impl in ("dslc", "numpy", "torch"):
                sec = times.get(impl)
                row.append("-" if sec is None else (f"{sec * 1e3:.2f}" if amount is None else f"{amount / sec:.2f}"))
            row.append(unit)
            ref = times.get("torch", times.get("numpy"))
            row.append(f"{ref / times['dslc']:.2f}" if ref else "-")
            row.append(f"{amount / times['dslc'] / bandwidth:.0%}" if unit == "GB/s" else "")
            row.append(_bound(unit, amount, traffic, bandwidth))
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
    print(f"Pointwise f32, {n} elements ({machine()}; medians of {repeats} samples; a shared machine, "
          f"load average {os.getloadavg()[0]:.1f}; 1 thread timed by the calling thread's CPU time, "
          "2 threads by the wall clock)")
    print(table(["threads", "STREAM triad GB/s"], stream))
    print()
    header = ["op", "threads", "dslc", "numpy", "torch", "unit", "speedup vs torch (numpy)", "of triad",
              "triad bound"]
    print(table(header, results))
    rec.table("stream", f"STREAM triad (C, gcc -O3 -fopenmp), {n} elements", ["threads", "STREAM triad GB/s"], stream)
    rec.table("ops", f"Pointwise f32, {n} elements", header, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
