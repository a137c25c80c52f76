"""`dslc` over several inputs (`--out-dir`) and over the whole standard library
(`--stdlib`): what is written, what is refused, and that one bad file does not
stop the others."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

import dsl
from dsl.cli import main
from dsl.ops import library

ROOT = Path(__file__).resolve().parents[2]
SAXPY = ROOT / "examples" / "saxpy.tk"
ROW_SUMS = ROOT / "examples" / "row_sums.tk"
BROKEN = "def f(x: f32[N]):\n    x[0] = y\n"


def dslc(*args):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def test_several_inputs_build_a_library_and_a_header_each(tmp_path):
    result = dslc(SAXPY, ROW_SUMS, "--out-dir", tmp_path / "out", "--no-progress")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["row_sums.h", "row_sums.so", "saxpy.h",
                                                                   "saxpy.so"]
    assert "int32_t saxpy(" in (tmp_path / "out" / "saxpy.h").read_text()
    ctypes.CDLL(str(tmp_path / "out" / "row_sums.so"))
    x = np.arange(4, dtype=np.float32)
    out = np.empty_like(x)
    dsl.load(tmp_path / "out" / "saxpy.so").saxpy(2.0, x, x, out)
    np.testing.assert_array_equal(out, 3 * x)
    assert result.stderr == ""  # not a terminal: no bar, and nothing else on success


def test_out_dir_takes_the_emit_stage(tmp_path):
    result = dslc(SAXPY, ROW_SUMS, "--out-dir", tmp_path, "--emit=asm")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["row_sums.s", "saxpy.s"]  # headers need a binary


def test_single_input_with_out_dir(tmp_path):
    result = dslc(SAXPY, "--out-dir", tmp_path)
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saxpy.h", "saxpy.so"]


@pytest.mark.parametrize("args, message", [
    (["{saxpy}", "{row_sums}", "-o", "x.so"], "-o and -H name one output, but 2 inputs were given"),
    (["{saxpy}", "{row_sums}", "-H", "x.h"], "use --out-dir DIR"),
    (["{saxpy}", "{row_sums}"], "2 inputs: give --out-dir DIR"),
    (["{saxpy}", "--out-dir", "d", "-o", "x.so"], "--out-dir names every output"),
    (["--stdlib", "{saxpy}"], "give no FILES with it"),
    (["--stdlib", "--specialize", "N=8"], "need --out-dir"),
    ([], "missing FILE"),
])
def test_usage_errors(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    result = dslc(*(a.format(saxpy=SAXPY, row_sums=ROW_SUMS) for a in args))
    assert result.exit_code == 2
    assert message in result.stderr
    assert not list(tmp_path.iterdir())  # nothing built


def test_same_name_twice_is_refused(tmp_path):
    other = tmp_path / "sub" / "saxpy.tk"
    other.parent.mkdir()
    other.write_text(SAXPY.read_text())
    result = dslc(SAXPY, other, "--out-dir", tmp_path / "out")
    assert result.exit_code == 2 and "would both write" in result.stderr


def test_a_bad_input_is_reported_and_the_others_are_built(tmp_path):
    bad = tmp_path / "bad.tk"
    bad.write_text(BROKEN)
    result = dslc(bad, SAXPY, "--out-dir", tmp_path / "out")
    assert result.exit_code == 1
    assert "bad.tk:2:12: error: name 'y' is not defined" in result.stderr
    assert "1 of 2 inputs failed" in result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["saxpy.h", "saxpy.so"]


@pytest.fixture
def small_stdlib(tmp_path, monkeypatch):
    """A standard library of one kernel module and one of helpers only."""
    folder = tmp_path / "stdlib"
    folder.mkdir()
    (folder / "helpers.tk").write_text("def twice(v: f32) -> f32:\n    return v * 2.0\n")
    (folder / "axpy.tk").write_text(
        "from helpers import twice\n\n"
        "def axpy(x: f32[N], out: f32[N]):\n    for i in range(N):\n        out[i] = twice(x[i]) + out[i]\n")
    monkeypatch.setattr(library, "_STDLIB_DIR", folder)
    monkeypatch.setattr(library, "_loaded", {})
    monkeypatch.setattr(library, "_requested", {})
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    return folder


def test_stdlib_fills_the_cache_dsl_ops_loads_from(small_stdlib, tmp_path):
    result = dslc("--stdlib")
    assert result.exit_code == 0, result.stderr
    assert "axpy" in result.stderr and "helpers" not in result.stderr
    assert str(tmp_path / "cache") in result.stderr
    library._loaded.clear()  # as a new process would
    library._requested.clear()
    built = sorted((tmp_path / "cache").rglob("*.so"))
    assert len(built) == 1
    lib = library.stdlib_library("axpy")
    assert Path(lib.path) == built[0]  # found in the cache, not built again
    x, out = np.ones(3, np.float32), np.ones(3, np.float32)
    lib.axpy(x, out)
    np.testing.assert_array_equal(out, 3.0)


def test_stdlib_builds_modules_side_by_side(small_stdlib, tmp_path, monkeypatch):
    """Two modules on two cores: each built once, in worker processes, into
    the cache that a later process finds them in."""
    (small_stdlib / "scale.tk").write_text(
        "from helpers import twice\n\n"
        "def scale(x: f32[N], out: f32[N]):\n    for i in range(N):\n        out[i] = twice(x[i])\n")
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    result = dslc("--stdlib")
    assert result.exit_code == 0, result.stderr
    assert [line.split()[0] for line in result.stderr.splitlines()[-2:]] == ["axpy", "scale"]
    assert not library._loaded  # built by the workers, not here
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 2
    x, out = np.ones(3, np.float32), np.zeros(3, np.float32)
    library.stdlib_library("scale").scale(x, out)
    np.testing.assert_array_equal(out, 2.0)
    assert len(list((tmp_path / "cache").rglob("*.so"))) == 2  # found, not built again


def test_stdlib_into_a_folder(small_stdlib, tmp_path):
    result = dslc("--stdlib", "--out-dir", tmp_path / "out")
    assert result.exit_code == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["axpy.h", "axpy.so"]
