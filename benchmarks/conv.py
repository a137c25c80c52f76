"""The convolutions of `dsl.ops` (conv2d, conv_transpose2d) against torch
(oneDNN) and the seeds' numpy im2col, at 1 and 2 threads, interleaved in one
process (each sample runs every library once, in turn; medians shown).

    python benchmarks/conv.py [--quick] [--markdown FILE]

dslc runs in NHWC (its native layout, weights KH x KW x C_in x C_out), torch
in its default NCHW, numpy im2col in NHWC (the seeds' `conv_im2col`: a
strided window view reshaped, which copies, times the weights as a matrix).
Cases: the seeds' shape, a ResNet layer, a strided 1x1, a depthwise 3x3, a
conv_transpose2d with stride 2, and a small layer whose time is mostly the
call's own. GFLOP/s count 2 * multiply-adds of the
direct convolution. Needs threadpoolctl and torch.
"""

from __future__ import annotations

import argparse
import datetime
import sys

import numpy as np
import torch
from numpy.lib.stride_tricks import as_strided

import dsl
import results
from common import machine, table
from common import interleaved, settle_for
from dense import HEADER, _markdown, _threads, rate_row

F = torch.nn.functional
# (label, N, H, W, C_in, C_out, kernel, stride, padding, groups, transposed)
CASES = [
    ("seed NHWC (100,32,32,8) 3x3 8->16", 100, 32, 32, 8, 16, 3, 1, 0, 1, False),
    ("ResNet (8,56,56,64) 3x3 64->64 pad 1", 8, 56, 56, 64, 64, 3, 1, 1, 1, False),
    ("1x1 stride 2 (8,56,56,64) 64->128", 8, 56, 56, 64, 128, 1, 2, 0, 1, False),
    ("depthwise 3x3 (8,56,56,64) pad 1", 8, 56, 56, 64, 64, 3, 1, 1, 64, False),
    ("transposed 3x3 stride 2 (8,28,28,64) 64->32", 8, 28, 28, 64, 32, 3, 2, 1, 1, True),
    ("small (1,14,14,16) 3x3 16->16 pad 1", 1, 14, 14, 16, 16, 3, 1, 1, 1, False),  # the call's overhead
]


def im2col(x: np.ndarray, w: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """The seeds' numpy convolution: NHWC x, KKIO w, groups 1."""
    if padding:
        x = np.pad(x, ((0, 0), (padding, padding), (padding, padding), (0, 0)))
    n, h, wd, c = x.shape
    k = w.shape[0]
    p, q = (h - k) // stride + 1, (wd - k) // stride + 1
    sn, sh, sw, sc = x.strides
    windows = as_strided(x, (n, p, q, k, k, c), (sn, sh * stride, sw * stride, sh, sw, sc))
    return (windows.reshape(-1, k * k * c) @ w.reshape(-1, w.shape[3])).reshape(n, p, q, w.shape[3])


def case_functions(case) -> tuple[float, dict]:
    label, n, h, w, c_in, c_out, k, stride, padding, groups, transposed = case
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, h, w, c_in)).astype(np.float32)
    xt = torch.from_numpy(np.ascontiguousarray(x.transpose(0, 3, 1, 2)))
    if transposed:
        wt = torch.from_numpy(rng.standard_normal((c_in, c_out // groups, k, k)).astype(np.float32))
        wk = np.ascontiguousarray(wt.numpy().transpose(2, 3, 1, 0))
        options = dict(stride=stride, padding=padding, output_padding=stride - 1, groups=groups)
        out = F.conv_transpose2d(xt, wt, **options)
        flops = 2.0 * n * h * w * c_in * (c_out // groups) * k * k
        return flops, {"dslc": lambda: dsl.ops.conv_transpose2d(x, wk, layout="NHWC", **options),
                       "torch": lambda: F.conv_transpose2d(xt, wt, **options)}
    wt = torch.from_numpy(rng.standard_normal((c_out, c_in // groups, k, k)).astype(np.float32))
    wk = np.ascontiguousarray(wt.numpy().transpose(2, 3, 1, 0))
    options = dict(stride=stride, padding=padding, groups=groups)
    out = F.conv2d(xt, wt, **options)
    flops = 2.0 * out.numel() * (c_in // groups) * k * k
    fns = {"dslc": lambda: dsl.ops.conv2d(x, wk, layout="NHWC", **options),
           "torch": lambda: F.conv2d(xt, wt, **options)}
    if groups == 1:
        fns["numpy"] = lambda: im2col(x, wk, stride, padding)
    return flops, fns


def rows(threads: list[int], repeats: int) -> list[list[str]]:
    out = []
    for case in CASES:
        flops, fns = case_functions(case)
        for t in threads:
            with _threads(t):
                out.append(rate_row(case[0], t, flops, interleaved(fns, repeats, settle=settle_for(t))))
            print(table(HEADER["GFLOP/s"], out[-1:]).splitlines()[-1], flush=True)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--markdown", help="also write the table, with machine and date, to this file")
    results.add_json_option(parser)
    args = parser.parse_args()
    repeats = 3 if args.quick else 7
    rec = results.start(args, repeats=repeats, threads=[1, 2], quick=args.quick, sampling="interleaved")
    found = rows([1, 2], repeats)
    print(f"\n{table(HEADER['GFLOP/s'], found)}")
    rec.table("conv", "Convolutions, NHWC (dslc, numpy im2col) and NCHW (torch)", HEADER["GFLOP/s"], found)
    when = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Machine: {machine()}; {when}; medians of {repeats} interleaved samples; numpy "
                    f"{np.__version__}, torch {torch.__version__}.\n\n{_markdown(HEADER['GFLOP/s'], found)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
