"""Building kernel files for the cross tests: `dslc` for AArch64 (and the host),
generic inputs from a kernel's header description, and output comparison."""

from __future__ import annotations

import zlib
from pathlib import Path

import numpy as np
from click.testing import CliRunner
from harness import NUMPY_TYPES, CKernel, parse_header

from dsl.cli import main as dslc

ROOT = Path(__file__).resolve().parents[2]
AARCH64 = ["--target", "aarch64-linux-gnu"]
# Sizes for symbolic dims: odd, distinct, past a vector and a micro-kernel tile.
DIM_SIZES = (37, 19, 23, 29, 17, 13, 11, 7)
MAX_ELEMENTS = 1 << 20


def dslc_build(tk: Path, out_dir: Path, lib: str, *flags: str) -> tuple[dict[str, CKernel] | None, str]:
    """`dslc tk -o lib.so -H lib.h flags...`: (the kernels of the header, or None
    with dslc's message when the program does not compile)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    so, header = out_dir / f"{lib}.so", out_dir / f"{lib}.h"
    result = CliRunner().invoke(dslc, [str(tk), "-o", str(so), "-H", str(header), *flags])
    if result.exit_code != 0:
        return None, result.output + (result.stderr if result.stderr_bytes is not None else "")
    return parse_header(header.read_text()), ""


def generic_args(kernel: CKernel, seed: str) -> list | None:
    """Random arguments for `kernel` (inputs random, outputs zero), each symbolic
    dim one size from DIM_SIZES; None when a type is not one the driver ships."""
    rng = np.random.default_rng(zlib.crc32(seed.encode()))
    sizes = _dim_sizes(kernel)
    args = []
    for param in kernel.params:
        if param.dtype not in NUMPY_TYPES:
            return None
        dtype = np.dtype(NUMPY_TYPES[param.dtype])
        if param.dims is None:
            args.append(_random(rng, dtype, ()).item())
            continue
        shape = tuple(int(d) if d.isdigit() else sizes[d] for d in param.dims)
        args.append(np.zeros(shape, dtype) if param.output else _random(rng, dtype, shape))
    return args


def _dim_sizes(kernel: CKernel) -> dict[str, int]:
    """A size from DIM_SIZES per symbolic dim, in order of appearance; while an
    argument would exceed MAX_ELEMENTS (a rank-7 convolution window would
    take gigabytes), its largest symbolic dim is halved."""
    sizes: dict[str, int] = {}
    shapes = [param.dims for param in kernel.params if param.dims is not None]
    for dims in shapes:
        for d in dims:
            if not d.isdigit():
                sizes.setdefault(d, DIM_SIZES[len(sizes) % len(DIM_SIZES)])
    for dims in shapes:
        while True:
            symbolic = [d for d in dims if not d.isdigit()]
            count = int(np.prod([int(d) if d.isdigit() else sizes[d] for d in dims]))
            if count <= MAX_ELEMENTS or not symbolic or max(sizes[d] for d in symbolic) <= 2:
                break
            largest = max(symbolic, key=lambda d: sizes[d])
            sizes[largest] = max(2, sizes[largest] // 2)
    return sizes


def _random(rng, dtype: np.dtype, shape) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    low = 0 if dtype.kind == "u" else -5
    return rng.integers(low, 6, shape).astype(dtype)


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    """Floats within a sum's rounding (the orders of FMA and summation differ
    between targets); integers exact."""
    want = np.asarray(want)
    if got.dtype.kind == "f":
        scale = max(1.0, float(np.max(np.abs(want.astype(np.float64)), initial=0.0)))
        tol = 1e-3 if got.dtype.itemsize <= 2 else 1e-4
        np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=tol,
                                   atol=tol * scale, err_msg=what)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)
