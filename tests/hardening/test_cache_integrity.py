"""The compile cache under stress and in bad places: concurrent writers never
leave a corrupt entry, the directory is private, and an unusable directory
means compiling without the cache (with a warning), not failing."""

import hashlib
import os
import stat
import subprocess
import time
import sys
from pathlib import Path

import numpy as np
import pytest

import dsl
from dsl import jit

HERE = Path(__file__).resolve().parent
KERNELS = ["import dsl", "from dsl import f32, N", "",
           "@dsl.kernel",
           "def shared(x: f32[N], out: f32[N]):",
           "    for i in range(N):",
           "        out[i] = 3.0 * x[i]", ""]
for k in range(8):
    KERNELS += ["@dsl.kernel", f"def own{k}(x: f32[N], out: f32[N]):",
                "    for i in range(N):", f"        out[i] = {k + 1}.0 * x[i]", ""]


def _entries(cache: Path):
    return sorted(p for p in cache.rglob("*.so") if not p.name.startswith(".tmp"))


def test_two_processes_of_eight_threads(tmp_path):
    (tmp_path / "stress_kernels.py").write_text("\n".join(KERNELS))
    cache = tmp_path / "cache"
    env = {**os.environ, "DSL_CACHE_DIR": str(cache)}
    procs = [subprocess.Popen([sys.executable, str(HERE / "cache_stress.py"), str(tmp_path), str(p)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for p in range(2)]
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err
        assert out.strip() == "ok 16"
    entries = _entries(cache)
    assert len(entries) == 9  # one per kernel: the shared one was stored once, whoever won
    for lib in entries:
        assert hashlib.sha256(lib.read_bytes()).hexdigest() == lib.with_suffix(".sha256").read_text().strip()
    assert not list(cache.rglob(".tmp-*")), "a temporary file was left behind"


def test_cache_directory_is_private(tmp_path, monkeypatch):
    cache = tmp_path / "new" / "cache"
    monkeypatch.setenv("DSL_CACHE_DIR", str(cache))
    jit._memory_cache.clear()

    @dsl.kernel
    def private_cache(x: dsl.f32[dsl.N], out: dsl.f32[dsl.N]):
        for i in range(N):  # noqa: F821
            out[i] = x[i] + 1.0

    private_cache(np.zeros(3, np.float32), np.empty(3, np.float32))
    for folder in [cache, *[p for p in cache.iterdir() if p.is_dir()]]:
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_unusable_cache_directory_falls_back_with_a_warning(tmp_path, monkeypatch):
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("not a directory")
    monkeypatch.setenv("DSL_CACHE_DIR", str(in_the_way / "cache"))  # cannot be created, even by root
    jit._memory_cache.clear()

    @dsl.kernel
    def no_cache(x: dsl.f32[dsl.N], out: dsl.f32[dsl.N]):
        for i in range(N):  # noqa: F821
            out[i] = x[i] * 2.0

    out = np.empty(4, np.float32)
    with pytest.warns(RuntimeWarning, match="cannot use the compile cache"):
        no_cache(np.arange(4, dtype=np.float32), out)
    np.testing.assert_array_equal(out, [0, 2, 4, 6])


def test_a_missing_entry_is_built_once_by_concurrent_callers(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    from dsl.cache import DiskCache

    builds = []

    def build(path: Path) -> Path:
        builds.append(path)
        time.sleep(0.2)  # long enough that every caller misses the entry before it is published
        path.write_bytes(b"library")
        return path

    cache = DiskCache(tmp_path / "cache")  # each call locks through its own file descriptor, as processes do
    with ThreadPoolExecutor(4) as pool:
        paths = list(pool.map(lambda _: cache.get_or_build("ab" * 32, build), range(4)))
    assert len(builds) == 1
    assert len(set(paths)) == 1 and paths[0].read_bytes() == b"library"
