"""dsl.progress: a bar on a terminal, nothing on a pipe; shared by `dslc` over
several inputs and the autotuner. Terminals are real pseudo-terminals."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

from dsl import autotune
from dsl.progress import Progress, wanted

ROOT = Path(__file__).resolve().parents[2]
INPUTS = [ROOT / "examples" / "saxpy.tk", ROOT / "examples" / "row_sums.tk"]


def read_all(fd: int) -> bytes:
    """Everything written so far to the pty whose master is `fd`."""
    data = b""
    while select.select([fd], [], [], 0.2)[0]:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # the other side closed (Linux gives EIO)
            break
        if not chunk:
            break
        data += chunk
    return data


@pytest.fixture
def terminal():
    """(a text file on a pty's terminal side, the master fd to read it)."""
    master, slave = pty.openpty()
    stream = os.fdopen(slave, "w", buffering=1)
    yield stream, master
    stream.close()
    os.close(master)


def test_bar_redraws_in_place_and_ends_its_line():
    out = io.StringIO()
    with Progress("build", 4, stream=out, enabled=True) as bar:
        bar.update(1, "a.tk")
        bar.advance("b.tk")
        bar.message("a.tk:1:1: error: something")
    text = out.getvalue()
    assert "\rbuild [" + "#" * 6 + "." * 18 + "] 1/4" in text and "a.tk" in text
    assert "] 2/4" in text and "b.tk" in text
    assert "\ra.tk:1:1: error: something\n" in text  # the bar's line blanked, the message on its own
    assert text.endswith("\n") and text.count("\n") == 2  # the message and the close


def test_disabled_bar_writes_nothing():
    out = io.StringIO()
    with Progress("build", 3, stream=out, enabled=False) as bar:
        bar.update(1, "x")
        bar.message("hello")
    assert out.getvalue() == ""


def test_wanted_on_a_terminal_not_on_a_pipe(terminal, monkeypatch):
    stream, _ = terminal
    monkeypatch.delenv("DSL_NO_PROGRESS", raising=False)
    assert wanted(stream)
    assert not wanted(io.StringIO())
    read, write = os.pipe()
    with os.fdopen(write, "w") as pipe:
        assert not wanted(pipe)
    os.close(read)
    assert not wanted(stream, disabled=True)
    monkeypatch.setenv("DSL_NO_PROGRESS", "1")
    assert not wanted(stream)


def test_autotune_progress_is_drawn_on_a_terminal_only(terminal, monkeypatch):
    stream, master = terminal
    monkeypatch.delenv("DSL_NO_PROGRESS", raising=False)
    monkeypatch.setattr(sys, "stderr", stream)
    show = autotune.terminal_progress("mm")
    show(1, 3, 0.002)
    show(3, 3, 0.0015)
    text = read_all(master).decode()
    assert "\rautotune mm [" in text and "1/3" in text and "best 2.000 ms" in text
    assert "3/3" in text and "best 1.500 ms" in text and text.rstrip(" ").endswith("\r\n")
    monkeypatch.setattr(sys, "stderr", io.StringIO())
    assert autotune.terminal_progress("mm") is None


def dslc_with_stderr_on(stderr, tmp_path: Path, *extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "DSL_NO_PROGRESS"}
    return subprocess.run([sys.executable, "-m", "dsl.cli", *map(str, INPUTS), "--out-dir", str(tmp_path),
                           "--emit=loops", *extra], stderr=stderr, stdout=subprocess.DEVNULL, env=env, timeout=120)


def test_dslc_draws_a_bar_on_a_terminal(tmp_path):
    master, slave = pty.openpty()
    try:
        done = dslc_with_stderr_on(slave, tmp_path)
        text = read_all(master).decode()
    finally:
        os.close(slave)
        os.close(master)
    assert done.returncode == 0
    assert "\rdslc [" in text and "0/2" in text and "2/2" in text and "row_sums.tk" in text
    assert (tmp_path / "saxpy.loops").is_file() and (tmp_path / "row_sums.loops").is_file()


@pytest.mark.parametrize("extra", [(), ("--no-progress",)])
def test_dslc_is_quiet_on_a_pipe_and_with_no_progress(tmp_path, extra):
    if extra:  # --no-progress: quiet even on a terminal
        master, slave = pty.openpty()
        try:
            done = dslc_with_stderr_on(slave, tmp_path, *extra)
            text = read_all(master).decode()
        finally:
            os.close(slave)
            os.close(master)
    else:
        done = dslc_with_stderr_on(subprocess.PIPE, tmp_path)
        text = done.stderr.decode()
    assert done.returncode == 0
    assert text == ""
