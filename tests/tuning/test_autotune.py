"""Autotuning: candidates timed in a worker process, the fastest kept and
remembered; refused and crashing candidates are skipped with a warning."""

import os
import subprocess
import sys

import numpy as np
import pytest

import dsl
from dsl import autotune, shaped
from dsl import f32, N  # noqa: F401  (annotations)

SCHEDULE = "split(i, choice(8, 64), tail=mask), one_of(parallel(i.outer), unroll(i.inner, 2))"


def _scale_kernel():
    @dsl.kernel(autotune=True, autotune_budget=60, schedule=SCHEDULE)
    def tuned_scale(alpha: f32, x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = alpha * x[i]

    return tuned_scale


def test_search_picks_records_and_reuses(monkeypatch, tmp_path):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))
    kernel = _scale_kernel()
    x = np.arange(5000, dtype=np.float32)
    out = np.empty_like(x)
    kernel(np.float32(2.0), x, out)
    np.testing.assert_array_equal(out, 2 * x)
    records = list((tmp_path / "tuning").glob("*.json"))
    assert len(records) == 1 and '"pick"' in records[0].read_text()

    # A new kernel object (a new process, as far as it knows): the record is
    # found, nothing is timed again.
    monkeypatch.setattr(shaped, "search", lambda *a, **k: pytest.fail("searched again"))
    again = _scale_kernel()
    again(np.float32(3.0), x, out)
    np.testing.assert_array_equal(out, 3 * x)


def test_refused_candidate_is_skipped_with_a_warning(monkeypatch, tmp_path):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path))

    @dsl.kernel(autotune=True, autotune_budget=60, reassociate=False,
                schedule="one_of(parallel(i), split(i, 8, tail=mask))")
    def tuned_sum(x: f32[N], out: f32[1]):
        acc = 0.0
        for i in range(N):
            acc += x[i]
        out[0] = acc

    x = np.ones(100, np.float32)
    out = np.zeros(1, np.float32)
    with pytest.warns(UserWarning, match="candidate 0 skipped: does not compile"):
        tuned_sum(x, out)
    assert out[0] == 100


def test_crashing_candidate_is_skipped(tmp_path):
    meta = ('{\\"format\\":1,\\"kernels\\":[{\\"name\\":\\"k\\",\\"doc\\":null,\\"inplace\\":false,'
            '\\"params\\":[{\\"name\\":\\"x\\",\\"kind\\":\\"tensor\\",\\"dtype\\":\\"f32\\",\\"dims\\":[\\"N\\"],'
            '\\"output\\":true}],\\"checks\\":[]}]}')
    good = tmp_path / "good.c"
    bad = tmp_path / "bad.c"
    body = "const char *__dsl_metadata(void) { return \"%s\"; }\n" % meta
    good.write_text(body + "int k__packed(void *args) { return 0; }\n")
    bad.write_text("#include <stdlib.h>\n" + body + "int k__packed(void *args) { abort(); }\n")
    paths = {}
    for name in ("good", "bad"):
        paths[name] = tmp_path / f"{name}.so"
        subprocess.run(["cc", "-shared", "-fPIC", "-o", str(paths[name]), str(tmp_path / f"{name}.c")], check=True)
    args = [{"kind": "tensor", "dtype": "<f4", "shape": [16], "strides": [1], "output": True}]
    builds = [(0, lambda: paths["bad"]), (1, lambda: paths["good"]), (2, lambda: paths["bad"])]
    with pytest.warns(UserWarning, match="crashed"):
        outcome = autotune.search("k", builds, args, budget=60)
    assert outcome.pick == 1 and outcome.timed == 1
    assert sorted(i for i, _ in outcome.failed) == [0, 2]


def test_shape_class_rounds_to_powers_of_two():
    assert autotune.shape_class({"N": 1000, "M": 1}, (True, False)) == "M=1,N=1024;unit=TF"
    assert autotune.shape_class({"N": 1024}, ()) == autotune.shape_class({"N": 513}, ())


def test_dslc_autotune_builds_and_caches(tmp_path):
    src = tmp_path / "s.tk"
    src.write_text(f"@schedule({SCHEDULE})\n"
                   "def scale(alpha: f32, x: f32[N], out: f32[N]):\n"
                   "    for i in range(N):\n"
                   "        out[i] = alpha * x[i]\n")
    so = tmp_path / "s.so"
    env = {**os.environ, "DSL_CACHE_DIR": str(tmp_path / "cache")}
    cmd = [sys.executable, "-m", "dsl.cli", str(src), "--autotune", "N=4096", "-o", str(so)]
    first = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert first.returncode == 0, first.stderr
    assert "autotune scale:" in first.stderr and "timed" in first.stderr
    second = subprocess.run(cmd, capture_output=True, text=True, env=env)
    assert second.returncode == 0 and "timed" not in second.stderr  # the recorded choice is reused
    x = np.arange(10, dtype=np.float32)
    out = np.empty_like(x)
    dsl.load(so).scale(np.float32(2.0), x, out)
    np.testing.assert_array_equal(out, 2 * x)
