"""Kernels whose text an op writes at run time (one per einsum spec and
layout), compiled once and cached like the standard library: in memory for
the process, on disk (`$DSL_CACHE_DIR`) across processes.

    lib = generated_library("def k(x: f32[N], y: f32[N]):\\n    y[i] = x[i]\\n")
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from dsl import options as options_mod
from dsl.cache import DiskCache, make_key
from dsl.grammar.diagnostics import Source
from dsl.library import Library

_loaded: dict[str, Library] = {}
# The text's library in this process, before any hashing.
_by_text: dict[tuple[str, str, options_mod.CompileOptions | None], Library] = {}
_lock = threading.Lock()


def generated_library(text: str, name: str = "generated",
                      options: options_mod.CompileOptions | None = None) -> Library:
    """The loaded library of the program `text` (which imports nothing),
    compiled on first use with `options` (default: the environment's, for
    this machine)."""
    lib = _by_text.get((name, text, options))
    if lib is not None:
        return lib
    lib = _by_text[(name, text, options)] = _load(text, name, options)
    return lib


def _load(text: str, name: str, options: options_mod.CompileOptions | None) -> Library:
    from dsl.backends.target import make_target

    opts = options_mod.from_env(options)
    target = make_target(opts.triple, opts.cpu, opts.features)
    key = make_key(kind="ops-generated", sources=[(name, text)], target=target.key(),
                   options=opts.cache_key_part())
    with _lock:
        lib = _loaded.get(key)
        if lib is not None:
            return lib
        build = lambda path: _build(text, name, opts, path)  # noqa: E731
        if opts.use_cache:
            cache = DiskCache(options_mod.default_cache_dir(opts))
            path = cache.get_or_build(key, build)
        else:
            path = build(Path(tempfile.mkdtemp(prefix="dslc-")) / f"{name}.so")
        lib = _loaded[key] = Library(path)
        return lib


def _build(text: str, name: str, opts: options_mod.CompileOptions, path: Path) -> Path:
    from dsl.backends.link import link_shared
    from dsl.pipeline import compile_source

    job = compile_source(Source(f"<{name}>", text), opts, stop_after="so")
    return link_shared(job.objects, path, job.target)
