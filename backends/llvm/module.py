"""The entry point of the LLVM back-end: loop-IR kernels -> one llvmlite module."""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel

from ..target import Target, target_machine
from .context import FunctionContext
from .ltypes import I32
from .numpy_entry import define_numpy_entry
from .signature import bind_arguments, declare_kernel, define_metadata, define_packed
from .stmts import emit_block


def build_module(kernels: list[Kernel], target: Target, metadata: str, *,
                 module_name: str) -> ir.Module:
    """Compile loop-IR `kernels` into one LLVM module for `target`.

    Each kernel `k` becomes `int32_t k(...)` and `int32_t k__packed(const int64_t*)`;
    the module also exports `const char* __dsl_metadata(void)` returning `metadata`.

    >>> mod = build_module([saxpy], host_target(), "{}", module_name="m")   # doctest: +SKIP
    >>> str(mod).count("define")                                            # doctest: +SKIP
    3
    """
    module = ir.Module(name=module_name)
    module.triple = target.triple
    module.data_layout = str(target_machine(target, 2).target_data)
    for kernel in kernels:
        func = declare_kernel(module, kernel)
        _define_body(func, kernel)
        define_packed(module, kernel, func)
        define_numpy_entry(module, kernel, func)
    define_metadata(module, metadata)
    return module


def _define_body(func: ir.Function, kernel: Kernel) -> None:
    cx = FunctionContext(func, kernel)
    bind_arguments(cx)
    emit_block(cx, kernel.body)
    cx.builder.ret(ir.Constant(I32, 0))
    cx.finish()
