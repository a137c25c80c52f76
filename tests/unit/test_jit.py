"""`@dsl.kernel` end to end: spellings of the annotations, helpers, interpret
mode, bounds errors, the IR views, messages. Caches and threads: test_jit_cache.py."""

import importlib
import inspect
import re
import sys
import textwrap
from contextlib import redirect_stderr
from io import StringIO
from pathlib import Path

import numpy as np
import pytest

import dsl
import dsl.jit
import dsl.pipeline
from dsl import N, f32
from dsl.backends.target import host_target
from dsl.interpreted import InterpretedCaller


@dsl.kernel
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    """out = alpha * x + y"""
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


@dsl.kernel
def saxpy_qualified(alpha: dsl.f32, x: dsl.f32[dsl.N], y: dsl.f32[dsl.N], out: dsl.f32[dsl.N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


Batch, Seq = dsl.dims("Batch Seq")


@dsl.kernel
def add_bias(x: f32[Batch, Seq], bias: f32[Seq], out: f32[Batch, Seq]):
    for b in range(Batch):
        for s in range(Seq):
            out[b, s] = x[b, s] + bias[s]


@dsl.kernel
def square(v: f32) -> f32:
    return v * v


@dsl.kernel
def fill(out: f32[N], value: f32):
    for i in range(N):
        out[i] = value


@dsl.kernel
def squares_plus_one(x: f32[N], out: f32[N]):
    fill(out, 1.0)
    for i in range(N):
        out[i] += square(x[i])


def shift(x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = x[i + 1]


def scatter(idx: dsl.i32[N], x: f32[N], out: f32[dsl.M]):
    for i in range(N):
        out[idx[i]] = x[i]


def vectors(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


def line_of(kernel_fn, text: str) -> int:
    """The line number in this file of the first source line of `kernel_fn` containing `text`."""
    lines, first = inspect.getsourcelines(kernel_fn)
    return first + next(k for k, line in enumerate(lines) if text in line)


# ------------------------------------------------------------------ spellings


@pytest.mark.parametrize("k", [saxpy, saxpy_qualified], ids=["from-dsl-import", "qualified"])
def test_saxpy(k):
    x, y = vectors(1000)
    out = np.empty_like(x)
    k(np.float32(2.5), x, y, out)
    np.testing.assert_allclose(out, np.float32(2.5) * x + y, rtol=2 ** -22, atol=1e-6)


def test_kernel_looks_like_its_function():
    assert saxpy.__name__ == "saxpy"
    assert saxpy.__doc__ == "out = alpha * x + y"
    assert saxpy.__module__ == __name__
    assert "saxpy" in repr(saxpy) and "test_jit.py" in repr(saxpy)


def test_face_names_survive_submodule_imports():
    import dsl.library  # noqa: F401  (the decorator imports it too)

    assert callable(dsl.load) and dsl.load.__name__ == "load"
    assert dsl.Library.__name__ == "Library" and issubclass(dsl.KernelError, Exception)
    assert isinstance(dsl.Batch, dsl.Dim)  # any other capitalised name is a dim


def test_dims_made_with_dsl_dims():
    assert (Batch.name, Seq.name) == ("Batch", "Seq")
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    bias = np.array([1, 2, 3, 4], np.float32)
    out = np.empty_like(x)
    add_bias(x, bias, out)
    np.testing.assert_array_equal(out, x + bias)


def test_helper_and_kernel_called_as_statement():
    x = np.array([0, 1, -2, 3.5], np.float32)
    out = np.full_like(x, np.nan)
    squares_plus_one(x, out)
    np.testing.assert_array_equal(out, x * x + 1)


def test_helper_cannot_be_called_from_python():
    with pytest.raises(TypeError, match=r"square\(\) returns a value"):
        square(3.0)


FUTURE_MODULE = '''\
from __future__ import annotations

import dsl
from dsl import f32, N
from {helpers} import double


@dsl.kernel
def twice_plus(x: f32[N], c: f32, out: f32[N]):
    for i in range(N):
        out[i] = double(x[i]) + c
'''

HELPERS_MODULE = '''\
from __future__ import annotations

import dsl
from dsl import f32


@dsl.kernel
def double(v: f32) -> f32:
    return v + v
'''


@pytest.fixture
def import_source(tmp_path, monkeypatch):
    """Write modules into tmp_path and import them (removed from sys.modules after)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    names = []

    def write(name: str, text: str):
        (tmp_path / f"{name}.py").write_text(text)
        names.append(name)

    def load(name: str):
        importlib.invalidate_caches()
        return importlib.import_module(name)

    yield write, load
    for name in names:
        sys.modules.pop(name, None)


def test_future_annotations_and_helper_from_another_module(import_source, tmp_path):
    write, load = import_source
    write("jit_helpers_future", HELPERS_MODULE)
    write("jit_kernels_future", FUTURE_MODULE.format(helpers="jit_helpers_future"))
    module = load("jit_kernels_future")
    assert module.twice_plus.__annotations__["x"] == "f32[N]"  # never evaluated
    x = np.array([1, 2, 3], np.float32)
    out = np.empty_like(x)
    module.twice_plus(x, np.float32(0.5), out)
    np.testing.assert_array_equal(out, 2 * x + 0.5)
    assert module.twice_plus.source.name == str(tmp_path / "jit_kernels_future.py")


# ------------------------------------------------------------------ interpret mode


def test_interpret_true_matches_compiled():
    interpreted = dsl.kernel(saxpy.fn, interpret=True)  # the same function decorated twice
    compiled = dsl.kernel(saxpy.fn, interpret=False)
    x, y = vectors(37, seed=3)
    want, got = np.empty_like(x), np.empty_like(x)
    compiled(np.float32(-1.5), x, y, want)
    interpreted(np.float32(-1.5), x, y, got)
    assert isinstance(interpreted._caller, InterpretedCaller)
    assert not isinstance(compiled._caller, InterpretedCaller)
    # One rounding (FMA) or two: the results differ by at most one rounding each.
    np.testing.assert_allclose(got, want, rtol=2 ** -22, atol=2 ** -22 * np.abs(y).max())


def test_dsl_interpret_env_var(monkeypatch):
    k = dsl.kernel(add_bias.fn)
    monkeypatch.setenv("DSL_INTERPRET", "1")  # read at the first call, not at decoration
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    bias = np.array([10, 20, 30], np.float32)
    got = np.empty_like(x)
    k(x, bias, got)
    assert isinstance(k._caller, InterpretedCaller)
    want = np.empty_like(x)
    add_bias(x, bias, want)
    np.testing.assert_array_equal(got, want)
    explicit = dsl.kernel(add_bias.fn, interpret=False)  # an explicit choice beats the variable
    explicit(x, bias, got)
    assert not isinstance(explicit._caller, InterpretedCaller)


def test_interpret_out_of_bounds_names_kernel_tensor_index_line():
    k = dsl.kernel(shift, interpret=True)
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(IndexError) as info:
        k(x, np.empty_like(x))
    text = str(info.value)
    assert "shift" in text and "'x'" in text and re.search(r"index \(?5\b", text)
    assert f"{__file__}:{line_of(shift, 'x[i + 1]')}:" in text


# ------------------------------------------------------------------ native bounds


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
def test_out_of_bounds_write_stays_inside_the_buffer(interpret):
    k = dsl.kernel(scatter, interpret=interpret)
    big = np.full(40, -1.0, np.float32)
    out = big[10:30:2]  # 10 elements, every other one of big[10:30]
    for idx in ([0, 3, 10], [2, -1], [9, 11]):
        with pytest.raises(IndexError, match=r"scatter.*'out'"):
            k(np.array(idx, np.int32), np.ones(len(idx), np.float32), out)
    touched = np.zeros(40, bool)
    touched[10:30:2] = True
    assert (big[~touched] == -1.0).all()
    assert set(np.flatnonzero(big != -1.0)) <= {10, 16, 14, 28}  # only in-range stores, if any


def test_compiled_out_of_bounds_read():
    k = dsl.kernel(shift)
    big = np.full(16, 7.0, np.float32)
    x = np.arange(5, dtype=np.float32)
    with pytest.raises(IndexError) as info:
        k(x, big[4:9])
    assert "shift" in str(info.value) and "'x'" in str(info.value)
    assert f"{__file__}:{line_of(shift, 'x[i + 1]')}:" in str(info.value)
    assert (big[:4] == 7.0).all() and (big[9:] == 7.0).all()


# ------------------------------------------------------------------ seeing the IR


def test_ir_stages_are_text():
    loops = saxpy.ir("loops")
    assert loops.startswith("kernel saxpy(") and "for i in range(0, N):" in loops
    llvm = saxpy.ir("llvm")
    assert re.search(r"define .*saxpy", llvm)
    asm = saxpy.ir("asm")
    assert isinstance(asm, str) and "saxpy" in asm


@pytest.mark.skipif("+fma" not in host_target().features.split(","), reason="host has no FMA")
def test_saxpy_asm_uses_fma():
    assert re.search(r"\bvfmadd\d{3}[ps]s\b", saxpy.ir("asm"))


def test_dsl_print_after_prints_loop_ir(monkeypatch, capsys):
    x, y = vectors(3)
    saxpy(np.float32(1), x, y, np.empty_like(x))  # warm caches: printing must compile anyway
    monkeypatch.setenv("DSL_PRINT_AFTER", "loops")
    dsl.kernel(saxpy.fn)(np.float32(1), x, y, np.empty_like(x))
    err = capsys.readouterr().err
    assert "// ----- after loops -----" in err and "kernel saxpy(" in err
    assert "after llvm" not in err


def test_dsl_dump_dir_writes_stages_and_schedule_passes(monkeypatch, tmp_path):
    @dsl.kernel(schedule="split(i, 8), unroll(i.inner), parallel(i.outer)")
    def double(x: f32[N], y: f32[N]):
        for i in range(N):
            y[i] = x[i] * 2.0

    monkeypatch.setenv("DSL_DUMP_DIR", str(tmp_path / "dump"))
    x = np.arange(20, dtype=np.float32)
    y = np.zeros_like(x)
    double(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    files = sorted(p.name for p in (tmp_path / "dump").iterdir())
    assert files[2:6] == ["02-loops.txt", "03-schedule-01-double-split.txt", "03-schedule-02-double-unroll.txt",
                          "03-schedule-03-double-parallel.txt"]
    assert files[6] == "03-schedule.txt" and files[-1] == "07-obj.o"


def test_compile_source_print_after_follows_sys_stderr():
    """Printing goes to the `sys.stderr` of the moment, not of import time."""
    from dsl.grammar.diagnostics import Source

    src = Source("k.tk", "def k(x: f32[N], out: f32[N]):\n    for i in range(N):\n        out[i] = x[i]\n")
    buffer = StringIO()
    with redirect_stderr(buffer):
        dsl.pipeline.compile_source(src, dsl.CompileOptions(print_after=frozenset({"loops"})), "loops")
    assert "after loops" in buffer.getvalue()


# ------------------------------------------------------------------ messages


def test_compile_error_points_at_the_python_file_and_line():
    @dsl.kernel
    def broken(x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = x[i] * undefined_name  # noqa: F821

    with pytest.raises(dsl.CompileError) as info:
        broken(np.ones(2, np.float32), np.ones(2, np.float32))
    text = str(info.value)
    assert text.startswith(f"{__file__}:{line_of(broken.fn, 'undefined_name')}:")
    assert "undefined_name" in text and "error:" in text
    assert set(re.findall(r"\S+\.py\b", text)) == {__file__}  # no compiler file in the message


def test_compile_error_column_of_a_nested_kernel():
    @dsl.kernel
    def broken(x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = x[i] * undefined_name  # noqa: F821

    line = line_of(broken.fn, "undefined_name")
    col = Path(__file__).read_text().splitlines()[line - 1].index("undefined_name") + 1
    with pytest.raises(dsl.CompileError, match=f"{re.escape(__file__)}:{line}:{col}:"):
        broken(np.ones(2, np.float32), np.ones(2, np.float32))


def test_kernel_of_a_function_without_source():
    namespace = {}
    exec(textwrap.dedent("""
        def k(x, out):
            pass
    """), namespace)
    with pytest.raises(TypeError, match="needs the source of 'k'"):
        dsl.kernel(namespace["k"])
