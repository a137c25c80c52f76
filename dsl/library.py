"""`dsl.load("kernels.so")`: the kernels of a shared library built by `dslc`.

The library describes itself (its exported `__dsl_metadata()`), so the returned
object checks arguments exactly as `@dsl.kernel` does.
"""

from __future__ import annotations

import ctypes
import os
import re
import weakref
from pathlib import Path

from .call import Caller
from .fastcall import fastcall_function, fill_table
from .metadata import loads


_loaded: "weakref.WeakSet[Library]" = weakref.WeakSet()
_threads_override = 0
_threads_from_env: list[int] = []  # read once, as the kernels' own runtime does


def set_num_threads(n: int) -> None:
    """Run parallel loops on `n` threads, in every loaded kernel library and in
    those loaded later; `n = 0` goes back to DSL_NUM_THREADS / OMP_NUM_THREADS /
    the core count."""
    global _threads_override
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"set_num_threads() needs a count >= 0, got {n!r}")
    _threads_override = n
    for lib in list(_loaded):
        lib.set_num_threads(n)


def num_threads() -> int:
    """The number of threads a kernel's parallel loops run on if called now:
    `set_num_threads`'s count, else the first positive DSL_NUM_THREADS /
    OMP_NUM_THREADS (read once per process, with C's atoi, as the kernels'
    own runtime reads them), else the number of online cores.

        $ DSL_NUM_THREADS=3 OMP_NUM_THREADS=8 python -c "import dsl; print(dsl.num_threads())"
        3

        dsl.set_num_threads(2)
        dsl.num_threads()  # 2
    """
    if _threads_override:
        return _threads_override
    if not _threads_from_env:
        check_environment()
        for var in ("DSL_NUM_THREADS", "OMP_NUM_THREADS"):
            count = _atoi(os.environ.get(var, ""))
            if count > 0:
                _threads_from_env.append(count)
                break
        else:
            _threads_from_env.append(os.cpu_count() or 1)
    return _threads_from_env[0]


def _atoi(text: str) -> int:
    """C's atoi: leading blanks, a sign, digits; 0 when there are none."""
    digits = re.match(r"\s*([+-]?[0-9]+)", text)
    return int(digits[1]) if digits else 0


def check_environment(environ=os.environ) -> None:
    """Warn (once per process) about the variables the kernels' runtime reads
    itself, in C, where a value that means nothing is silently passed over:
    DSL_NUM_THREADS (not a positive count: atoi's prefix, else OMP_NUM_THREADS
    or the core count, is used) and DSL_STREAM_BYTES (not digits only: atoll's
    prefix, else the default, is used)."""
    from .options import warn_once

    threads = environ.get("DSL_NUM_THREADS")
    if threads is not None and threads.strip() and not _is_count(threads, least=1):
        used = _atoi(threads)
        fallback = "OMP_NUM_THREADS" if _atoi(environ.get("OMP_NUM_THREADS", "")) > 0 else "the core count"
        effect = f"read as {used}" if used > 0 else f"ignored, so {fallback} decides"
        warn_once("DSL_NUM_THREADS", threads, f"is not a thread count (a whole number >= 1); {effect}")
    stream = environ.get("DSL_STREAM_BYTES")
    if stream and re.fullmatch(r"[0-9]+", stream) is None:
        digits = re.match(r"[0-9]+", stream)
        effect = f"read as {stream_bytes(environ)} bytes" if digits else "ignored, so the default decides"
        warn_once("DSL_STREAM_BYTES", stream, f"is not a byte count (digits only, e.g. 16777216); {effect}")


def stream_bytes(environ=os.environ) -> int:
    """The output size from which kernels stream their stores, as their
    runtime reads it: DSL_STREAM_BYTES's leading digits (a first digit, then
    atoll), else the default."""
    from .backends.llvm.streaming import STREAM_BYTES

    digits = re.match(r"[0-9]+", environ.get("DSL_STREAM_BYTES", ""))
    return int(digits[0]) if digits else STREAM_BYTES


def _is_count(text: str, least: int) -> bool:
    return re.fullmatch(r"\s*[+]?[0-9]+\s*", text) is not None and int(text) >= least


class Library:
    """The kernels of one shared library, as attributes: `lib.saxpy(...)`."""

    def __init__(self, path):
        self.path = Path(path)
        try:
            self._dll = ctypes.CDLL(str(self.path.resolve()))
        except OSError as exc:
            raise OSError(f"cannot load {self.path}: {exc}") from None
        try:
            meta_fn = getattr(self._dll, "__dsl_metadata")  # getattr: no name mangling
        except AttributeError:
            raise ValueError(f"{self.path} was not built by dslc (it has no __dsl_metadata)") from None
        meta_fn.restype = ctypes.c_char_p
        meta_fn.argtypes = []
        try:
            self.specs = {s.name: s for s in loads(meta_fn().decode())}
        except (ValueError, UnicodeDecodeError, AttributeError) as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        for name in self.specs:
            if self._address(f"{name}__packed") is None:
                raise ValueError(f"{self.path}: its metadata lists kernel '{name}', which it does not export")
        self._callers: dict[str, Caller] = {}
        self._set_threads = self._function("__dsl_set_num_threads", None, [ctypes.c_int32])
        check_environment()  # before any kernel runs and reads those variables in silence
        _loaded.add(self)
        if _threads_override:
            self.set_num_threads(_threads_override)
        has_table = fill_table(self._dll)
        for name, spec in self.specs.items():
            packed = self._address(f"{name}__packed")
            fast = fastcall_function(name, self._address(f"{name}__fastcall")) if has_table else None
            # owner: the library itself, so that a kernel kept without it
            # (`k = dsl.load(path).k`) keeps it in `_loaded` for set_num_threads.
            self._callers[name] = Caller(spec, packed, owner=self, numpy_address=self._address(f"{name}__numpy"),
                                         fastcall=fast)
            # An instance attribute too, unless it would hide a method: found
            # by the ordinary lookup, a call skips __getattr__, which Python
            # reaches only after a failed lookup has raised (~1 us).
            if not hasattr(type(self), name) and name not in self.__dict__:
                self.__dict__[name] = self._callers[name]

    def _function(self, symbol: str, restype, argtypes):
        try:
            fn = getattr(self._dll, symbol)
        except AttributeError:
            return None
        fn.restype, fn.argtypes = restype, argtypes
        return fn

    def set_num_threads(self, n: int) -> None:
        """Thread count for this library's parallel loops (0: from the environment)."""
        if self._set_threads is not None:
            self._set_threads(n)

    def _address(self, symbol: str) -> int | None:
        try:
            return ctypes.cast(getattr(self._dll, symbol), ctypes.c_void_p).value
        except AttributeError:
            return None

    def __getattr__(self, name: str) -> Caller:
        callers = self.__dict__.get("_callers", {})
        if name in callers:
            return callers[name]
        raise AttributeError(f"{self.path.name} has no kernel '{name}' (it has: {', '.join(sorted(callers))})")

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._callers))

    def __repr__(self) -> str:
        return f"<dsl.Library {self.path} kernels={sorted(self._callers)}>"


def load(path) -> Library:
    """Load a `.so` built by `dslc`; its kernels are the attributes of the result."""
    return Library(path)
