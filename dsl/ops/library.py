"""The compiled standard library: `stdlib/<name>.tk` built once, then cached.

    lib = stdlib_library("dense")      # a dsl.Library; lib.matmul_f32(...)
    mod = stdlib_module("dense")       # the same kernels, each built on first use

`dsl.ops` takes the second: a fresh machine's first `dsl.ops.matmul` compiles
the one kernel it calls (4-5 s on 2 cores of Zen 4), not the 21 of dense.tk
(37 s); a module that `dslc --stdlib` (or `stdlib_library`) has built is
used whole.

Builds go through the same disk cache as `@dsl.kernel` (keyed by the text of
every stdlib file, the target and the options), so a process pays the
compile once per machine, and later processes load the cached `.so`.
"""

from __future__ import annotations

import functools
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


@functools.cache
def _target():
    """The target the stdlib is compiled for: the environment's options (the host)."""
    from dsl.backends.target import make_target

    opts = options_mod.from_env(None)
    return make_target(opts.triple, opts.cpu, opts.features)


@functools.cache
def vector_bits() -> int:
    """The width of the vector registers the stdlib is compiled for."""
    return _target().vector_bits


@functools.cache
def intel_avx512() -> bool:
    """Whether the stdlib is compiled for an Intel core with AVX-512
    (`Target.intel_avx512`)."""
    return _target().intel_avx512


def wide_vectors() -> bool:
    """Whether the stdlib is compiled for 512-bit vectors."""
    return vector_bits() >= 512


def _key(name: str, opts: options_mod.CompileOptions) -> str:
    from dsl.backends.target import make_target

    target = make_target(opts.triple, opts.cpu, opts.features)
    # Every stdlib file, not just `name`: modules import each other.
    texts = [(p.name, p.read_text()) for p in sorted(_STDLIB_DIR.glob("*.tk"))]
    return make_key(kind="stdlib", name=name, sources=texts, target=target.key(),
                    options=opts.cache_key_part())


def _kernel_key(name: str, kernel: str, opts: options_mod.CompileOptions) -> str:
    return make_key(kind="stdlib-kernel", module=_key(name, opts), kernel=kernel)


def _build(name: str, opts: options_mod.CompileOptions, path: Path) -> Path:
    from dsl.backends.link import link_shared
    from dsl.pipeline import compile_file

    job = compile_file(stdlib_path(name), opts, stop_after="so")
    return link_shared(job.objects, path, job.target)


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
        lib = _loaded[(name, key)] = Library(_built(key, opts, lambda p: _build(name, opts, p), name))
        _requested[(name, options)] = lib
        return lib


def _built(key: str, opts: options_mod.CompileOptions, build, stem: str) -> Path:
    """The cache's entry for `key`, built by `build(path)` if missing (or, with
    the cache off, a private build)."""
    if opts.use_cache:
        return DiskCache(options_mod.default_cache_dir(opts)).get_or_build(key, build)
    return build(Path(tempfile.mkdtemp(prefix="dslc-")) / f"{stem}.so")


class StdlibModule:
    """The kernels of `stdlib/<name>.tk` as attributes, each compiled on its
    first use into a library of its own, unless the whole module is loaded or
    in the cache (then its kernels are taken from it). Once found, a kernel is
    an attribute: later lookups are Python's ordinary ones."""

    def __init__(self, name: str, options: options_mod.CompileOptions | None):
        self._name = name
        self._opts = options_mod.from_env(options)
        self._key = _key(name, self._opts)
        self._names: frozenset[str] | None = None

    def __getattr__(self, kernel: str):
        if kernel.startswith("_"):
            raise AttributeError(kernel)
        lib = self._whole()
        if lib is None:
            lib = self._single(kernel)
        found = getattr(lib, kernel)
        setattr(self, kernel, found)
        return found

    def library_of(self, kernel: str) -> Library:
        """The library `kernel` is taken from (the whole module's, or its own)."""
        return self._whole() or self._single(kernel)

    def kernel_names(self) -> frozenset[str]:
        """The names of the module's kernels."""
        return self._kernel_names()

    def _whole(self) -> Library | None:
        """The whole module's library, when loaded in this process or cached."""
        lib = _loaded.get((self._name, self._key))
        if lib is None and self._opts.use_cache:
            path = DiskCache(options_mod.default_cache_dir(self._opts)).lookup(self._key)
            if path is not None:
                with _lock:
                    lib = _loaded.setdefault((self._name, self._key), Library(path))
        return lib

    def _single(self, kernel: str) -> Library:
        """A library of `kernel` alone (AttributeError if the module has no such kernel)."""
        key = _kernel_key(self._name, kernel, self._opts)
        lib = _loaded.get((self._name, key))
        if lib is not None:
            return lib
        path = DiskCache(options_mod.default_cache_dir(self._opts)).lookup(key) if self._opts.use_cache else None
        if path is None:
            if kernel not in self._kernel_names():
                raise AttributeError(f"stdlib/{self._name}.tk has no kernel '{kernel}' "
                                     f"(it has: {', '.join(sorted(self._kernel_names()))})")
            only = self._opts.with_(kernels=frozenset({kernel}))
            path = _built(key, self._opts, lambda p: _build(self._name, only, p), kernel)
        with _lock:
            return _loaded.setdefault((self._name, key), Library(path))

    def _kernel_names(self) -> frozenset[str]:
        """The kernels of the module, read off its syntax tree (the type checker
        sorts functions by the same rule, `is_kernel`; checking all 21 of
        dense.tk to list them took ~0.4 s of a first call)."""
        if self._names is None:
            from dsl.lowering.typecheck.kernel import is_kernel
            from dsl.pipeline import compile_file

            module = compile_file(stdlib_path(self._name), self._opts, stop_after="ast").front.module
            self._names = frozenset(f.name for f in module.functions if is_kernel(f))
        return self._names

    def __repr__(self) -> str:
        return f"<dsl.ops stdlib module {self._name}>"


_modules: dict[tuple[str, object], StdlibModule] = {}


def stdlib_module(name: str, options: options_mod.CompileOptions | None = None) -> StdlibModule:
    """`stdlib/<name>.tk`'s kernels, each compiled on first use (`StdlibModule`);
    one object per (name, options) and process."""
    found = _modules.get((name, options))
    if found is None:
        stdlib_path(name)  # a clear error for a module that does not exist
        found = _modules.setdefault((name, options), StdlibModule(name, options))
    return found


_kernels: dict[tuple[str, str], object] = {}  # (module, kernel) -> kernel


def stdlib_kernel(module: str, name: str):
    """The kernel `name` of `stdlib/<module>.tk`, with the environment's
    options, remembered: finding the library and then the kernel took
    ~0.4 us, a fifth of a small op's call. The kernel keeps its library loaded."""
    found = _kernels.get((module, name))
    if found is None:
        found = _kernels[(module, name)] = getattr(stdlib_module(module), name)
    return found
