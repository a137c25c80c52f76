"""Local arrays (`t: f32[4]` in a kernel body): parsing, the checker's rules,
the schedule transforms' view of them, and the numbers they give, natively and
in the reference interpreter, against numpy."""

from __future__ import annotations

import numpy as np
import pytest
from tk_program import compile_tk, errors, run, typed

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import CompileError, Source
from dsl.grammar.parser import parse
from dsl.grammar.printer import format_ast
from dsl.options import CompileOptions
from dsl.pipeline import compile_source


def native(tmp_path, text: str):
    job = compile_source(Source("t.tk", text), CompileOptions(), stop_after="obj")
    return dsl.load(str(link_shared(job.obj, tmp_path / "t.so", job.target)))


# Per row: t[j] holds the sum of the row's values j, j + 4, ...; then each value
# gets its class's sum. `t` is declared in the row loop, so it starts at zero
# for every row; the schedule splits the rows over threads.
ROW_CLASSES = """
@schedule(parallel(m))
def row_classes(x: f32[M, N], y: f32[M, N]):
    for m in range(M):
        t: f32[4]
        for i in range(N):
            t[i % 4] += x[m, i]
        for i in range(N):
            y[m, i] = t[i % 4]
"""


def row_classes_reference(x: np.ndarray) -> np.ndarray:
    y = np.empty_like(x)
    for c in range(4):
        y[:, c::4] = x[:, c::4].sum(axis=1, keepdims=True, dtype=np.float64)
    return y


def test_a_declaration_parses_to_a_local_node():
    module = parse(Source("t.tk", "def f(x: f32[N]):\n    t: i16[2, 8]\n    t[0, 0] = 1\n"))
    assert "  Local t: i16[2, 8] @2:5\n" in format_ast(module)


def test_the_kernel_ir_declares_the_array_where_the_source_does():
    text = typed(ROW_CLASSES)
    assert "    local t: f32[4]\n    for i in range(0, N):" in text
    assert "t[i % 4] = t[i % 4] + x[m, i]" in text


@pytest.mark.parametrize("threads", [1, 2])
def test_row_classes_match_numpy_natively(tmp_path, threads):
    lib = native(tmp_path, ROW_CLASSES)
    lib.set_num_threads(threads)
    x = np.random.default_rng(0).standard_normal((37, 23), dtype=np.float32)
    y = np.empty_like(x)
    lib.row_classes(x, y)
    np.testing.assert_allclose(y, row_classes_reference(x), rtol=1e-5, atol=1e-5)


def test_row_classes_match_numpy_in_the_interpreter():
    x = np.random.default_rng(1).standard_normal((5, 11), dtype=np.float32)
    y = np.empty_like(x)
    run(ROW_CLASSES, x=x, y=y)
    np.testing.assert_allclose(y, row_classes_reference(x), rtol=1e-5, atol=1e-5)


# A lane-indexed table written by one vector loop and read back, one element at
# a time, by another: the q4_K scales' pattern (LLVM keeps `sc` in a register).
BROADCAST_TABLE = """
@schedule(vectorize(j), vectorize(l))
def table(a: i16[R, 8], b: i32[R, 8]):
    LANES = 8
    for r in range(R):
        sc: i16[LANES]
        for j in range(8):
            sc[j] = a[r, j] * i16(j + 1)
        for l in range(8):
            b[r, l] = i32(sc[(l + 3) % 8]) * i32(sc[2]) + i32(l)
"""


def test_a_vectorized_table_read_back_by_element(tmp_path):
    lib = native(tmp_path, BROADCAST_TABLE)
    a = np.random.default_rng(2).integers(-50, 50, size=(9, 8)).astype(np.int16)
    b = np.empty((9, 8), np.int32)
    lib.table(a, b)
    sc = a.astype(np.int32) * np.arange(1, 9)
    want = sc[:, (np.arange(8) + 3) % 8] * sc[:, 2:3] + np.arange(8)
    np.testing.assert_array_equal(b, want)
    b[:] = 0
    run(BROADCAST_TABLE, a=a, b=b)  # the vectorized loop IR, in the interpreter
    np.testing.assert_array_equal(b, want)


def test_a_declaration_in_a_loop_starts_at_zero_every_iteration(tmp_path):
    text = """
def counts(x: i32[N], y: i32[N]):
    for i in range(N):
        seen: i32[2, 3]
        seen[1, 2] += x[i]
        y[i] = seen[1, 2] + seen[0, 0]
"""
    lib = native(tmp_path, text)
    x = np.arange(1, 8, dtype=np.int32)
    y = np.empty_like(x)
    lib.counts(x, y)
    np.testing.assert_array_equal(y, x)
    y2 = np.empty_like(x)
    run(text, x=x, y=y2)
    np.testing.assert_array_equal(y2, x)


def test_an_index_past_the_end_stops_the_kernel(tmp_path):
    text = """
def spill(x: f32[N], y: f32[N]):
    t: f32[4]
    for i in range(N):
        t[i] = x[i]
    y[0] = t[0]
"""
    lib = native(tmp_path, text)
    ok = np.ones(4, np.float32)
    lib.spill(ok, np.empty(4, np.float32))
    with pytest.raises(IndexError, match="'t' axis 0 at line 5"):
        lib.spill(np.ones(5, np.float32), np.empty(5, np.float32))


def test_a_named_constant_may_give_a_dim():
    assert "local t: f64[3, 16]" in typed("""
def k(x: f64[N]):
    W = 16
    t: f64[3, W]
    x[0] = t[2, W - 1]
""")


# ------------------------------------------------------------ schedules


def test_a_loop_may_not_run_in_parallel_while_writing_an_array_declared_outside():
    text = """
@schedule(parallel(m))
def k(x: f32[M, N], y: f32[M, N]):
    t: f32[4]
    for m in range(M):
        t[0] = x[m, 0]
        y[m, 0] = t[0]
"""
    with pytest.raises(CompileError, match="iterations may touch the same elements of 't'"):
        compile_tk(text, "schedule")


def test_reorder_sees_an_array_declared_inside_as_private():
    text = """
@schedule(reorder(k, m))
def k2(x: f32[M, N], y: f32[M, N]):
    for m in range(M):
        for k in range(N):
            t: f32[3]
            for j in range(3):
                t[j] = x[m, k] * f32(j + 1)
            y[m, k] = t[0] + t[1] + t[2]
"""
    compile_tk(text, "schedule")  # accepted: each (m, k) has its own t
    x = np.random.default_rng(3).standard_normal((6, 5), dtype=np.float32)
    y = np.empty_like(x)
    run(text, x=x, y=y)
    np.testing.assert_allclose(y, 6 * x, rtol=1e-6)


def test_vectorizing_a_loop_that_declares_an_array_is_refused_with_a_reason():
    text = """
@schedule(vectorize(i))
def k(x: f32[8], y: f32[8]):
    for i in range(8):
        t: f32[2]
        t[1] = x[i]
        y[i] = t[1]
"""
    with pytest.raises(CompileError, match="declares the local array 't', which each lane would need"):
        compile_tk(text, "schedule")


# ------------------------------------------------------------ diagnostics


@pytest.mark.parametrize("decl, message", [
    ("t: f32[N]", "the shape of a local array must be constant, and 'N' is not"),
    ("t: f32[0, 4]", "a local array's dims must be positive, not 0"),
    ("t: f64[8193]", "local array 't' takes 65544 bytes, more than the 65536"),
    ("t: bool[4]", "local arrays of bool are not supported; use u8"),
    ("t: f33[4]", "unknown element type 'f33' for a local array"),
    ("t: q4_k[256]", "unknown element type 'q4_k' for a local array"),
    ("x: f32[4]", "cannot declare local array 'x': the name is already a tensor"),
    ("N: f32[4]", "cannot declare local array 'N': the name is already a scalar"),
    ("t: f32", "'t: f32' declares a scalar"),
])
def test_bad_declarations_are_located_errors(decl, message):
    out = errors(f"def k(x: f32[N]):\n    {decl}\n    x[0] = 1.0\n")
    assert message in out and "t.tk:2:" in out


def test_an_array_ends_with_its_block():
    out = errors("""
def k(x: f32[N]):
    for i in range(N):
        t: f32[2]
        t[0] = x[i]
    x[0] = t[0]
""")
    assert "t.tk:6:12: error: name 't' is not defined" in out
    out = errors("""
def k(x: f32[N]):
    if N > 2:
        t: f32[2]
    else:
        pass
    x[0] = t[0]
""")
    assert "t.tk:7:12: error: name 't' is not defined" in out


def test_an_array_cannot_be_assigned_whole_or_declared_twice():
    out = errors("def k(x: f32[N]):\n    t: f32[2]\n    t = 1.0\n")
    assert "cannot assign to 't': it is a tensor" in out
    out = errors("def k(x: f32[N]):\n    t: f32[2]\n    t: f32[3]\n    x[0] = t[0]\n")
    assert "t.tk:3:5: error: cannot declare local array 't': the name is already a tensor" in out
