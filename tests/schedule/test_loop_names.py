"""Names of the loops transforms make: never two alike, each addressable; a
directive on a loop that unroll copied runs on every copy; tile's tails."""

import numpy as np
import pytest

from dsl.grammar.diagnostics import CompileError
from dsl.lowering import ir
from dsl.lowering.interpret import run_kernel
from dsl.lowering.rewrite import walk_expr, walk_stmts

from tk_library import compile_to, load_library

SCALE = """
@schedule({schedule})
def f(A: i32[M, N], T: i32[M, N]):
    for i in range(M):
        for j in range(N):
            T[i, j] = A[i, j] * 2
"""


def scheduled(text: str) -> ir.Kernel:
    return compile_to(text, "schedule").program.kernels[0]


def loops(kernel: ir.Kernel) -> dict[str, ir.For]:
    found = [s for s in walk_stmts(kernel.body) if isinstance(s, ir.For)]
    names = [s.name for s in found]
    assert len(names) == len(set(names)), f"loop names made twice: {names}"
    return dict(zip(names, found))


def vector_stores(body) -> int:
    return sum(1 for s in walk_stmts(body) if isinstance(s, ir.Store)
               and any(isinstance(n, ir.Ramp) for i in s.indices for n in walk_expr(i)))


def check_scale(text: str, sizes=((0, 0), (1, 9), (3, 8), (7, 17), (10, 5))):
    lib, kernel = load_library(text), scheduled(text)
    for m, n in sizes:
        a = np.arange(m * n, dtype=np.int32).reshape(m, n) - 20
        out, ref = np.zeros((m, n), np.int32), np.zeros((m, n), np.int32)
        lib.f(a, out)
        run_kernel(kernel, {"A": a, "T": ref})
        np.testing.assert_array_equal(out, 2 * a)
        np.testing.assert_array_equal(ref, 2 * a)


# ------------------------------------------------------------------ defect 1


@pytest.mark.parametrize("schedule", [
    "split(i, 3), unroll(i.inner), vectorize(j, 8), parallel(j.tail)",
    "split(i, 3), vectorize(j, 8, tail=mask)",
    "split(i, 3), vectorize(j, 8), parallel(j.tail), vectorize(i.tail.j, 4), parallel(i.tail.j.tail)",
])
def test_copies_in_a_split_tail_never_take_a_tail_name(schedule):
    """The copy of `j` inside `i.tail` is `i.tail.j`; `j.tail` is only ever
    `j`'s own remainder, so both are there to name."""
    names = loops(scheduled(SCALE.format(schedule=schedule)))
    assert "i.tail.j" in names or "i.tail.j.outer" in names
    check_scale(SCALE.format(schedule=schedule))


def test_tail_copy_is_addressable():
    kernel = scheduled(SCALE.format(schedule="split(i, 3), parallel(i.tail.j)"))
    assert loops(kernel)["i.tail.j"].kind == "parallel"


def test_a_nest_unrolled_twice_keeps_its_copies_apart():
    text = """
@schedule(unroll(j), unroll(i))
def g(A: i32[2, 3, N], T: i32[2, 3, N]):
    for i in range(2):
        for j in range(3):
            for k in range(N):
                T[i, j, k] = A[i, j, k] + 1
"""
    names = loops(scheduled(text))
    assert {"k.u0.u0", "k.u1.u0", "k.u0.u1", "k.u2.u1"} <= set(names)


def test_user_names_that_are_ambiguous_are_still_an_error():
    text = """
@schedule(parallel(j))
def g(A: i32[N], T: i32[N], U: i32[N]):
    for j in range(N):
        T[j] = A[j]
    for j in range(N):
        U[j] = A[j]
"""
    with pytest.raises(CompileError, match=r"loop name 'j' is ambiguous \(2 loops have it, at lines 4, 6\)"):
        scheduled(text)


# ------------------------------------------------------------------ defect 2


def test_vectorize_after_unroll_vectorizes_every_copy():
    text = SCALE.format(schedule="split(i, 3), unroll(i.inner), vectorize(j, 8)")
    names = loops(scheduled(text))
    for copy in ("j.u0", "j.u1", "j.u2"):
        assert vector_stores(names[f"{copy}.outer"].body) == 1, copy
        assert f"{copy}.tail" in names
    assert vector_stores(names["i.tail.j"].body) == 0  # the split's tail is its own loop
    check_scale(text)


def test_a_copy_is_named_alone():
    names = loops(scheduled(SCALE.format(schedule="split(i, 3), unroll(i.inner), parallel(j.u1)")))
    assert [n for n, s in names.items() if s.kind == "parallel"] == ["j.u1"]


def test_a_directive_on_several_loops_names_the_copies():
    text = SCALE.format(schedule="split(i, 2), unroll(i.inner), reorder(j, i.outer)")
    with pytest.raises(CompileError, match=r"'j' names 2 copies made by unroll: j.u0, j.u1") as err:
        scheduled(text)
    assert "t.tk:2:49" in str(err.value) and "name one copy, e.g. 'j.u0'" in str(err.value)


# ------------------------------------------------------------------ defect 3


@pytest.mark.parametrize("schedule", ["tile(i, j, 3, 4)", "tile(i, j, 3, 4, tail=peel)",
                                      "tile(i, j, 3, 4, tail=mask)",
                                      "tile(i, j, 2, 8), reorder(i.outer, j.outer, i.inner, j.inner), "
                                      "parallel(i.outer), vectorize(j.inner, 8)"])
def test_tile_with_either_tail(schedule):
    check_scale(SCALE.format(schedule=schedule))


def test_a_peeled_tile_of_loops_nested_the_other_way():
    """tile(i, j) after reorder(j, i) (found by the fuzzer: an internal
    error): the peeled tiles put `i` back outside `j` first, as the masked
    tiles' order has it; same results as the loops as written."""
    text = SCALE.format(schedule="reorder(j, i), tile(i, j, 2, 8)")
    assert list(loops(scheduled(text)))[:4] == ["i.outer", "j.outer", "i.inner", "j.inner"]
    check_scale(text)


def test_tile_peels_by_default():
    names = loops(scheduled(SCALE.format(schedule="tile(i, j, 3, 4)")))
    assert list(names) == ["i.outer", "j.outer", "i.inner", "j.inner", "j.tail", "j.tail.i", "i.tail", "i.tail.j"]
    assert isinstance(names["j.inner"].stop, ir.Const)  # whole tiles: a constant trip count


def test_peeled_tile_of_a_reduction_keeps_its_order():
    """`j` reduces into `out[i]`: the right strip adds its columns after the
    whole tiles' ones, as the masked tiles do; float sums round the same."""
    text = """
@schedule(tile(i, j, 2, 4, tail=peel))
def f(X: f32[M, N], out: f32[M]):
    for i in range(M):
        for j in range(N):
            out[i] += X[i, j]
"""
    lib = load_library(text)
    x = np.random.default_rng(1).standard_normal((7, 11)).astype(np.float32) * 1e4
    got, want = np.zeros(7, np.float32), np.zeros(7, np.float32)
    lib.f(x, got)
    for j in range(11):
        want += x[:, j]
    np.testing.assert_array_equal(got, want)


def test_tile_refuses_what_its_reorder_refuses():
    text = """
@schedule(tile(i, j, 2, 4))
def f(X: f32[M, N], out: f32[1]):
    for i in range(M):
        for j in range(N):
            out[0] += X[i, j]
"""
    with pytest.raises(CompileError, match="float rounding may change"):
        scheduled(text)

