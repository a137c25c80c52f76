"""The DSL_* environment variables: a value that means nothing is warned about
(once, naming the variable, its value and what it takes) and the run goes on;
`dsl.num_threads()` and the kernels' own team agree on who wins."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import dsl
import dsl.library
import dsl.options
from dsl.options import CompileOptions, from_env


@pytest.fixture(autouse=True)
def fresh_warnings(monkeypatch):
    """Each test sees the first warning of a process."""
    monkeypatch.setattr(dsl.options, "_warned", set())


def quietly(action):
    """`action()`, failing on any warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        return action()


def test_unknown_print_after_name_warns_once_and_keeps_the_others():
    with pytest.warns(UserWarning, match=r"DSL_PRINT_AFTER='bogus,loops' has unknown names, ignored: bogus; "
                                         r"it takes .*loops.*split.*"):
        opts = from_env(CompileOptions(), {"DSL_PRINT_AFTER": "bogus,loops"})
    assert opts.print_after == {"loops"}
    quietly(lambda: from_env(CompileOptions(), {"DSL_PRINT_AFTER": "bogus,loops"}))  # once
    for good in ("all", "loops,split", "guard, llvm, auto"):
        quietly(lambda: from_env(CompileOptions(), {"DSL_PRINT_AFTER": good}))


def test_print_after_obj_says_it_is_binary():
    with pytest.warns(UserWarning, match="obj is binary: DSL_DUMP_DIR keeps it"):
        assert from_env(CompileOptions(), {"DSL_PRINT_AFTER": "obj"}).print_after == frozenset()


def test_jit_kernel_with_bogus_print_after_warns_and_runs(monkeypatch, capsys):
    @dsl.kernel
    def double(x: dsl.f32[dsl.N], y: dsl.f32[dsl.N]):
        for i in range(dsl.N):
            y[i] = x[i] * 2.0

    monkeypatch.setenv("DSL_PRINT_AFTER", "bogus")
    x = np.arange(5, dtype=np.float32)
    y = np.zeros_like(x)
    with pytest.warns(UserWarning, match="DSL_PRINT_AFTER='bogus'"):
        double(x, y)
    np.testing.assert_array_equal(y, 2 * x)
    assert "after" not in capsys.readouterr().err


@pytest.mark.parametrize("var", ["DSL_DEBUG", "DSL_INTERPRET", "DSL_REMARKS", "DSL_NO_CACHE"])
def test_a_switch_with_an_unknown_value_warns_and_counts_as_on(var):
    with pytest.warns(UserWarning, match=rf"{var}='maybe' is not a switch value \(1/true/yes/on or "
                                         r"0/false/no/off\); read as on"):
        opts = from_env(CompileOptions(), {var: "maybe"})
    assert opts != CompileOptions()
    for value in ("1", "on", "0", "off", "", "False"):
        quietly(lambda: from_env(CompileOptions(), {var: value}))


def test_a_folder_variable_naming_a_file_is_ignored_with_a_warning(tmp_path):
    file = tmp_path / "f"
    file.write_text("")
    for var, field in (("DSL_DUMP_DIR", "dump_dir"), ("DSL_CACHE_DIR", "cache_dir")):
        with pytest.warns(UserWarning, match=f"{var}=.* is a file, not a directory; ignored"):
            assert getattr(from_env(CompileOptions(), {var: str(file)}), field) is None
        assert quietly(lambda: from_env(CompileOptions(), {var: str(tmp_path / "new")})) is not None


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_codegen_jobs_must_be_a_count(value):
    with pytest.warns(UserWarning, match=rf"DSL_CODEGEN_JOBS='{value}' is not a count of processes"):
        assert from_env(CompileOptions(), {"DSL_CODEGEN_JOBS": value}).codegen_jobs == 0
    assert quietly(lambda: from_env(CompileOptions(), {"DSL_CODEGEN_JOBS": " 3 "})).codegen_jobs == 3


@pytest.mark.parametrize("value, effect", [
    ("abc", "ignored, so OMP_NUM_THREADS decides"),
    ("0", "ignored, so OMP_NUM_THREADS decides"),
    ("-1", "ignored, so OMP_NUM_THREADS decides"),
    ("4x", "read as 4"),
])
def test_bad_thread_count_warns(value, effect):
    env = {"DSL_NUM_THREADS": value, "OMP_NUM_THREADS": "2"}
    with pytest.warns(UserWarning, match=rf"DSL_NUM_THREADS='{value}' is not a thread count "
                                         rf"\(a whole number >= 1\); {effect}"):
        dsl.library.check_environment(env)
    quietly(lambda: dsl.library.check_environment(env))  # once
    quietly(lambda: dsl.library.check_environment({"DSL_NUM_THREADS": " 3"}))


def test_bad_stream_bytes_warns():
    with pytest.warns(UserWarning, match=r"DSL_STREAM_BYTES='1M' is not a byte count .*; read as 1 bytes"):
        dsl.library.check_environment({"DSL_STREAM_BYTES": "1M"})
    with pytest.warns(UserWarning, match=r"DSL_STREAM_BYTES='big' .*; ignored, so the default decides"):
        dsl.library.check_environment({"DSL_STREAM_BYTES": "big"})
    quietly(lambda: dsl.library.check_environment({"DSL_STREAM_BYTES": "16777216"}))


# ----------------------------------------------------------- in a child process

CHILD = '''
import os
import numpy as np
import dsl
from dsl import f32, N


@dsl.kernel(schedule="parallel(i)")
def double(x: f32[N], y: f32[N]):
    for i in range(N):
        y[i] = x[i] * 2.0


x = np.arange(100_000, dtype=np.float32)
y = np.zeros_like(x)
double.compile()
before = len(os.listdir("/proc/self/task"))
double(x, y)
# libgomp keeps its workers: a team of T leaves T - 1 more threads.
team = len(os.listdir("/proc/self/task")) - before + 1
assert (y == 2 * x).all()
print(dsl.num_threads(), team)
'''


def run_child(tmp_path, **env) -> subprocess.CompletedProcess:
    script = tmp_path / "child.py"
    script.write_text(textwrap.dedent(CHILD))
    environ = {k: v for k, v in os.environ.items() if k not in ("DSL_NUM_THREADS", "OMP_NUM_THREADS")}
    environ.update(env, DSL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=environ,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_dsl_num_threads_wins_over_omp_num_threads(tmp_path):
    done = run_child(tmp_path, DSL_NUM_THREADS="3", OMP_NUM_THREADS="2")
    assert done.stdout.split() == ["3", "3"]  # dsl.num_threads(), and the team that ran
    assert "Warning" not in done.stderr


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_bad_thread_count_warns_once_and_falls_back(tmp_path):
    done = run_child(tmp_path, DSL_NUM_THREADS="abc", OMP_NUM_THREADS="2")
    assert done.stdout.split() == ["2", "2"]
    assert done.stderr.count("DSL_NUM_THREADS='abc' is not a thread count") == 1, done.stderr


def test_num_threads_is_public_and_documented():
    assert dsl.num_threads is dsl.library.num_threads
    assert "num_threads" in dir(dsl)
    assert "DSL_NUM_THREADS" in dsl.num_threads.__doc__
    assert isinstance(dsl.num_threads(), int) and dsl.num_threads() >= 1
