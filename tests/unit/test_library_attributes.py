"""Kernels are plain attributes of a loaded library (found without the
failed lookup that reaches __getattr__), and never hide its methods."""

from __future__ import annotations

import numpy as np
import pytest

import dsl
from dsl.backends.link import link_shared
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

SOURCE = """
def scale(x: f32[N], y: f32[N]):
    y[i] = 2.0 * x[i]

def set_num_threads(x: f32[N], y: f32[N]):
    y[i] = x[i] + 1.0
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    job = compile_source(Source("attrs.tk", SOURCE), CompileOptions(), stop_after="obj")
    return dsl.load(link_shared(job.obj, tmp_path_factory.mktemp("attrs") / "attrs.so", job.target))


def test_a_kernel_is_an_instance_attribute(lib):
    assert vars(lib)["scale"] is lib.scale
    x, y = np.arange(5, dtype=np.float32), np.empty(5, np.float32)
    lib.scale(x, y)
    np.testing.assert_array_equal(y, 2 * x)


def test_a_kernel_named_like_a_method_does_not_hide_it(lib):
    assert "set_num_threads" not in vars(lib)
    assert lib.set_num_threads.__func__ is dsl.Library.set_num_threads
    assert "set_num_threads" in dir(lib)


def test_a_missing_kernel_names_the_ones_there_are(lib):
    with pytest.raises(AttributeError, match="has no kernel 'nope'.*scale"):
        lib.nope


def test_a_kernel_kept_without_its_library_still_hears_set_num_threads(lib):
    """`k = dsl.load(path).k` drops the Library object; dsl.set_num_threads
    must still reach the library's runtime, so the kernel keeps it alive."""
    import gc

    from dsl import library

    kernel = dsl.load(lib.path).scale
    gc.collect()
    assert any(loaded.path == lib.path and loaded is not lib for loaded in library._loaded)
    x, y = np.arange(3, dtype=np.float32), np.empty(3, np.float32)
    kernel(x, y)
    np.testing.assert_array_equal(y, 2 * x)
