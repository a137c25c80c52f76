"""The compiled standard library: `stdlib/<name>.tk` built once, then cached.

    lib = stdlib_library("dense")      # a dsl.Library; lib.matmul_f32(...)

Builds go through the same disk cache as `@dsl.kernel` (keyed by the text of
every stdlib file, the target and the options), so a process pays the
compile once per machine, and later processes load the cached `.so`.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from dsl import options as options_mod
from dsl.cache import DiskCache, make_key
from dsl.library import Library

_STDLIB_DIR = Path(__import__("dsl.stdlib", fromlist=["x"]).__file__).parent
_loaded: dict[tuple[str, str], Library] = {}  # by (name, cache key)
_requested: dict[tuple[str, object], Library] = {}  # by (name, options as asked)
_lock = threading.Lock()


def stdlib_path(name: str) -> Path:
    """The `.tk` file of stdlib module `name` ('dense' -> stdlib/dense.tk)."""
    path = _STDLIB_DIR / f"{name}.tk"
    if not path.is_file():
        raise ValueError(f"no standard-library module '{name}' (looked for {path})")
    return path


def _key(name: str, opts: options_mod.CompileOptions) -> str:
    from dsl.backends.target import make_target

    target = make_target(opts.triple, opts.cpu, opts.features)
    # Every stdlib file, not just `name`: modules import each other.
    texts = [(p.name, p.read_text()) for p in sorted(_STDLIB_DIR.glob("*.tk"))]
    return make_key(kind="stdlib", name=name, sources=texts, target=target.key(),
                    options=opts.cache_key_part())


def _build(name: str, opts: options_mod.CompileOptions, path: Path) -> Path:
    from dsl.backends.link import link_shared
    from dsl.pipeline import compile_file

    job = compile_file(stdlib_path(name), opts, stop_after="obj")
    return link_shared(job.obj, path, job.target)


def stdlib_library(name: str, options: options_mod.CompileOptions | None = None) -> Library:
    """The loaded library of `stdlib/<name>.tk`, compiled on first use.

    `options` defaults to the environment's (`DSL_CACHE_DIR`, ...), host target.
    Once loaded, a library is found by (name, options) alone, in well under a
    microsecond: the sources are read and hashed, and the environment consulted,
    once per process (the code does not depend on the cache's location).
    """
    lib = _requested.get((name, options))
    if lib is not None:
        return lib
    opts = options_mod.from_env(options)
    key = _key(name, opts)
    with _lock:
        lib = _loaded.get((name, key))
        if lib is not None:
            _requested[(name, options)] = lib
            return lib
        if opts.use_cache:
            cache = DiskCache(options_mod.default_cache_dir(opts))
            path = cache.get_or_build(key, lambda p: _build(name, opts, p))
        else:
            path = _build(name, opts, Path(tempfile.mkdtemp(prefix="dslc-")) / f"{name}.so")
        lib = Library(path)
        _loaded[(name, key)] = lib
        _requested[(name, options)] = lib
        return lib


_kernels: dict[tuple[str, str], object] = {}  # (module, kernel) -> kernel


def stdlib_kernel(module: str, name: str):
    """The kernel `name` of `stdlib/<module>.tk`, with the environment's
    options, remembered: finding the library and then the kernel took
    ~0.4 us, a fifth of a small op's call. The kernel keeps its library loaded."""
    found = _kernels.get((module, name))
    if found is None:
        found = _kernels[(module, name)] = getattr(stdlib_library(module), name)
    return found
