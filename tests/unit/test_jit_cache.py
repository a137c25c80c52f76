"""`@dsl.kernel` caches and threads: compile on the first call and reuse; the
on-disk cache serves a new `Kernel`; a damaged entry is rebuilt, never loaded;
four threads calling (and compiling) one kernel at once."""

import hashlib
import threading
from pathlib import Path

import numpy as np
import pytest

import dsl
import dsl.jit
import dsl.pipeline
from dsl import N, f32
from dsl.cache import DiskCache


def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]


def vectors(n, seed=0):
    rng = np.random.default_rng(seed)
    return rng.standard_normal(n).astype(np.float32), rng.standard_normal(n).astype(np.float32)


@pytest.fixture
def fresh(tmp_path, monkeypatch):
    """An empty disk cache and an empty in-memory cache: the next call compiles."""
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("DSL_INTERPRET", "DSL_NO_CACHE", "DSL_PRINT_AFTER", "DSL_DUMP_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(dsl.jit, "_memory_cache", {})
    return tmp_path / "cache"


@pytest.fixture
def pipeline_runs(monkeypatch) -> list:
    """Records the `stop_after` of every pipeline run."""
    runs = []
    real = dsl.pipeline.run

    def counting(job, stop_after="obj", **kwargs):
        runs.append(stop_after)
        return real(job, stop_after, **kwargs)

    monkeypatch.setattr(dsl.pipeline, "run", counting)
    return runs


# ------------------------------------------------------------------ caches


def test_without_the_cache_no_build_folder_is_left(fresh, tmp_path, monkeypatch):
    """DSL_NO_CACHE builds into a private folder, deleted once the library is loaded."""
    import tempfile

    monkeypatch.setenv("DSL_NO_CACHE", "1")
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    x, y = vectors(33)
    out = np.empty_like(x)
    dsl.kernel(saxpy)(2.0, x, y, out)
    np.testing.assert_allclose(out, 2 * x + y, rtol=1e-6)
    assert list((tmp_path / "tmp").iterdir()) == []


def test_compiles_on_first_call_and_reuses(fresh, pipeline_runs):
    @dsl.kernel
    def negate(x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = -x[i]

    assert negate._caller is None and pipeline_runs == []  # decorating compiles nothing
    x = np.arange(5, dtype=np.float32)
    out = np.empty_like(x)
    negate(x, out)
    caller = negate._caller
    assert caller is not None and pipeline_runs == ["so"]
    negate(x, out)
    assert negate._caller is caller and pipeline_runs == ["so"]
    np.testing.assert_array_equal(out, -x)


def test_new_kernel_object_hits_the_disk_cache(fresh, monkeypatch):
    def cube(x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = x[i] * x[i] * x[i]

    x = np.arange(4, dtype=np.float32)
    out = np.empty_like(x)
    dsl.kernel(cube)(x, out)
    assert len(list(fresh.rglob("*.so"))) == 1 and len(list(fresh.rglob("*.sha256"))) == 1

    def no_build(self, path, options=None):
        raise AssertionError("compiled again instead of loading the cached library")

    monkeypatch.setattr(dsl.jit, "_memory_cache", {})
    monkeypatch.setattr(dsl.jit.Kernel, "_build", no_build)
    out[:] = 0
    dsl.kernel(cube)(x, out)
    np.testing.assert_array_equal(out, x ** 3)


def _truncate(lib: Path):
    lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])


def _flip_byte(lib: Path):
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0x01
    lib.write_bytes(bytes(data))


def _drop_sidecar(lib: Path):
    lib.with_suffix(".sha256").unlink()


@pytest.mark.parametrize("damage", [_truncate, _flip_byte, _drop_sidecar], ids=["truncated", "flipped", "no-hash"])
def test_damaged_cache_entry_is_rebuilt_never_loaded(fresh, monkeypatch, damage):
    def halve(x: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = x[i] * 0.5

    k = dsl.kernel(halve)
    # Write the entry without loading it: a library this process has mapped
    # must not be damaged under it.
    lib = DiskCache(fresh).store(k._cache_key(k.options), k._build)
    good = lib.read_bytes()
    damage(lib)
    damaged = lib.read_bytes()
    assert damaged != good or not lib.with_suffix(".sha256").exists()

    builds, loaded = [], []
    real_build, real_library = dsl.jit.Kernel._build, dsl.jit.Library

    def counting_build(self, path, options=None):
        builds.append(path)
        return real_build(self, path, options)

    def checking_library(path):
        data = Path(path).read_bytes()
        assert data != damaged or damaged == good, "the damaged library was loaded"
        assert hashlib.sha256(data).hexdigest() == Path(path).with_suffix(".sha256").read_text().strip()
        loaded.append(path)
        return real_library(path)

    monkeypatch.setattr(dsl.jit.Kernel, "_build", counting_build)
    monkeypatch.setattr(dsl.jit, "Library", checking_library)
    x = np.arange(6, dtype=np.float32)
    out = np.empty_like(x)
    k(x, out)
    np.testing.assert_array_equal(out, x * 0.5)
    assert len(builds) == 1 and loaded == [lib]


# ------------------------------------------------------------------ threads


@pytest.mark.parametrize("interpret", [False, True], ids=["compiled", "interpreted"])
def test_four_threads_at_once(fresh, interpret):
    k = dsl.kernel(saxpy, interpret=interpret)  # compiles in whichever thread comes first
    start = threading.Barrier(4)
    errors, results = [], {}

    def work(t: int):
        try:
            x, y = vectors(50 + t, seed=t)
            start.wait()
            for _ in range(10):
                out = np.empty_like(x)
                k(np.float32(t), x, y, out)
            results[t] = (out, np.float32(t) * x + y)
        except Exception as exc:  # reported below, with the thread
            errors.append((t, exc))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    for t, (got, want) in results.items():
        np.testing.assert_allclose(got, want, rtol=2 ** -22, atol=1e-6, err_msg=f"thread {t}")
    assert len(results) == 4
