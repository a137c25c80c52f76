"""The copy of a contraction's body for any strides packs every product
(`ir.UnitStrides`): what the fold leaves of each copy, that the general copy
has no tile that reads A or B in place, and that both copies (and the
interpreter, which reads the arrays' strides) give numpy's answers on views
whose innermost stride is not 1, small products included."""

from __future__ import annotations

import re

import numpy as np
import pytest
from tk_library import compile_to, load_library

from dsl.backends.llvm.module import build_module
from dsl.lowering import ir
from dsl.lowering.interpret import run_kernel
from dsl.lowering.printer import format_kernel
from dsl.lowering.rewrite import walk_expr, walk_stmts
from dsl.lowering.types import BOOL, I64
from dsl.lowering.unit_strides import fold_unit_strides

KERNELS = """
def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])

@options(reassociate=True)
def br_relu(A: f32[R, M, K], B: f32[R, K, N], C: f32[M, N]):
    C[m, n] = max(sum(A[r, m, k] * B[r, k, n]), 0.0)
"""


@pytest.fixture(scope="module")
def lib():
    return load_library(KERNELS)


def test_fold_keeps_the_live_branch_and_leaves_the_rest_alone():
    n = ir.Sym("n", I64, "local")
    small = ir.Binary("<", ir.Var(n), ir.Const(8, I64), BOOL)
    gated = ir.Binary("and", ir.UnitStrides(), small, BOOL)
    direct, packed = (ir.Assign(n, ir.Const(1, I64)),), (ir.Assign(n, ir.Const(2, I64)),)
    untouched = ir.If(ir.Const(True, BOOL), (ir.Assign(n, ir.Const(3, I64)),), (ir.Assign(n, ir.Const(4, I64)),))
    tensor = ir.TensorParam("B", BOOL, (), False)
    body = (ir.Realign(tensor, gated, 0), ir.If(gated, direct, packed), untouched)

    unit = fold_unit_strides(body, True)
    assert unit[0].when == small and unit[1].cond == small
    assert unit[1].then is direct and unit[1].orelse is packed
    assert unit[2] is untouched  # a constant condition of its own is not the fold's

    general = fold_unit_strides(body, False)
    assert len(general) == 2  # the realign goes: the unpacked path never runs
    assert general[0].then is packed and general[0].orelse == ()
    assert general[1] is untouched
    assert fold_unit_strides(untouched.then, False) is untouched.then  # nothing to fold: the same tuple


def test_the_schedule_gates_the_unpacked_path_and_the_realign():
    """Also the packed path's narrower tiles and its unmasked form of whole tiles."""
    kernel = next(k for k in compile_to(KERNELS, "schedule", cpu="znver3").program.kernels if k.name == "mm")
    gated = [type(s).__name__ for s in walk_stmts(kernel.body) if isinstance(s, (ir.If, ir.Realign))
             and any(isinstance(x, ir.UnitStrides) for x in walk_expr(s.cond if isinstance(s, ir.If) else s.when))]
    assert gated.count("Realign") == 1 and "If" in gated
    text = format_kernel(kernel)  # the choice of the unpacked path: the first If of the nest
    assert text.index("realign B if unit_strides() and (") < text.index("  if unit_strides() and (")


@pytest.mark.parametrize("cpu, packed_tile", [("znver3", 6 * 2), ("skylake-avx512", 6 * 4)])
def test_the_general_copy_has_only_the_packed_tiles(cpu, packed_tile):
    """Counted in the IR before LLVM sees it: the general copy's FMAs are
    one k step of the packed tile (6 rows of 2 or 4 vectors), without its
    narrower and half variants or any tile that reads in place, which the
    unit copy has; before the fold it had them all."""
    job = compile_to(KERNELS, "guard", cpu=cpu, kernels=frozenset({"mm"}))
    from dsl.pipeline import _target
    text = str(build_module(list(job.program.kernels), _target(job), "{}", module_name="m"))
    fmas = {"unit": 0, "any": 0}
    for name, body in re.findall(r'define [^@]*@"?(mm__(?:unit|any)[\w.]*)"?\((.*?)\n}', text, re.S):
        fmas[name.split("__")[1]] += body.count("llvm.fma.")
    assert fmas["any"] == packed_tile and fmas["unit"] > 4 * packed_tile


def strided(values: np.ndarray, step: int = 2) -> np.ndarray:
    """`values` as a view whose innermost stride is `step` elements."""
    base = np.zeros((*values.shape[:-1], values.shape[-1] * step), values.dtype)
    view = base[..., ::step]
    view[...] = values
    return view


SIZES = [(1, 1, 1), (3, 5, 7), (17, 33, 9), (64, 64, 64), (130, 70, 200)]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("which", ["A", "B", "C"])
def test_views_that_take_the_general_copy(lib, size, which, threads):
    m, k, n = size
    rng = np.random.default_rng(m * 131 + k * 7 + n)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = np.full((m, n), np.nan, np.float32)
    args = {"A": a, "B": b, "C": c}
    args[which] = strided(args[which])
    lib.set_num_threads(threads)
    lib.mm(args["A"], args["B"], args["C"])
    lib.set_num_threads(0)
    np.testing.assert_allclose(args["C"], a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5 * max(1, k) ** 0.5)


@pytest.mark.parametrize("size", [(1, 2, 3, 4), (3, 9, 7, 19), (2, 40, 33, 70)])
def test_a_batch_reduce_with_an_epilogue_on_strided_views(lib, size):
    r, m, k, n = size
    rng = np.random.default_rng(r + m + k + n)
    a = strided(rng.standard_normal((r, m, k)).astype(np.float32), 3)
    b = rng.standard_normal((r, k, n)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    lib.br_relu(a, b, c)
    want = np.maximum(np.einsum("rmk,rkn->mn", a.astype(np.float64), b), 0)
    np.testing.assert_allclose(c, want, rtol=1e-5, atol=1e-5 * max(1, r * k) ** 0.5)


@pytest.mark.parametrize("step", [1, 2])
def test_the_interpreter_takes_the_path_the_strides_choose(step):
    """The scheduled kernel run by the interpreter: unit strides read in
    place, a strided A is packed; both give numpy's answer."""
    kernel = next(k for k in compile_to(KERNELS, "guard", cpu="znver3").program.kernels if k.name == "mm")
    rng = np.random.default_rng(step)
    a = rng.standard_normal((9, 7)).astype(np.float32)
    b = rng.standard_normal((7, 19)).astype(np.float32)
    c = np.zeros((9, 19), np.float32)
    run_kernel(kernel, {"A": strided(a, step), "B": b, "C": c})
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def test_arith_fold_decides_and_or_not_of_a_constant():
    """The shared folder the fold uses: a constant decides `and`/`or` or
    leaves the other operand; `not` of a constant is a constant; i64
    arithmetic folds as before."""
    from dsl.lowering.arith import fold

    x = ir.Var(ir.Sym("x", BOOL, "local"))
    true, false = ir.Const(True, BOOL), ir.Const(False, BOOL)
    assert fold(ir.Binary("and", true, x, BOOL)) is x and fold(ir.Binary("and", x, false, BOOL)) is false
    assert fold(ir.Binary("or", false, x, BOOL)) is x and fold(ir.Binary("or", x, true, BOOL)) is true
    assert fold(ir.Unary("not", true, BOOL)) == ir.Const(False, BOOL)
    assert fold(ir.Binary("and", x, x, BOOL)) == ir.Binary("and", x, x, BOOL)
    assert fold(ir.Binary("+", ir.Const(2, I64), ir.Const(3, I64), I64)) == ir.Const(5, I64)
