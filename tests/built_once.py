"""Libraries built once per test run, shared by pytest-xdist's workers.

They go through the run's compile cache (tests/conftest.py points
DSL_CACHE_DIR at one folder for every worker), whose per-entry lock has one
worker build a library while another that needs it waits and then loads it.
A fixture that builds many libraries takes them `in_worker_order`, so that
two workers starting it at once build different ones side by side.
"""

from __future__ import annotations

import os
from pathlib import Path

from dsl.backends.link import link_shared
from dsl.backends.target import make_target
from dsl.cache import DiskCache, make_key
from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions, default_cache_dir, from_env
from dsl.pipeline import compile_source


def library_of(text: str, options: CompileOptions | None = None, source_name: str = "t.tk") -> Path:
    """The shared library of program `text` (its imports, if any, are not in
    the key: texts given here import nothing)."""
    options = from_env(options or CompileOptions())
    target = make_target(options.triple, options.cpu, options.features)
    key = make_key(kind="test-library", name=source_name, text=text, target=target.key(),
                   options=options.cache_key_part())

    def build(path: Path) -> Path:
        job = compile_source(Source(source_name, text), options, stop_after="obj")
        return link_shared(job.obj, path, job.target)

    return DiskCache(default_cache_dir(options)).get_or_build(key, build)


def file_library(path: Path, options: CompileOptions | None = None) -> Path:
    """The shared library of the `.tk` file at `path` (one that imports nothing)."""
    return library_of(path.read_text(), options, path.name)


def in_worker_order(items: list) -> list:
    """`items` rotated by the pytest-xdist worker's number: gw0 starts at the
    first, gw1 half-way along (with two workers), ..."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    count = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    index = int(worker.removeprefix("gw")) if worker.removeprefix("gw").isdigit() else 0
    shift = len(items) * index // max(count, 1)
    return items[shift:] + items[:shift]
