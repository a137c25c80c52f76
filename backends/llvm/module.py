"""The entry point of the LLVM back-end: loop-IR kernels -> one llvmlite module."""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel
from dsl.lowering.unit_strides import fold_unit_strides

from ..target import Target, target_machine
from .context import FunctionContext
from .ltypes import I32
from .abi import c_args
from .fastcall_entry import define_fastcall_entry, fastcall_supported
from .numpy_entry import define_numpy_entry
from .runtime import NUM_THREADS_FN, define_thread_setter
from .versions import define_dispatch, internal_copy
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
    # AVX without AVX-512's mask registers: masked loads by lane signs (vector_memory.py)
    sign_masks = target.arch == "x86_64" and target.vector_bits == 256
    for kernel in kernels:
        func = declare_kernel(module, kernel)
        _define_versions(module, func, kernel, sign_masks)
        define_packed(module, kernel, func)
        if any(t.quant is not None for t in kernel.tensors):
            continue  # numpy's shape of block bytes is not the kernel's: the packed door only
        numpy_entry = define_numpy_entry(module, kernel, func)
        if fastcall_supported(kernel):
            define_fastcall_entry(module, kernel, numpy_entry)
    define_metadata(module, metadata)
    if NUM_THREADS_FN in module.globals:  # only modules with parallel loops have threads to set
        define_thread_setter(module)
    _keep_copy_loops(module)
    return module


# LLVM's loop-idiom pass turns a loop that copies a row into a call of the C
# library's memcpy, whose choice of method is its own: glibc on Zen 4 copied
# the 2 KiB rows of a permutation at 8 GB/s, the vectorized loop at 15.
_NO_LIBRARY_COPIES = frozenset({'"no-builtin-memcpy"', '"no-builtin-memmove"'})


class _KernelAttributes(ir.FunctionAttributes):
    _known = ir.FunctionAttributes._known | _NO_LIBRARY_COPIES


def _keep_copy_loops(module: ir.Module) -> None:
    """Every function defined here keeps its copy loops as loops."""
    for fn in module.functions:
        if fn.is_declaration:
            continue
        attrs = _KernelAttributes([*fn.attributes, *_NO_LIBRARY_COPIES])
        attrs.alignstack, attrs.personality = fn.attributes.alignstack, fn.attributes.personality
        fn.attributes = attrs


def _define_versions(module: ir.Module, func: ir.Function, kernel: Kernel, sign_masks: bool) -> None:
    """The body once for contiguous innermost axes and once in general (versions.py)."""
    args = c_args(kernel)
    inner = [k for k, a in enumerate(args) if a.kind == "stride" and a.axis == a.param.rank - 1]
    if not inner:  # no strides at all: every one there is (none) is 1
        _define_body(func, kernel, (False, True), sign_masks)
        return
    unit = internal_copy(module, func, "__unit")
    general = internal_copy(module, func, "__any")
    _define_body(unit, kernel, (True, True), sign_masks)
    _define_body(general, kernel, (False, False), sign_masks)
    define_dispatch(func, kernel, unit, general, inner)


def _define_body(func: ir.Function, kernel: Kernel, unit: tuple[bool, bool], sign_masks: bool) -> None:
    """`func`'s body. `unit`: (unit_inner, unit_strides); with unit_inner,
    innermost strides the constant 1; unit_strides is the value of the
    kernel's `UnitStrides()` in it. `sign_masks`: see FunctionContext."""
    unit_inner, unit_strides = unit
    cx = FunctionContext(func, kernel, fold_unit_strides(kernel.body, unit_strides), sign_masks)
    bind_arguments(cx)
    if unit_inner:
        for t in cx.tensors.values():
            if t.strides and t.param.view is None:  # a view's innermost stride is its own
                t.strides[-1] = ir.Constant(t.strides[-1].type, 1)
    emit_block(cx, cx.body)
    cx.return_status(ir.Constant(I32, 0))
    cx.finish()
