"""Run compiled kernels in this process (MCJIT).

    >>> lib = JitLibrary.from_object(obj, host_target())     # doctest: +SKIP
    >>> fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(lib.address("k__packed"))
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import sys

import llvmlite.binding as llvm

from .errors import BackendError
from .llvm.runtime import GOMP_PARALLEL
from .optimize import prepare
from .target import Target, host_target, new_target_machine


class JitLibrary:
    """Machine code loaded into this process; alive as long as this object is."""

    def __init__(self, engine: llvm.ExecutionEngine, keep: tuple = ()):
        self._engine = engine
        self._keep = keep  # objects LLVM reads from while the engine lives

    @classmethod
    def from_module(cls, ref: llvm.ModuleRef, target: Target) -> "JitLibrary":
        """JIT-compile an (optimized) module; the engine takes ownership of `ref`."""
        _check_host(target)
        _load_libm()
        prepare(ref, target)
        uses_gomp = any(f.name == GOMP_PARALLEL for f in ref.functions)
        engine = _engine(ref, target)
        _add_gomp(engine, target, uses_gomp)
        engine.finalize_object()
        return cls(engine)

    @classmethod
    def from_object(cls, obj: bytes, target: Target) -> "JitLibrary":
        """Load a relocatable object produced by `emit_object` (the on-disk cache)."""
        _check_host(target)
        _load_libm()
        empty = llvm.parse_assembly("")
        prepare(empty, target)
        engine = _engine(empty, target)
        _add_gomp(engine, target, GOMP_PARALLEL.encode() in obj)
        object_file = llvm.ObjectFileRef.from_data(obj)
        engine.add_object_file(object_file)
        engine.finalize_object()
        return cls(engine, keep=(object_file,))

    def address(self, symbol: str) -> int:
        """The address of function `symbol`; BackendError if it does not exist."""
        addr = self._engine.get_function_address(symbol)
        if not addr:
            raise BackendError(f"symbol {symbol!r} is not defined by this library")
        return addr


def _engine(ref: llvm.ModuleRef, target: Target) -> llvm.ExecutionEngine:
    """An MCJIT engine (which owns and frees its TargetMachine: a fresh one).

    The code is small-code-model PIC: its text reaches its constants with
    32-bit PC-relative offsets. LLVM's section memory manager maps text and
    data next to each other (each mapping is placed near the previous one), so
    they stay within that range. llvmlite's own memory manager (use_lmm) would
    guarantee it but aborts on x86 objects that need PLT stubs (calls to erff).
    """
    return llvm.create_mcjit_compiler(ref, new_target_machine(target, 3, jit=True))


def _check_host(target: Target) -> None:
    if target.arch != host_target().arch:
        raise BackendError(f"cannot run {target.triple} code on this {host_target().arch} machine")


@functools.cache
def _load_libm() -> None:
    """Make libm (erff, tanhf, ...) visible to the JIT's symbol resolver.

    Usually libm is in the process already; loading it by name makes sure.
    """
    for name in ("libm.so.6", "libm.dylib"):
        if _load(name):
            return
    found = ctypes.util.find_library("m")  # slow (runs ldconfig): last resort
    if found:
        _load(found)


def _load(name: str) -> bool:
    try:
        llvm.load_library_permanently(name)
    except RuntimeError:
        return False
    return True


# What a library linked without libgomp gets: a team of one. MCJIT cannot leave
# a weak symbol null (a failed lookup leaves *every* external call unresolved),
# so when libgomp is missing the JIT defines these instead.
_SERIAL_GOMP = """
define void @GOMP_parallel(ptr %fn, ptr %data, i32 %n, i32 %flags) {
  call void %fn(ptr %data)
  ret void
}
define i32 @omp_get_thread_num() {
  ret i32 0
}
define i32 @omp_get_num_threads() {
  ret i32 1
}
define i32 @omp_in_parallel() {
  ret i32 0
}
"""


def _add_gomp(engine: llvm.ExecutionEngine, target: Target, needed: bool) -> None:
    """Make the GOMP symbols of parallel loops resolvable: libgomp, else a serial stand-in."""
    if not needed or _load_gomp():
        return
    _warn_serial()
    stub = llvm.parse_assembly(_SERIAL_GOMP)
    prepare(stub, target)
    engine.add_module(stub)


@functools.cache
def _load_gomp() -> bool:
    """Load libgomp into the process, visible to the JIT's symbol resolver."""
    return any(_load(name) for name in ("libgomp.so.1", "libgomp.so", "libgomp.1.dylib"))


@functools.cache
def _warn_serial() -> None:
    print("dslc: libgomp not found; parallel loops run on one thread", file=sys.stderr)
