"""`int32_t name__numpy(int64_t slot0, int64_t slot1, ...)`: the fast door for Python.

One argument per parameter, so ctypes passes them straight from its call (a
ctypes array of slots would cost more than the call itself: 0.8 us). A
tensor's slot holds the address of a numpy array object (ctypes `py_object`,
`id(array)` in CPython), whose header this function reads directly: data pointer, rank, sizes,
byte strides and flags, at the offsets of numpy's `PyArrayObject_fields`
(stable across numpy 1.x and 2.x on LP64). `dsl.call` verifies those offsets
once per process and uses `name__packed` instead if they ever differ. A float
scalar arrives as a C double (ctypes converts a Python float itself; an f32
parameter is rounded here); any other scalar's slot is packed as for
`name__packed`.

Besides the kernel's own status codes, it returns a negative code for a problem
Python then explains: -(1 + 4*p + r) for parameter p with r = 0 wrong rank,
1 not aligned to its element size, 2 an output that is read-only.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel, ScalarParam

from .ltypes import I32, I64, PTR, int_const
from .signature import _from_slot, arg_type, new_function
from .abi import c_args

NUMPY_SUFFIX = "__numpy"
DOUBLE = ir.DoubleType()
DATA_OFFSET, ND_OFFSET, DIMS_OFFSET, STRIDES_OFFSET, FLAGS_OFFSET = 16, 24, 32, 40, 64
ALIGNED, WRITEABLE = 0x0100, 0x0400


def define_numpy_entry(module: ir.Module, kernel: Kernel, func: ir.Function) -> ir.Function:
    slots = [DOUBLE if _is_float(p) else I64 for p in kernel.params]
    wrapper = new_function(module, ir.FunctionType(I32, slots), kernel.name + NUMPY_SUFFIX)
    wrapper.attributes.add("nounwind")
    bld = ir.IRBuilder(wrapper.append_basic_block("entry"))
    types = [arg_type(a) for a in c_args(kernel)]
    values: list[ir.Value] = []
    for index, param in enumerate(kernel.params):
        raw = wrapper.args[index]
        raw.name = param.name
        if _is_float(param):  # rounds to f32 to nearest even, as numpy does
            values.append(raw if param.dtype.bits == 64 else bld.fptrunc(raw, ir.FloatType()))
            continue
        if isinstance(param, ScalarParam):
            values.append(_from_slot(bld, raw, types[len(values)]))
            continue
        values += _tensor_args(bld, wrapper, raw, param, index)
    bld.ret(bld.call(func, values))
    return wrapper


def _is_float(param) -> bool:
    return isinstance(param, ScalarParam) and param.dtype.is_float


def _load(bld: ir.IRBuilder, base: ir.Value, index: int, typ: ir.Type) -> ir.Value:
    ptr = bld.gep(base, [int_const(I64, index)], inbounds=True, source_etype=typ)
    return bld.load(ptr, typ=typ, align=8 if typ is not I32 else 4)


def _field(bld: ir.IRBuilder, obj: ir.Value, offset: int, typ: ir.Type) -> ir.Value:
    ptr = bld.gep(obj, [int_const(I64, offset)], inbounds=True, source_etype=ir.IntType(8))
    return bld.load(ptr, typ=typ, align=4 if typ is I32 else 8)


def _tensor_args(bld, wrapper, raw, param, index) -> list[ir.Value]:
    obj = bld.inttoptr(raw, PTR)
    rank = _field(bld, obj, ND_OFFSET, I32)
    _fail_unless(bld, wrapper, bld.icmp_signed("==", rank, int_const(I32, param.rank)), index, 0)
    flags = _field(bld, obj, FLAGS_OFFSET, I32)
    _fail_unless(bld, wrapper, _has(bld, flags, ALIGNED), index, 1)
    if param.is_output:
        _fail_unless(bld, wrapper, _has(bld, flags, WRITEABLE), index, 2)
    data = _field(bld, obj, DATA_OFFSET, PTR)
    dims = _field(bld, obj, DIMS_OFFSET, PTR)
    strides = _field(bld, obj, STRIDES_OFFSET, PTR)
    sizes = [_load(bld, dims, k, I64) for k in range(param.rank)]
    # Aligned arrays have byte strides divisible by the element size.
    shift = int_const(I64, param.dtype.itemsize.bit_length() - 1)
    elems = [bld.ashr(_load(bld, strides, k, I64), shift) for k in range(param.rank)]
    return [data, *sizes, *elems]


def _has(bld: ir.IRBuilder, flags: ir.Value, bit: int) -> ir.Value:
    return bld.icmp_unsigned("!=", bld.and_(flags, int_const(I32, bit)), int_const(I32, 0))


def _fail_unless(bld: ir.IRBuilder, wrapper: ir.Function, ok: ir.Value, index: int, reason: int) -> None:
    bad = wrapper.append_basic_block(f"bad{index}_{reason}")
    good = wrapper.append_basic_block(f"ok{index}_{reason}")
    bld.cbranch(ok, good, bad)
    bld.position_at_end(bad)
    bld.ret(int_const(I32, -(1 + 4 * index + reason)))
    bld.position_at_end(good)
