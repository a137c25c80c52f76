"""GGML's quantized formats: dsl.ops against ggml itself (the libggml-python
wheel), interleaved in one process. Prints, per type, quantize and dequantize
of a 4096x4096 matrix (ggml's reference code, as ggml_quantize_chunk runs it
without an importance matrix) and the fused matrix-vector product at 1 and 2
threads, weights cache-resident (one matrix) and streaming from DRAM (a
rotation of matrices larger than the last-level cache).

    python benchmarks/quant.py [--quick]
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

import dsl
import results
from common import interleaved, machine, settle_for, table
from ggml_ctypes import Ggml

TYPES = ("q8_0", "q4_k", "q5_k", "q6_k")
STREAM_BYTES = 160 << 20  # more than the last-level cache of the machines we run on


def conversions(ggml: Ggml, qtype: str, x: np.ndarray, repeats: int) -> list[str]:
    ours_q = dsl.ops.quantize(x, qtype)
    theirs_q = np.empty_like(ours_q)
    ggml.quantize(x, qtype, theirs_q)
    same = "yes" if np.array_equal(ours_q, theirs_q) else "NO"
    y = np.empty_like(x)

    def ours_on(threads: int):
        return lambda: (dsl.set_num_threads(threads), dsl.ops.quantize(x, qtype, out=ours_q))

    t = interleaved({"ggml": lambda: ggml.quantize(x, qtype, theirs_q), 1: ours_on(1), 2: ours_on(2)},
                    repeats, 0.0, settle=settle_for(2))
    cells = [qtype, f"{t['ggml'] * 1e3:.0f}"]
    for threads in (1, 2):
        cells += [f"{t[threads] * 1e3:.0f}", f"{t['ggml'] / t[threads]:.1f}"]
    d = interleaved({"ggml": lambda: ggml.dequantize(theirs_q, qtype, y),
                     "dslc": lambda: (dsl.set_num_threads(2), dsl.ops.dequantize(theirs_q, qtype, x.shape, out=y))},
                    repeats, settle=settle_for(2))
    return cells + [same, f"{d['ggml'] * 1e3:.2f}", f"{d['dslc'] * 1e3:.2f}", f"{d['ggml'] / d['dslc']:.2f}"]


def matvecs(ggml: Ggml, qtype: str, w: np.ndarray, threads: int, repeats: int) -> list[str]:
    n, k = w.shape
    wq = dsl.ops.quantize(w, qtype)
    copies = max(1, STREAM_BYTES // wq.nbytes)
    stream = [wq.copy() for _ in range(copies)]
    x = np.random.default_rng(1).standard_normal(k).astype(np.float32)
    y = np.empty(n, np.float32)
    theirs = ggml.matvec(qtype, n, k, threads)
    dsl.set_num_threads(threads)
    cells = [qtype, str(threads)]
    for weights in ([wq], stream):
        turn = iter(range(1 << 62))
        t = interleaved({"ggml": lambda: theirs(weights[next(turn) % len(weights)], x, y),
                         "dslc": lambda: dsl.ops.qmatvec(weights[next(turn) % len(weights)], x, qtype, w.shape)},
                        repeats, settle=settle_for(threads))
        cells += [f"{t['ggml'] * 1e3:.3f}", f"{t['dslc'] * 1e3:.3f}", f"{t['ggml'] / t['dslc']:.2f}"]
    theirs(wq, x, y)
    err = np.abs(dsl.ops.qmatvec(wq, x, qtype, w.shape) - y).max() / np.abs(y).max()
    return cells + [f"{err:.1e}"]


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1024x1024 and fewer repeats")
    results.add_json_option(parser)
    args = parser.parse_args(argv)
    size, repeats = (1024, 3) if args.quick else (4096, 5)
    rec = results.start(args, repeats=repeats, threads=[1, 2], quick=args.quick, size=size)
    ggml = Ggml()
    w = np.random.default_rng(0).standard_normal((size, size)).astype(np.float32)
    matvec_repeats = 3 * repeats  # calls under a millisecond: more samples cost little and steady the median
    print(f"# GGML formats, {size}x{size} f32 weights; {machine()}; medians of {repeats} "
          f"(matvec: {matvec_repeats}), samples interleaved")
    print("\n## quantize (ggml's reference, 1 thread; dslc on 1 and 2 threads) and dequantize (2 threads), ms\n")
    rows = [conversions(ggml, t, w, repeats) for t in TYPES]
    header = ["type", "ggml q", "dslc q 1t", "x 1t", "dslc q 2t", "x 2t", "same bytes", "ggml dq", "dslc dq", "x dq"]
    print(table(header, rows))
    rec.table("convert", f"Quantize and dequantize, {size}x{size}, ms", header, rows)
    print("\n## matrix-vector product y = W x (x quantized each call, as ggml does), ms\n")
    rows = [matvecs(ggml, t, w, threads, matvec_repeats) for t in TYPES for threads in (1, 2)]
    header = ["type", "threads", "ggml L3", "dslc L3", "x L3", "ggml DRAM", "dslc DRAM", "x DRAM", "max rel diff"]
    print(table(header, rows))
    rec.table("matvec", f"Matrix-vector product y = W x, {size}x{size}, ms", header, rows)


if __name__ == "__main__":
    main(sys.argv[1:])
