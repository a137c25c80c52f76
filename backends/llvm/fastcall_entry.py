"""`PyObject* name__fastcall(PyObject* self, PyObject* const* args, Py_ssize_t n)`:
the kernel as a CPython METH_FASTCALL function, for calls with no ctypes at all.

`dsl.fastcall` wraps it in a builtin function object. It takes the common call
only: exactly one argument per parameter, each tensor an `ndarray` of exactly
the kernel's dtype (numpy's builtin dtype object), each float scalar a Python
`float`; anything else makes it return `0` untouched, and the caller takes the
general path. Otherwise it calls `name__numpy` and returns `None` (status 0) or
the status as an int, which Python turns into the exception.

It reads CPython's object header (`ob_type` at 8, a float's value at 16) and
numpy's (`descr` at 56): `dsl.fastcall` checks those offsets once per process.
The addresses it compares with (the `ndarray` and `float` types, each dtype
object, `None`) and the C-API functions it calls (`PyLong_FromLongLong`,
`Py_IncRef`, `PyEval_SaveThread`, `PyEval_RestoreThread`) come from `__dsl_py_table`, which the loader fills before any call,
so the library has no link-time dependency on Python: C programs load it as is.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel, ScalarParam

from .ltypes import I32, I64, PTR, int_const
from .signature import new_function

FASTCALL_SUFFIX = "__fastcall"
TABLE_SYMBOL = "__dsl_py_table"
# Slots of the table (dsl.fastcall fills them in this order).
NONE, NDARRAY, FLOAT, LONG_FROM, INCREF, SAVE_THREAD, RESTORE_THREAD, DTYPES_AT = range(8)
DTYPE_CODES = ("f16", "f32", "f64", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "bool")
TABLE_SIZE = DTYPES_AT + len(DTYPE_CODES)
TYPE_OFFSET, FLOAT_VALUE_OFFSET, DESCR_OFFSET = 8, 16, 56
DOUBLE = ir.DoubleType()


def fastcall_supported(kernel: Kernel) -> bool:
    """Tensors and float scalars only (Python ints have no stable layout)."""
    return all(not isinstance(p, ScalarParam) or p.dtype.is_float for p in kernel.params)


def define_fastcall_entry(module: ir.Module, kernel: Kernel, numpy_entry: ir.Function) -> None:
    table = _table(module)
    fn = new_function(module, ir.FunctionType(PTR, [PTR, PTR, I64]), kernel.name + FASTCALL_SUFFIX)
    fn.attributes.add("nounwind")
    _, args, nargs = fn.args
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    retry = fn.append_basic_block("retry")
    slot = lambda k: _load(bld, table, 8 * k, I64)  # noqa: E731
    _branch_unless(bld, bld.icmp_signed("==", nargs, int_const(I64, len(kernel.params))), retry)
    values = []
    for index, param in enumerate(kernel.params):
        obj = _load(bld, args, 8 * index, PTR)
        obj_type = _load(bld, obj, TYPE_OFFSET, I64)
        if isinstance(param, ScalarParam):
            _branch_unless(bld, bld.icmp_unsigned("==", obj_type, slot(FLOAT)), retry)
            values.append(_load(bld, obj, FLOAT_VALUE_OFFSET, DOUBLE))
            continue
        _branch_unless(bld, bld.icmp_unsigned("==", obj_type, slot(NDARRAY)), retry)
        descr = _load(bld, obj, DESCR_OFFSET, I64)
        want = slot(DTYPES_AT + DTYPE_CODES.index(param.dtype.name))
        _branch_unless(bld, bld.icmp_unsigned("==", descr, want), retry)
        values.append(bld.ptrtoint(obj, I64))
    # The kernel runs without the GIL, as under ctypes: other Python threads go on.
    state = _call(bld, slot(SAVE_THREAD), PTR, [])
    status = bld.call(numpy_entry, values)
    _call(bld, slot(RESTORE_THREAD), None, [state])
    failed = fn.append_basic_block("failed")
    ok = fn.append_basic_block("ok")
    bld.cbranch(bld.icmp_signed("==", status, int_const(I32, 0)), ok, failed)
    bld.position_at_end(ok)
    none = bld.inttoptr(slot(NONE), PTR)
    _call(bld, slot(INCREF), None, [none])
    bld.ret(none)
    bld.position_at_end(failed)
    bld.ret(_call(bld, slot(LONG_FROM), PTR, [bld.sext(status, I64)]))
    bld.position_at_end(retry)
    bld.ret(_call(bld, slot(LONG_FROM), PTR, [int_const(I64, 0)]))


def _table(module: ir.Module) -> ir.GlobalVariable:
    if TABLE_SYMBOL in module.globals:
        return module.globals[TABLE_SYMBOL]
    table = ir.GlobalVariable(module, ir.ArrayType(I64, TABLE_SIZE), TABLE_SYMBOL)
    table.initializer = ir.Constant(ir.ArrayType(I64, TABLE_SIZE), [0] * TABLE_SIZE)
    table.align = 8
    return table


def _load(bld: ir.IRBuilder, base: ir.Value, offset: int, typ: ir.Type) -> ir.Value:
    ptr = bld.gep(base, [int_const(I64, offset)], inbounds=True, source_etype=ir.IntType(8))
    return bld.load(ptr, typ=typ, align=8)


def _call(bld: ir.IRBuilder, address: ir.Value, ret: ir.Type | None, args: list[ir.Value]) -> ir.Value:
    """Call the C function at `address` (an i64) with `args`."""
    fnty = ir.FunctionType(ret or ir.VoidType(), [a.type for a in args])
    return bld.call(bld.inttoptr(address, fnty.as_pointer()), args)


def _branch_unless(bld: ir.IRBuilder, ok: ir.Value, otherwise: ir.Block) -> None:
    good = bld.function.append_basic_block("ok")
    bld.cbranch(ok, good, otherwise)
    bld.position_at_end(good)
