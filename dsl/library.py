"""`dsl.load("kernels.so")`: the kernels of a shared library built by `dslc`.

The library describes itself (its exported `__dsl_metadata()`), so the returned
object checks arguments exactly as `@dsl.kernel` does.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

from .call import Caller
from .metadata import loads


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
        self.specs = {s.name: s for s in loads(meta_fn().decode())}
        self._callers: dict[str, Caller] = {}
        for name, spec in self.specs.items():
            packed = self._address(f"{name}__packed")
            self._callers[name] = Caller(spec, packed, owner=self._dll, numpy_address=self._address(f"{name}__numpy"))

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
