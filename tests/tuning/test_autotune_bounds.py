"""The autotuner's bounds: the time budget is a hard limit (a hanging candidate
is killed), running out of it falls back to the defaults without recording
them, builds leave no temporary folders, and warnings and progress look like
the rest of dslc's output."""

import os
import pty
import select
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click
import numpy as np
import pytest
from tuning_kernels import K_ARGS, QUICK, SPIN

import dsl
from dsl import autotune, cli_tuning
from dsl.options import CompileOptions
from dsl import f32, N  # noqa: F401  (annotations)

ROOT = Path(__file__).resolve().parents[2]

SCHEDULE = "split(i, choice(8, 64), tail=mask), one_of(parallel(i.outer), unroll(i.inner, 2))"
SCALE_TK = (f"@schedule({SCHEDULE})\n"
            "def scale(alpha: f32, x: f32[N], out: f32[N]):\n"
            "    for i in range(N):\n"
            "        out[i] = alpha * x[i]\n")


def _records(cache) -> list:
    return list((cache / "tuning").glob("*.json"))


def _slow(path, seconds: float):
    def build():
        time.sleep(seconds)
        return path

    return build


def _refuse():
    raise ValueError("no such schedule")


def test_hanging_candidate_is_killed_at_the_deadline(build_lib):
    quick, spin = build_lib(QUICK, "quick"), build_lib(SPIN, "spin")
    builds = [(0, lambda: quick), (1, lambda: spin), (2, lambda: quick)]
    start = time.monotonic()
    with pytest.warns(UserWarning, match="candidate 1 skipped: did not finish within the time budget"):
        outcome = autotune.search("k", builds, K_ARGS, budget=4)
    assert time.monotonic() - start < 4 + autotune.GRACE + 2
    assert outcome.pick == 0 and outcome.tuned
    assert 1 in dict(outcome.failed)
    assert not _workers_left()


def _workers_left() -> list[int]:
    """Children of this process still running the autotune worker."""
    pids = open(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read().split()
    return [p for p in pids if b"autotune_worker" in open(f"/proc/{p}/cmdline", "rb").read()]


def test_nothing_timed_in_the_budget_falls_back_to_the_first_that_compiles(build_lib):
    quick = build_lib(QUICK, "quick")
    builds = [(0, _refuse), (1, _slow(quick, 0.2)), (2, lambda: quick)]
    with pytest.warns(UserWarning) as record:
        outcome = autotune.search("k", builds, K_ARGS, budget=0.05)
    assert (outcome.pick, outcome.tuned, outcome.seconds) == (1, False, None)
    texts = [str(w.message) for w in record]
    assert any("no candidate could be timed" in t and "using candidate 1" in t for t in texts), texts


def test_an_untimed_fallback_is_not_recorded(tmp_path):
    records = autotune.TuningRecords(tmp_path)
    records.put("key", "N=8;unit=T", autotune.Outcome(0, None, 0, ()), "split(i, 8)")
    assert records.get("key", "N=8;unit=T") is None and not _records(tmp_path)


@pytest.mark.parametrize("budget", [0, -1.0, float("nan")])
def test_a_budget_that_is_not_positive_is_refused(budget, tmp_path):
    with pytest.raises(ValueError, match="positive number of seconds"):
        autotune.search("k", [(0, lambda: "unused.so")], K_ARGS, budget=budget)
    src = tmp_path / "s.tk"
    src.write_text(SCALE_TK)
    with pytest.raises(click.BadParameter, match="positive"):
        cli_tuning.tune_file(src, CompileOptions(cache_dir=tmp_path), {"N": 64}, budget)


def test_jit_small_budget_warns_at_the_call_and_searches_again_later(monkeypatch, tmp_path):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))

    def make(budget):
        @dsl.kernel(autotune=True, autotune_budget=budget, schedule=SCHEDULE)
        def tiny_budget(alpha: f32, x: f32[N], out: f32[N]):
            for i in range(N):
                out[i] = alpha * x[i]

        return tiny_budget

    x = np.arange(3000, dtype=np.float32)
    out = np.empty_like(x)
    with pytest.warns(UserWarning, match="no candidate could be timed") as record:
        make(0.001)(np.float32(2.0), x, out)
    np.testing.assert_array_equal(out, 2 * x)
    assert record[0].filename == __file__  # the user's call, not a dsl file
    assert not _records(tmp_path)  # the defaults were not tuned: not remembered
    make(60)(np.float32(3.0), x, out)
    np.testing.assert_array_equal(out, 3 * x)
    assert len(_records(tmp_path)) == 1


def _dslc(*args, cache) -> subprocess.CompletedProcess:
    env = {**os.environ, "DSL_CACHE_DIR": str(cache)}
    return subprocess.run([sys.executable, "-m", "dsl.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=300)


def test_dslc_small_budget_warns_in_one_line_and_searches_again_later(tmp_path):
    src = tmp_path / "s.tk"
    src.write_text(SCALE_TK)
    cache = tmp_path / "cache"
    small = _dslc(src, "--autotune", "N=4096", "--autotune-budget", "0.1", "-o", tmp_path / "s.so", cache=cache)
    assert small.returncode == 0, small.stderr
    assert "Traceback" not in small.stderr
    lines = [ln for ln in small.stderr.splitlines() if "no candidate could be timed" in ln]
    assert len(lines) == 1 and lines[0].startswith("dslc: warning: autotune scale: "), small.stderr
    assert not _records(cache)
    full = _dslc(src, "--autotune", "N=4096", "-o", tmp_path / "s.so", cache=cache)
    assert full.returncode == 0 and "timed" in full.stderr and len(_records(cache)) == 1


def test_dslc_skipped_candidate_warns_like_dslc(tmp_path):
    src = tmp_path / "sum.tk"
    src.write_text("@schedule(one_of(parallel(i), split(i, 8, tail=mask)))\n"
                   "def total(x: f32[N], out: f32[1]):\n"
                   "    acc = 0.0\n"
                   "    for i in range(N):\n"
                   "        acc += x[i]\n"
                   "    out[0] = acc\n")
    done = _dslc(src, "--autotune", "N=1000", "-o", tmp_path / "sum.so", cache=tmp_path / "cache")
    assert done.returncode == 0, done.stderr
    assert "dslc: warning: autotune total: candidate 0 (parallel(i)) skipped: does not compile" in done.stderr
    assert "UserWarning" not in done.stderr and ".py:" not in done.stderr


def test_tuning_leaves_no_temporary_folders(monkeypatch, tmp_path):
    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    src = tmp_path / "s.tk"
    src.write_text(SCALE_TK)
    opts = cli_tuning.tune_file(src, CompileOptions(cache_dir=tmp_path / "cache"), {"N": 4096}, 60)
    assert opts.schedule_picks and len(_records(tmp_path / "cache")) == 1
    assert not list(private.glob("dslc-tune-*"))


def test_benchmark_builds_leave_no_temporary_folders(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(ROOT))
    from benchmarks import common

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    src = tmp_path / "quick.tk"
    src.write_text(QUICK)
    lib = common.build(str(src))  # an absolute path: not under benchmarks/
    x = np.zeros(4, np.float32)
    lib.k(3, x)
    assert x[0] == 1.0
    assert not list(private.glob("dslc-bench-*"))


def _read_terminal(fd: int) -> str:
    """What was written so far to the pty whose master is `fd`."""
    data = b""
    while select.select([fd], [], [], 0.2)[0]:
        chunk = os.read(fd, 65536)
        if not chunk:
            break
        data += chunk
    return data.decode()


def test_progress_is_drawn_while_candidates_build(build_lib, monkeypatch):
    quick = build_lib(QUICK, "quick")
    master, slave = pty.openpty()
    terminal = os.fdopen(slave, "w", buffering=1)
    monkeypatch.delenv("DSL_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", terminal)
    shown_while_building = []

    def build():
        shown_while_building.append(_read_terminal(master))
        return quick

    try:
        outcome = autotune.search("k", [(0, build), (1, build)], K_ARGS, budget=60,
                                  progress=autotune.terminal_progress("k"))
        after = _read_terminal(master)
    finally:
        terminal.close()
        os.close(master)
    assert outcome.tuned
    assert "\rautotune k [" in shown_while_building[1] and "1/2" in shown_while_building[1]
    assert "building candidate 1" in shown_while_building[1]
    assert "2/2" in after and after.endswith("\r\n")  # the bar ends its line when the search ends
