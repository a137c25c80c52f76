"""The contraction pass's extended forms: batch-reduce loops (BRGEMM), a sum
that accumulates into C (`+=`), an epilogue applied to the sum on each tile's
last visit (`relu(sum(..) + bias[n])`, helpers inlined), and nests of batch
loops. Checked against numpy on sizes around the tile and panel edges, packed
(small blocking options force it) and unpacked (the automatic path for small
products), on 1 and 2 threads; and the interpreter runs the scheduled IR."""

import numpy as np
import pytest

from tk_library import compile_to, load_library

from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel

HELPERS = """
def relu(x: f32) -> f32:
    return max(x, 0.0)

def gelu(x: f32) -> f32:
    return 0.5 * x * (1.0 + erf(x * 0.70710677))

def silu(x: f32) -> f32:
    return x / (1.0 + exp(-x))
"""
FORMS = {
    "br": "C[m, n] = sum(A[r, m, k] * B[r, k, n])",
    "acc": "C[m, n] += sum(A[r, m, k] * B[r, k, n])",
    "relu_bias": "C[m, n] = relu(sum(A[r, m, k] * B[r, k, n]) + bias[n])",
    "gelu_silu": "C[m, n] = silu(gelu(sum(A[r, m, k] * B[r, k, n]) - bias[n]))",
    "acc_relu": "C[m, n] = relu(C[m, n] + sum(A[r, m, k] * B[r, k, n]) - bias[n])",
}
SIG = "(A: f32[R, M, K], B: f32[R, K, N], bias: f32[N], C: f32[M, N])"
KERNELS = HELPERS
PACKED = ("br", "acc_relu")  # the packed path too (each kernel costs seconds to compile)
for name, body in FORMS.items():
    # A sum added to C starts from C: a reordering of the additions.
    opts = "@options(reassociate=True)\n" if name.startswith("acc") else ""
    KERNELS += f"\n{opts}def {name}{SIG}:\n    {body}\n"
    if name in PACKED:
        KERNELS += f"\n{opts}@schedule(contract(m, mc=12, kc=5, nc=32))\ndef {name}_packed{SIG}:\n    {body}\n"
KERNELS += """
def batched(A: f32[P, Q, M, K], B: f32[Q, K, N], C: f32[P, Q, M, N]):
    C[p, q, m, n] = sum(A[p, q, m, k] * B[q, k, n])

@options(reassociate=True)
def gemm_steps(A: f32[R, M, K], B: f32[R, K, N], C: f32[M, N]):
    for r in range(R):
        C[m, n] += sum(A[r, m, k] * B[r, k, n])
"""
SIZES = [(0, 3, 4, 5), (2, 0, 4, 5), (3, 5, 0, 7), (1, 1, 1, 1), (3, 7, 17, 33), (4, 13, 6, 31),
         (2, 61, 40, 70), (5, 29, 11, 47)]


def reference(name, a, b, bias, c0):
    s = np.einsum("rmk,rkn->mn", a.astype(np.float64), b.astype(np.float64))
    if name == "acc":
        return c0 + s
    if name == "acc_relu":
        return np.maximum(c0 + s - bias, 0)
    if name == "relu_bias":
        return np.maximum(s + bias, 0)
    if name == "gelu_silu":
        from math import erf
        x = s - bias
        g = 0.5 * x * (1 + np.vectorize(erf, otypes=[float])(x * 0.70710677))
        return g / (1 + np.exp(-g))
    return s


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def operands(r, m, k, n, seed=0):
    rng = np.random.default_rng(seed + r + 7 * m + 11 * k + 13 * n)
    a = rng.standard_normal((r, m, k)).astype(np.float32)
    b = rng.standard_normal((r, k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    return a, b, bias, c


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("name", [*FORMS, *(f"{n}_packed" for n in PACKED)])
def test_forms(lib, name, size, threads):
    r, m, k, n = size
    a, b, bias, c0 = operands(*size)
    c = c0.copy()
    lib.set_num_threads(threads)
    getattr(lib, name)(a, b, bias, c)
    lib.set_num_threads(0)
    want = reference(name.removesuffix("_packed"), a, b, bias, c0.astype(np.float64))
    scale = 1.0 + np.einsum("rmk,rkn->mn", np.abs(a).astype(np.float64), np.abs(b).astype(np.float64))
    assert np.all(np.abs(c - want) <= 1e-5 * scale * max(1, r * k) ** 0.5)


def test_batch_loops_and_broadcast(lib):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((1, 5, 19, 23)).astype(np.float32)
    b = rng.standard_normal((5, 23, 37)).astype(np.float32)
    c = np.full((3, 5, 19, 37), np.nan, np.float32)
    lib.batched(np.broadcast_to(a, (3, 5, 19, 23)), b, c)
    assert np.allclose(c, np.broadcast_to(a @ b, c.shape), rtol=1e-5, atol=1e-5)


def test_loop_around_accumulating_sum(lib):
    """`for r: C += sum(..)`: r does not index C, so under reassociate it moves
    inside the sum: one batch-reduce contraction, C's tile kept in registers
    across r (not one contraction per step, each loading and storing C)."""
    a, b, _, c0 = operands(4, 30, 20, 50)
    c = c0.copy()
    lib.gemm_steps(a, b, c)
    assert np.allclose(c, c0 + np.einsum("rmk,rkn->mn", a, b), rtol=1e-5, atol=1e-4)
    printed = format_kernel(next(k for k in compile_to(KERNELS, "schedule").program.kernels
                                 if k.name == "gemm_steps"))
    assert "acc0_0" in printed
    assert printed.index("acc0_0 = C[") < printed.index("for r in range(0, R):")  # r inside the tile


STEPS = """
@options(reassociate=True){schedule}
def {name}(A: f32[R, M, K], B: f32[R, K, N], C: f32[{c_shape}]):
    for r in range({r_range}):
        C[{c_index}] += sum(A[r, m, k] * B[r, k, n])
"""
SUNK = "moved inside the sum it repeats"


@pytest.mark.parametrize("name, c_shape, r_range, c_index, sunk", [
    ("sunk", "M, N", "R", "m, n", True),
    ("named", "M, N", "R", "m, n", True),  # contract(r, ...): the directive names the loop around
    ("c_indexed_by_r", "R, M, N", "R", "r, m, n", False),  # each step has its own C
    ("reversed", "M, N", "R - 1, -1, -1", "m, n", False),  # not a plain loop from 0
])
def test_which_loops_move_into_the_sum(name, c_shape, r_range, c_index, sunk, capsys):
    schedule = "\n@schedule(contract(r, mc=12, kc=5, nc=32))" if name == "named" else ""
    text = STEPS.format(name=name, c_shape=c_shape, r_range=r_range, c_index=c_index, schedule=schedule)
    compile_to(text, "schedule", cpu="znver3", remarks=True)
    assert (SUNK in capsys.readouterr().err) == sunk
    lib = load_library(text)
    a, b, _, c0 = operands(3, 9, 7, 19)
    c = np.broadcast_to(c0, (3, 9, 19)).copy() if "R" in c_shape else c0.copy()
    getattr(lib, name)(a, b, c)
    steps = np.einsum("rmk,rkn->rmn", a.astype(np.float64), b.astype(np.float64))
    assert np.allclose(c, c0 + (steps if "R" in c_shape else steps.sum(0)), rtol=1e-5, atol=1e-4)


def test_loop_stays_without_reassociate(capsys):
    text = STEPS.format(name="exact", c_shape="M, N", r_range="R", c_index="m, n", schedule="").replace(
        "@options(reassociate=True)\n", "")
    printed = format_kernel(compile_to(text, "schedule", cpu="znver3", remarks=True).program.kernels[0])
    assert SUNK not in capsys.readouterr().err
    assert printed.index("for r in range(0, R):") < printed.index("for m in range(0, M)")


def test_adding_to_c_needs_reassociate():
    text = HELPERS + f"\ndef exact{SIG}:\n    {FORMS['acc']}\n"
    printed = format_kernel(compile_to(text, "schedule", cpu="znver3").program.kernels[-1])
    assert "acc0_0" not in printed and "sum = sum + A[r, m, k] * B[r, k, n]" in printed


def test_recognized():
    printed = {k.name: format_kernel(k) for k in compile_to(KERNELS, "schedule", cpu="znver3").program.kernels}
    for name in FORMS:
        assert "acc0_0" in printed[name], name  # the micro-kernel's accumulators
    for name in PACKED:
        assert "alloc Ap" in printed[f"{name}_packed"], name


@pytest.mark.parametrize("name", ["acc_relu_packed", "br_packed", "relu_bias"])
def test_interpreter_agrees(name):
    kernel = next(k for k in compile_to(KERNELS, "guard", cpu="znver3").program.kernels if k.name == name)
    a, b, bias, c0 = operands(3, 9, 7, 19)
    c = c0.copy()
    run_kernel(kernel, {"A": a, "B": b, "bias": bias, "C": c})
    want = reference(name.removesuffix("_packed"), a, b, bias, c0.astype(np.float64))
    assert np.allclose(c, want, rtol=1e-5, atol=1e-4)
