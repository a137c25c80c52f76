"""Two versions of every kernel body, chosen at entry.

Strides are runtime values, so a loop over `x[i]` reads `x + i*stride` and LLVM
cannot use vector loads. The exported function therefore checks once whether
every tensor's innermost stride is 1 (the common, contiguous case) and calls a
copy of the body compiled with those strides as the constant 1; otherwise the
general copy runs. Both are internal; callers see one symbol.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel

from .ltypes import I64, int_const
from .signature import new_function


def internal_copy(module: ir.Module, func: ir.Function, suffix: str) -> ir.Function:
    """A private function with `func`'s signature and argument attributes."""
    copy = new_function(module, func.ftype, func.name + suffix)
    copy.linkage = "internal"
    copy.attributes.add("nounwind")
    for src, dst in zip(func.args, copy.args, strict=True):
        dst.name = src.name
        for attr in src.attributes:
            dst.add_attribute(attr)
    return copy


def define_dispatch(func: ir.Function, kernel: Kernel, unit: ir.Function, general: ir.Function,
                    inner_strides: list[int]) -> None:
    """`func` calls `unit` when all the given stride arguments are 1, else `general`."""
    bld = ir.IRBuilder(func.append_basic_block("entry"))
    one = int_const(I64, 1)
    ok = None
    for index in inner_strides:
        is_one = bld.icmp_signed("==", func.args[index], one)
        ok = is_one if ok is None else bld.and_(ok, is_one)
    fast = func.append_basic_block("unit_strides")
    slow = func.append_basic_block("any_strides")
    bld.cbranch(ok, fast, slow)
    for block, target in ((fast, unit), (slow, general)):
        bld.position_at_end(block)
        bld.ret(bld.call(target, list(func.args)))
