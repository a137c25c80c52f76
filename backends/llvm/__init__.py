"""LLVM code generation for the loop IR (llvmlite.ir only; no IR text templates).

    module.py     build_module: kernels -> llvmlite.ir.Module
    signature.py  exported functions: kernel, name__packed, __dsl_metadata
    abi.py        the C argument layout, as plain data
    stmts.py      loops, ifs, stores, checks
    exprs.py      expressions; arith.py / mathops.py / memory.py the operators
    vectors.py    vector values (vectorize): splats, ramps, horizontal reductions
    vector_memory.py  vector loads and stores: contiguous, masked, gather/scatter
"""

from .abi import CArg, c_args, c_type, slot_value
from .module import build_module

__all__ = ["CArg", "build_module", "c_args", "c_type", "slot_value"]
