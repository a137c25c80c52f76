"""Helpers shared by the schedule tests: compile program text to a stage, or
to a loaded shared library."""

from __future__ import annotations

import threading

import dsl
from dsl.grammar.diagnostics import Source
from dsl.ops.generated import generated_library
from dsl.options import CompileOptions
from dsl.pipeline import compile_source


def compile_to(text: str, stage: str, **options):
    return compile_source(Source("t.tk", text), CompileOptions(**options), stop_after=stage)


def call_on_threads(lib, threads: int, kernel: str, *args) -> None:
    """`lib.kernel(*args)` on `threads` threads, then back to the default."""
    lib.set_num_threads(threads)
    try:
        getattr(lib, kernel)(*args)
    finally:
        lib.set_num_threads(0)


def load_library(text: str, **options) -> KernelsOnDemand:
    """The kernels of `text`, compiled for this machine (or `cpu=...` of its
    architecture), each on its first use (see KernelsOnDemand)."""
    return KernelsOnDemand(text, CompileOptions(**options))


class KernelsOnDemand:
    """The kernels of one program text as attributes, each compiled on its
    first use into a library of its own by `generated_library`, built once
    for the run (tests/built_once.py). A test builds only the kernels it calls, and
    two workers calling the same kernel build it once: one library of all
    the kernels of the contraction forms took 125 s to build, and every
    worker that ran one of their tests built it again.

    `set_num_threads(n)` applies to every kernel, loaded or not yet."""

    def __init__(self, text: str, options: CompileOptions):
        self._text, self._options = text, options
        self._libraries: dict[str, dsl.Library] = {}
        self._threads = 0
        self._names: frozenset[str] | None = None
        self._lock = threading.Lock()

    def __getattr__(self, kernel: str):
        if kernel.startswith("_") or kernel not in self._kernel_names():
            raise AttributeError(f"the program has no kernel {kernel!r}")
        return getattr(self._library(kernel), kernel)

    def _kernel_names(self) -> frozenset[str]:
        if self._names is None:
            typed = compile_source(Source("t.tk", self._text), self._options, stop_after="typed").typed
            self._names = frozenset(k.name for k in typed.kernels)
        return self._names

    def set_num_threads(self, count: int) -> None:
        self._threads = count
        for library in self._libraries.values():
            library.set_num_threads(count)

    def _library(self, kernel: str) -> dsl.Library:
        with self._lock:
            if kernel not in self._libraries:
                library = generated_library(self._text, "t.tk", self._options.with_(kernels=frozenset({kernel})))
                library.set_num_threads(self._threads)
                self._libraries[kernel] = library
            return self._libraries[kernel]
