"""The examples beyond the kernels: the C program of examples/c/ (built with dslc
and gcc, then run), and `make demo`'s references covering every example kernel."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dsl.pipeline import compile_file

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc is not installed")
def test_c_program_builds_and_runs(tmp_path):
    env = {**os.environ, "DSLC": f"{sys.executable} -m dsl.cli", "CC": "gcc"}
    run = subprocess.run(["sh", str(EXAMPLES / "c" / "build_and_run.sh"), str(tmp_path)],
                         capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.splitlines() == [
        "saxpy: out[::2] = 2 x + y for 1000 elements; y too short -> check 1",
        "matmul_index: C = A @ B with B transposed in memory, 3x4 @ 4x2 ok",
        "ok",
    ]
    assert (tmp_path / "saxpy.h").read_text().count("int32_t saxpy(") == 1


def test_demo_has_a_reference_for_every_example_kernel():
    sys.path.insert(0, str(EXAMPLES))
    try:
        from references import CASES
    finally:
        sys.path.remove(str(EXAMPLES))
    names = [fn.name for tk in EXAMPLES.glob("*.tk") for fn in compile_file(tk, stop_after="ast").front.module.functions]
    assert sorted(names) == sorted(CASES)


def test_dask_example_multiplies_in_worker_processes():
    pytest.importorskip("distributed", reason="Dask is an optional extra (pip install -e '.[dask]')")
    import numpy as np

    import dsl

    # Compile the dense library here, into the test session's cache (inherited by
    # the workers), rather than once in each worker at the same time.
    dsl.ops.matmul(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    run = subprocess.run([sys.executable, str(EXAMPLES / "dask_matmul.py"), "--size", "512", "--block", "256",
                          "--workers", "2"], capture_output=True, text=True, timeout=900)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "on 2 worker processes" in run.stdout and "not this one: True" in run.stdout, run.stdout
