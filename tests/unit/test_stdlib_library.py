"""dsl.ops.library: stdlib modules compiled once, cached on disk, reloaded."""

import numpy as np
import pytest

from dsl.ops import library

SAXPY = """
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
"""


@pytest.fixture
def stdlib_dir(tmp_path, monkeypatch):
    (tmp_path / "axpy.tk").write_text(SAXPY)
    monkeypatch.setattr(library, "_STDLIB_DIR", tmp_path)
    monkeypatch.setattr(library, "_loaded", {})
    monkeypatch.setattr(library, "_requested", {})
    monkeypatch.setattr(library, "_modules", {})
    return tmp_path


def test_builds_loads_and_memoizes(stdlib_dir):
    lib = library.stdlib_library("axpy")
    x = np.arange(7, dtype=np.float32)
    out = np.empty_like(x)
    lib.saxpy(2.0, x, x, out)
    np.testing.assert_array_equal(out, 3 * x)
    assert library.stdlib_library("axpy") is lib


def test_changed_source_is_rebuilt(stdlib_dir):
    first = library.stdlib_library("axpy")
    (stdlib_dir / "axpy.tk").write_text(SAXPY.replace("alpha * x[i]", "alpha * x[i] * 2.0"))
    assert library.stdlib_library("axpy") is first  # sources are read once per process
    library._loaded.clear()  # a new process
    library._requested.clear()
    second = library.stdlib_library("axpy")
    assert second is not first
    x = np.ones(3, np.float32)
    out = np.empty_like(x)
    second.saxpy(1.0, x, x, out)
    np.testing.assert_array_equal(out, 3 * x)


def test_unknown_module(stdlib_dir):
    with pytest.raises(ValueError, match="no standard-library module 'nope'"):
        library.stdlib_library("nope")


TWO = SAXPY + """
def scale(alpha: f32, x: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i]
"""


def _cached(folder) -> list:
    return sorted(folder.rglob("*.so"))


def test_module_builds_the_kernel_it_is_asked_for(stdlib_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    (stdlib_dir / "axpy.tk").write_text(TWO)
    mod = library.stdlib_module("axpy")
    x = np.arange(5, dtype=np.float32)
    out = np.empty_like(x)
    mod.scale(3.0, x, out)
    np.testing.assert_array_equal(out, 3 * x)
    built = _cached(tmp_path / "cache")
    assert len(built) == 1
    assert list(library.Library(built[0]).specs) == ["scale"]  # only the kernel used
    assert library.stdlib_module("axpy") is mod and mod.scale is mod.scale
    with pytest.raises(AttributeError, match=r"no kernel 'axpy' \(it has: saxpy, scale\)"):
        mod.axpy


def test_module_names_its_kernels_and_the_library_of_each(stdlib_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    (stdlib_dir / "axpy.tk").write_text(TWO)
    mod = library.stdlib_module("axpy")
    assert mod.kernel_names() == {"saxpy", "scale"}
    own = mod.library_of("scale")
    assert list(own.specs) == ["scale"] and own.path == _cached(tmp_path / "cache")[0]
    whole = library.stdlib_library("axpy")
    assert mod.library_of("saxpy") is whole  # once the whole module is built, it serves

def test_module_takes_a_built_whole_library(stdlib_dir, tmp_path, monkeypatch):
    monkeypatch.setenv("DSL_CACHE_DIR", str(tmp_path / "cache"))
    (stdlib_dir / "axpy.tk").write_text(TWO)
    library.stdlib_library("axpy")
    library._loaded.clear()  # a new process, which finds it in the cache
    library._requested.clear()
    mod = library.stdlib_module("axpy")
    x = np.arange(5, dtype=np.float32)
    out = np.empty_like(x)
    mod.saxpy(2.0, x, x, out)
    twice = np.empty_like(x)
    mod.scale(2.0, out, twice)
    np.testing.assert_array_equal(twice, 6 * x)
    assert len(_cached(tmp_path / "cache")) == 1  # nothing built for a kernel alone
    assert [lib.path for lib in library._loaded.values()] == _cached(tmp_path / "cache")


@pytest.mark.parametrize("name", ["dense", "pointwise", "permute", "quant_k", "conv", "norm"])
def test_kernel_names_from_the_syntax_are_the_type_checkers(name):
    """A module lists its kernels without type checking them: the same set."""
    from dsl import options
    from dsl.pipeline import compile_file

    typed = compile_file(library.stdlib_path(name), options.from_env(None), stop_after="typed").typed
    assert library.stdlib_module(name).kernel_names() == {k.name for k in typed.kernels}
