"""Every kernel of `examples/*.tk`, compiled once (tests/built_once.py),
against numpy on sizes 0, 1, 7, 64, 1000 and on non-contiguous views; and
the compiled code against the reference interpreter on small sizes.

Tolerances (u = 2**-24 for f32, 2**-53 for f64). A sum of n terms computed in any
order, with or without FMA contraction, is within gamma(n) * sum|term_k| of the
exact sum, gamma(n) = n*u / (1 - n*u) (Higham, "Accuracy and Stability of
Numerical Algorithms", 3.1). The references are computed in float64, whose own
error is negligible beside that bound, so a correct kernel can never fail these
checks, while a dropped or doubled term (error ~ one |term|) or a low-precision
accumulator does. Where no multiply feeds an add (row sums, the stencil) the
compiled code and the interpreter must agree bit for bit (docs/semantics.md:
they may differ only by FMA contraction and, when asked, reassociation).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

from built_once import file_library, in_worker_order

from dsl.lowering.interpret import run_kernel
from dsl.pipeline import compile_file
from example_cases import MORE_CASES, Case, f32, gamma

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TK_FILES = sorted(EXAMPLES.glob("*.tk"))
SIZES = (0, 1, 7, 64, 1000)


# ------------------------------------------------------------------ compiling


@dataclass
class Compiled:
    callers: dict  # kernel name -> compiled caller
    loop_ir: dict  # kernel name -> loop-IR kernel (for the interpreter)


@pytest.fixture(scope="module")
def compiled() -> Compiled:
    """Every example, built once for the run (each worker starts at another)."""
    callers, loop_ir = {}, {}
    for tk in in_worker_order(TK_FILES):
        lib = file_library(tk)
        for name in lib.specs:
            callers[name] = getattr(lib, name)
        for k in compile_file(tk, stop_after="loops").program.kernels:
            loop_ir[k.name] = k
    return Compiled(callers, loop_ir)


# ------------------------------------------------------------------ layouts
# Each returns an array with the values of `a` in a different memory layout.


def contiguous(a):
    return a.copy()


def transposed(a):
    """A transposed view (Fortran order for a matrix; a 1-D array stays as is)."""
    b = np.empty(a.shape[::-1], a.dtype).T
    b[...] = a
    return b


def stepped(a):
    """Every third element of the last axis (`A[:, 1::3]`); `x[::2]` in 1-D."""
    step = 2 if a.ndim == 1 else 3
    shape = a.shape[:-1] + (a.shape[-1] * step + 1,)
    big = np.full(shape, np.nan, a.dtype)
    b = big[..., 1::step][..., : a.shape[-1]]
    b[...] = a
    return b


def reversed_(a):
    """Negative strides on every axis (`x[::-1]`)."""
    b = np.empty_like(a)[(slice(None, None, -1),) * a.ndim]
    b[...] = a
    return b


def broadcast(a):
    """Stride 0 on the first axis: a read-only broadcast of the first row (or element)."""
    return np.broadcast_to(a[:1], a.shape)


LAYOUTS = {"contiguous": contiguous, "transposed": transposed, "stepped": stepped,
           "reversed": reversed_, "broadcast": broadcast}


# ------------------------------------------------------------------ cases


def saxpy_case():
    def make(rng, n):
        return [np.float32(1.75), f32(rng, n), f32(rng, n), np.full(n, np.nan, np.float32)]

    def reference(a, x, y, out):
        return float(a) * x.astype(np.float64) + y

    def bound(a, x, y, out):  # two roundings at most: a*x, then + y
        return gamma(2, np.float32) * (np.abs(float(a) * x.astype(np.float64)) + np.abs(y))

    return Case(make, (3,), reference, bound, False)


# (m, k, n) drawn from SIZES, with m*k*n kept under ~500k multiply-adds.
MATMUL_SHAPES = [(0, 7, 7), (7, 0, 7), (7, 64, 0), (1, 1, 1), (1000, 7, 1), (1, 1000, 7),
                 (7, 1000, 64), (64, 64, 64), (64, 7, 1000), (7, 7, 7)]


def matmul_case():
    def make(rng, size):
        m, k, n = size
        return [f32(rng, m, k), f32(rng, k, n), np.full((m, n), np.nan, np.float32)]

    def reference(a, b, c):
        return a.astype(np.float64) @ b.astype(np.float64)

    def bound(a, b, c):
        return gamma(a.shape[1], np.float32) * (np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)))

    return Case(make, (2,), reference, bound, False)


def _rows(rng, size):
    """R x C with R, C drawn from SIZES (R * C kept under 64k)."""
    r, c = {0: (0, 7), 1: (1, 1), 7: (7, 0), 64: (64, 1000), 1000: (1000, 7)}[size]
    return f32(rng, r, c)


def row_sums_case(out_dtype):
    def make(rng, size):
        x = _rows(rng, size)
        return [x, np.full(x.shape[0], np.nan, out_dtype)]

    def reference(x, out):
        return x.astype(np.float64).sum(axis=1)

    def bound(x, out):
        return gamma(x.shape[1], out_dtype) * np.abs(x.astype(np.float64)).sum(axis=1)

    return Case(make, (1,), reference, bound, True)


def jacobi_case():
    def make(rng, size):
        h, w = {0: (0, 5), 1: (1, 1), 7: (7, 2), 64: (64, 3), 1000: (1000, 64)}[size]
        return [f32(rng, h, w), np.full((h, w), np.nan, np.float32)]

    def reference(a, b):
        # The kernel's own f32 operations in its order: the interior is exact.
        a = np.asarray(a)
        want = a.copy()
        s = a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:]
        want[1:-1, 1:-1] = np.float32(0.2) * s
        return want

    def bound(a, b):
        return 0.0

    return Case(make, (1,), reference, bound, True)


CASES = {
    "saxpy": saxpy_case(),
    "matmul_loops": matmul_case(),
    "matmul_index": matmul_case(),
    "row_sums": row_sums_case(np.float32),
    "row_sums_f64": row_sums_case(np.float64),
    "jacobi_step": jacobi_case(),
    "matmul_naive": matmul_case(),
    "matmul_scheduled": matmul_case(),
    **MORE_CASES,
}


def sizes_of(name):
    return MATMUL_SHAPES if name.startswith("matmul") else SIZES


def size_id(size) -> str:
    return "x".join(map(str, size)) if isinstance(size, tuple) else str(size)


def seed(*parts) -> int:
    return zlib.crc32(repr(parts).encode())


def kernel_names() -> list[str]:
    """Kernel names of every example file (parsed, not compiled: cheap at collection)."""
    names = []
    for tk in TK_FILES:
        job = compile_file(tk, stop_after="ast")
        names += [fn.name for fn in job.front.module.functions]
    return names


KERNELS = kernel_names()


def test_every_example_kernel_has_a_case():
    assert KERNELS, "no kernels found in examples/*.tk"
    assert sorted(KERNELS) == sorted(CASES)


# ------------------------------------------------------------------ checks


def with_layout(args, case: Case, layout: str):
    """The arguments with every tensor in `layout` (outputs never broadcast)."""
    out = []
    for pos, a in enumerate(args):
        if not isinstance(a, np.ndarray) or a.ndim == 0 or pos in case.fixed:
            out.append(a)
        elif layout == "broadcast" and pos in case.outputs:
            out.append(a)
        else:
            out.append(LAYOUTS[layout](a))
    return out


def assert_within(got, want, bound, what: str):
    got = np.asarray(got)
    if np.issubdtype(got.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=what)
        return
    assert got.shape == np.shape(want), what
    err = np.abs(got.astype(np.float64) - want)
    bad = ~(err <= bound)  # NaN (an element never written) counts as bad
    assert not bad.any(), (f"{what}: {int(bad.sum())} elements off, worst error {np.nanmax(err, initial=0)}"
                           f" at {np.argwhere(bad)[0].tolist()}")


def numpy_params():
    for name in KERNELS:
        ranks = {a.ndim for a in CASES[name].make(np.random.default_rng(0), sizes_of(name)[0])
                 if isinstance(a, np.ndarray)}
        for size in sizes_of(name):
            for layout in CASES[name].layouts:
                if layout == "transposed" and max(ranks) < 2:
                    continue  # the same as contiguous
                yield pytest.param(name, size, layout, id=f"{name}-{size_id(size)}-{layout}")


@pytest.mark.parametrize("name,size,layout", list(numpy_params()))
def test_against_numpy(compiled, name, size, layout):
    case = CASES[name]
    rng = np.random.default_rng(seed(name, size, layout))
    args = with_layout(case.make(rng, size), case, layout)
    inputs = [a.copy() if isinstance(a, np.ndarray) else a for a in args]
    compiled.callers[name](*args)
    (pos,) = case.outputs
    want = case.reference(*args)
    assert_within(args[pos], want, case.bound(*args), f"{name} size={size} layout={layout}")
    for k, (before, after) in enumerate(zip(inputs, args)):
        if k not in case.outputs and isinstance(before, np.ndarray):
            np.testing.assert_array_equal(after, before, err_msg=f"{name} changed input #{k}")


def test_stepped_output_leaves_the_gaps_alone(compiled):
    """Writing `out[::2]` touches only every other element of the buffer."""
    rng = np.random.default_rng(1)
    big = np.full(2 * 64 + 1, -7.0, np.float32)
    x, y = f32(rng, 64), f32(rng, 64)
    compiled.callers["saxpy"](np.float32(2.0), x, y, big[1::2])
    assert (big[0::2] == -7.0).all()
    assert_within(big[1::2], 2.0 * x.astype(np.float64) + y, gamma(2, np.float32) * (2 * abs(x) + abs(y)),
                  "saxpy into big[1::2]")


# ------------------------------------------------------------------ interpreter


INTERPRETER_SIZES = {"matmul": ((0, 7, 7), (7, 0, 7), (1, 1, 1), (7, 7, 7), (1, 1000, 7)), "default": (0, 1, 7, 64),
                     "bmm": (0, 1, 7), "conv2d": (0, 1, 7)}  # size 64: seconds per call in the interpreter


def interpreter_params():
    for name in KERNELS:
        prefix = name.split("_")[0]
        sizes = INTERPRETER_SIZES.get(prefix, INTERPRETER_SIZES["default"])
        for size in sizes:
            for layout in ("contiguous", "reversed", "broadcast"):
                if layout not in CASES[name].layouts:
                    continue
                yield pytest.param(name, size, layout, id=f"{name}-{size_id(size)}-{layout}")


@pytest.mark.parametrize("name,size,layout", list(interpreter_params()))
def test_compiled_matches_interpreter(compiled, name, size, layout):
    case = CASES[name]
    rng = np.random.default_rng(seed(name, size, layout, "interp"))
    args = with_layout(case.make(rng, size), case, layout)
    (pos,) = case.outputs
    kernel = compiled.loop_ir[name]
    interp_args = list(args)
    interp_args[pos] = LAYOUTS["contiguous" if layout == "broadcast" else layout](args[pos])
    run_kernel(kernel, {p.name: a for p, a in zip(kernel.params, interp_args)})
    compiled.callers[name](*args)
    got, want = args[pos], interp_args[pos]
    if case.exact_vs_interpreter or np.issubdtype(got.dtype, np.integer):
        np.testing.assert_array_equal(got, want, err_msg=f"{name}: compiled != interpreter")
    else:
        # Both are within `bound` of the exact result, so within twice it of each other.
        assert_within(got, want.astype(np.float64), 2 * case.bound(*args), f"{name}: compiled vs interpreter")
