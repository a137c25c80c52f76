"""Calls in the type checker (helpers that return values, kernels called as
statements, argument binding) and imports between .tk files."""

from __future__ import annotations

import numpy as np
import pytest

from dsl.grammar.diagnostics import CompileError, Source
from dsl.lowering.interpret import CheckFailed, run_kernel
from dsl.lowering.printer import format_kernel
from dsl.options import CompileOptions
from dsl.pipeline import compile_file, compile_source

from tk_program import compile_tk, errors, run





def test_helper_with_if_else_return_at_the_end():
    text = """
def clamp(v: f32, lo: f32, hi: f32) -> f32:
    if v < lo:
        return lo
    elif v > hi:
        return hi
    else:
        return v

def k(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = clamp(x[i], -1.0, hi=2.0)
"""
    x, y = np.array([-3, 0.5, 7], np.float32), np.zeros(3, np.float32)
    run(text, x=x, y=y)
    np.testing.assert_array_equal(y, np.clip(x, -1, 2))


def test_kernel_called_as_a_statement_writes_its_output():
    text = """
def fill(t: f32[K], v: f32):
    for k in range(K):
        t[k] = v

def k(x: f32[N], y: f32[N]):
    fill(y, x[0] * 2.0)
"""
    program = compile_tk(text, "typed").typed
    assert [k.name for k in program.kernels] == ["fill", "k"]
    assert program.kernels[1].tensor("y").is_output and not program.kernels[1].tensor("x").is_output
    x, y = np.array([1.5, 0, 0], np.float32), np.zeros(3, np.float32)
    run(text, x=x, y=y)
    np.testing.assert_array_equal(y, [3, 3, 3])


def test_scalar_argument_is_evaluated_once():
    text = """
def bump(c: i32[1]) -> i32:
    c[0] = c[0] + 1
    return c[0]

def twice(v: i32) -> i32:
    return v + v

def k(c: i32[1], out: i32[1]):
    out[0] = twice(bump(c))
"""
    c, out = np.zeros(1, np.int32), np.zeros(1, np.int32)
    run(text, c=c, out=out)
    assert (c[0], out[0]) == (1, 2)


def test_argument_with_a_load_is_read_once():
    text = """
def sq(v: f32) -> f32:
    return v * v

def k(x: f32[N], idx: i32[N], y: f32[N]):
    for i in range(N):
        y[i] = sq(x[idx[i]])
"""
    printed = format_kernel(compile_tk(text, "typed").typed.kernels[-1])
    assert printed.count("idx[i]") == 1 and "v * v" in printed


def test_call_on_the_right_of_and_runs_only_when_needed():
    text = """
def before(t: f32[N], k: i64) -> f32:
    return t[k - 1]

def k(x: f32[N], y: f32[N]):
    for i in range(N):
        if i > 0 and before(x, i) > 0.0:
            y[i] = 1.0
        y[i] = y[i] + (0.0 if i == 0 or before(x, i) < 0.0 else 10.0)
"""
    x, y = np.array([5, -1, 2], np.float32), np.zeros(3, np.float32)
    run(text, x=x, y=y)  # before(x, 0) would read x[-1]: the guard would stop the kernel
    np.testing.assert_array_equal(y, [0, 11, 0])


def test_call_in_a_conditional_expression_runs_only_on_its_branch():
    text = """
def at(t: f32[N], k: i64) -> f32:
    return t[k]

def k(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = at(x, i + 1) if i + 1 < N else at(x, 0)
"""
    x, y = np.array([1, 2, 3], np.float32), np.zeros(3, np.float32)
    run(text, x=x, y=y)
    np.testing.assert_array_equal(y, [2, 3, 1])


def test_unconditional_out_of_bounds_call_still_fails():
    text = """
def at(t: f32[N], k: i64) -> f32:
    return t[k]

def k(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = at(x, i + 1)
"""
    with pytest.raises(CheckFailed, match="index out of bounds on 'x' axis 0"):
        run(text, x=np.zeros(3, np.float32), y=np.zeros(3, np.float32))


def test_tensor_arguments_unify_dims():
    text = """
def add(a: f32[L], b: f32[L], c: f32[L]):
    for i in range(L):
        c[i] = a[i] + b[i]

def k(x: f32[N], y: f32[N], z: f32[N]):
    add(x, y, z)
"""
    x, y, z = np.ones(3, np.float32), np.full(3, 2, np.float32), np.zeros(3, np.float32)
    run(text, x=x, y=y, z=z)
    np.testing.assert_array_equal(z, [3, 3, 3])


def test_tensor_argument_errors():
    message = errors("""
def add(a: f32[L], b: f32[L], c: f32[L]):
    for i in range(L):
        c[i] = a[i] + b[i]

def four(a: f32[4]) -> f32:
    return a[0]

def k(x: f32[N], y: f32[M], z: f32[N], w: f64[N], A: f32[N, N]):
    add(x, y, z)
    add(x, w, z)
    z[0] = four(x) + four(A)
    add(x, 1.0, z)
""")
    assert ("t.tk:10:12: error: 'y' axis 0 has size M, but parameter 'b' needs dim 'L', "
            "which is N here (from 'x' axis 0)") in message
    assert "argument 'b' expects f32 elements, but 'w' holds f64" in message
    assert "argument 'a' needs axis 0 of size 4, but 'x' axis 0 is not known to be 4" in message
    assert "argument 'a' expects rank 1, but 'A' has rank 2" in message
    assert "argument 'b' must be a tensor name" in message


def test_call_errors():
    message = errors("""
def twice(v: f32) -> f32:
    return v * 2.0

def fill(t: f32[K]):
    for k in range(K):
        t[k] = 0.0

def k(x: f32[N]):
    for i in range(N):
        x[i] = twice(x[i], 3.0) + twice() + twice(w=1.0) + fill(x)
        x[i] + 1.0
""")
    assert "'twice' takes 1 argument but 2 were given" in message
    assert "'twice' is missing argument 'v'" in message
    assert "'twice' has no parameter named 'w'" in message
    assert "'fill' returns no value (it is a kernel); call it as a statement" in message
    assert "this expression has no effect; only calls to kernels may stand alone" in message


# ------------------------------------------------------------------ imports


def write(tmp_path, **files) -> None:
    for name, text in files.items():
        (tmp_path / f"{name}.tk").write_text(text)


def test_from_import(tmp_path):
    write(tmp_path, helpers="def scale(v: f32, s: f32) -> f32:\n    return v * s\n",
          main="from helpers import scale\n\ndef k(x: f32[N], y: f32[N]):\n"
               "    for i in range(N):\n        y[i] = scale(x[i], 3.0)\n")
    job = compile_file(tmp_path / "main.tk", stop_after="guard")
    assert [k.name for k in job.program.kernels] == ["k"]  # imported functions are not exported
    x, y = np.array([1, 2], np.float32), np.zeros(2, np.float32)
    run_kernel(job.program.kernels[0], {"x": x, "y": y})
    np.testing.assert_array_equal(y, [3, 6])


def test_nested_import_chain(tmp_path):
    write(tmp_path,
          c="def cf(v: f32) -> f32:\n    return v * 3.0\n",
          b="from c import cf\n\ndef bf(v: f32) -> f32:\n    return cf(v) + 1.0\n",
          a="from b import bf\n\ndef k(x: f32[N], y: f32[N]):\n    for i in range(N):\n        y[i] = bf(x[i])\n")
    job = compile_file(tmp_path / "a.tk", stop_after="guard")
    x, y = np.array([1, 2], np.float32), np.zeros(2, np.float32)
    run_kernel(job.program.kernels[0], {"x": x, "y": y})
    np.testing.assert_array_equal(y, [4, 7])


def test_each_module_calls_its_own_helpers(tmp_path):
    write(tmp_path,
          plus="def h(v: f32) -> f32:\n    return v + 1.0\n\ndef p(v: f32) -> f32:\n    return h(v)\n",
          times="def h(v: f32) -> f32:\n    return v * 100.0\n\ndef t(v: f32) -> f32:\n    return h(v)\n",
          main="from plus import p\nfrom times import t\n\ndef h(v: f32) -> f32:\n    return v - 5.0\n\n"
               "def k(x: f32[N], y: f32[N]):\n    for i in range(N):\n        y[i] = p(x[i]) + t(x[i]) + h(x[i])\n")
    job = compile_file(tmp_path / "main.tk", stop_after="guard")
    x, y = np.array([2], np.float32), np.zeros(1, np.float32)
    run_kernel(job.program.kernels[0], {"x": x, "y": y})
    assert y[0] == (2 + 1) + (2 * 100) + (2 - 5)


def test_names_not_imported_are_not_visible(tmp_path):
    write(tmp_path, lib="def a(v: f32) -> f32:\n    return v\n\ndef b(v: f32) -> f32:\n    return v\n",
          main="from lib import a\n\ndef k(x: f32[N]):\n    for i in range(N):\n        x[i] = b(x[i])\n")
    with pytest.raises(CompileError, match="main.tk:5:16: error: unknown function 'b'"):
        compile_file(tmp_path / "main.tk", stop_after="typed")


def test_import_cycle_is_reported_where_it_closes(tmp_path):
    write(tmp_path,
          one="from two import g\n\ndef f(v: f32) -> f32:\n    return v\n\ndef k(x: f32[N]):\n"
              "    for i in range(N):\n        x[i] = g(x[i])\n",
          two="from one import f\n\ndef g(v: f32) -> f32:\n    return f(v)\n")
    with pytest.raises(CompileError) as info:
        compile_file(tmp_path / "one.tk", stop_after="typed")
    text = info.value.render()
    assert "two.tk:1:1: error: import cycle: one.tk -> two.tk -> one.tk" in text
    assert str(tmp_path) not in text.split("error:")[1]  # the chain names files, not absolute paths


def test_missing_module_and_missing_name(tmp_path):
    write(tmp_path, helpers="def scale(v: f32) -> f32:\n    return v\n",
          main="from helpers import scael\nfrom nowhere import f\n\ndef k(x: f32[N]):\n    pass\n")
    with pytest.raises(CompileError) as info:
        compile_file(tmp_path / "main.tk", stop_after="typed")
    text = info.value.render()
    assert "main.tk:1:21: error: module 'helpers' has no function 'scael'" in text
    assert "did you mean 'scale'?" in text
    assert "main.tk:2:1: error: cannot find module 'nowhere'" in text


def test_include_path_is_searched(tmp_path):
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "util.tk").write_text("def one() -> f32:\n    return 1.0\n")
    write(tmp_path, main="from util import one\n\ndef k(x: f32[N]):\n    for i in range(N):\n        x[i] = one()\n")
    options = CompileOptions(include_paths=(tmp_path / "elsewhere", lib))
    assert compile_file(tmp_path / "main.tk", options, stop_after="typed").typed.kernels[0].name == "k"


def test_every_include_path_is_searched_from_imported_modules(tmp_path):
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    (first / "base.tk").write_text("def two() -> f32:\n    return 2.0\n")
    (second / "mid.tk").write_text("from base import two\n\ndef four() -> f32:\n    return two() * 2.0\n")
    text = "from mid import four\n\ndef k(x: f32[N]):\n    for i in range(N):\n        x[i] = four()\n"
    options = CompileOptions(include_paths=(first, second))
    job = compile_source(Source("main.tk", text), options, stop_after="guard")  # no base directory
    x = np.zeros(2, np.float32)
    run_kernel(job.program.kernels[0], {"x": x})
    np.testing.assert_array_equal(x, [4, 4])
