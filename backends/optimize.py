"""Verify, optimize and emit LLVM modules (llvmlite's new pass manager).

    >>> ref = verify_llvm(build_module(kernels, t, "{}", module_name="m"))  # doctest: +SKIP
    >>> optimize(ref, t, 3)                                                  # doctest: +SKIP
    >>> obj = emit_object(ref, t, 3)                                         # doctest: +SKIP
"""

from __future__ import annotations

import threading

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .errors import BackendError
from .target import Target, _init_llvm, target_machine

# A TargetMachine is shared per (target, opt); LLVM does not promise it can run
# two code generations at once.
_codegen_lock = threading.Lock()


def verify_llvm(module: str | ir.Module) -> llvm.ModuleRef:
    """Parse `module` (llvmlite.ir or LLVM IR text) and run the verifier.

    Raises BackendError with LLVM's message when the IR is malformed.
    """
    _init_llvm(cross=False)
    text = module if isinstance(module, str) else str(module)
    try:
        ref = llvm.parse_assembly(text)
        ref.verify()
    except RuntimeError as err:
        raise BackendError(f"invalid LLVM IR: {err}") from None
    return ref


def prepare(ref: llvm.ModuleRef, target: Target) -> llvm.TargetMachine:
    """Give `ref` the target's triple and data layout; return the codegen machine."""
    tm = target_machine(target, 2)
    ref.triple = tm.triple
    ref.data_layout = str(tm.target_data)
    return tm


def optimize(ref: llvm.ModuleRef, target: Target, opt_level: int) -> None:
    """Run LLVM's default O0..O3 pipeline on `ref` in place.

    From O2 up the loop and SLP vectorizers are on (SLP is off by default in
    llvmlite's tuning options).
    """
    if not 0 <= opt_level <= 3:
        raise ValueError(f"opt_level must be 0..3, got {opt_level}")
    prepare(ref, target)
    tm = target_machine(target, opt_level)
    pto = llvm.create_pipeline_tuning_options(speed_level=opt_level)
    vectorize = opt_level >= 2
    pto.loop_vectorization = vectorize
    pto.slp_vectorization = vectorize
    with _codegen_lock:
        builder = llvm.create_pass_builder(tm, pto)
        builder.getModulePassManager().run(ref, builder)


def emit_asm(ref: llvm.ModuleRef, target: Target, opt_level: int) -> str:
    """Assembly text of `ref` for `target`."""
    prepare(ref, target)
    with _codegen_lock:
        return target_machine(target, opt_level).emit_assembly(ref)


def emit_object(ref: llvm.ModuleRef, target: Target, opt_level: int) -> bytes:
    """An ELF (or the target's) relocatable object file for `ref`."""
    prepare(ref, target)
    with _codegen_lock:
        return target_machine(target, opt_level).emit_object(ref)


def compile_text(text: str, target: Target, opt_level: int) -> bytes:
    """Parse, verify, optimize and emit LLVM IR `text`: its object file
    (BackendError when the IR is malformed)."""
    ref = verify_llvm(text)
    optimize(ref, target, opt_level)
    return emit_object(ref, target, opt_level)
