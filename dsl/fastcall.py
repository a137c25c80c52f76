"""Kernels as builtin functions: the `name__fastcall` entry (a CPython
METH_FASTCALL function, `backends/llvm/fastcall_entry.py`) wrapped with
`PyCFunction_NewEx`, so a plain call crosses no ctypes layer.

    fn = fastcall_function(dll, "saxpy", address)     # None if not possible here
    fn(2.0, x, y, out)    # None: done; 0: not a plain call; k != 0: kernel status k

`LAYOUT_OK` checks once per process that the object headers the entry reads
are where it expects them; if not (another Python implementation, a debug
build), no fastcall function is made and calls take the ctypes path.
"""

from __future__ import annotations

import ctypes

import numpy as np

from dsl.backends.llvm.fastcall_entry import (DESCR_OFFSET, DTYPE_CODES, DTYPES_AT, FLOAT, FLOAT_VALUE_OFFSET,
                                              INCREF, LONG_FROM, NDARRAY, NONE, RESTORE_THREAD, SAVE_THREAD,
                                              TABLE_SIZE, TABLE_SYMBOL, TYPE_OFFSET)

from .call import NUMPY_NAME

METH_FASTCALL = 0x0080
_API = ("PyCFunction_NewEx", "PyLong_FromLongLong", "Py_IncRef", "PyEval_SaveThread", "PyEval_RestoreThread")


class _MethodDef(ctypes.Structure):
    _fields_ = [("ml_name", ctypes.c_char_p), ("ml_meth", ctypes.c_void_p),
                ("ml_flags", ctypes.c_int), ("ml_doc", ctypes.c_char_p)]


def _layout_ok() -> bool:
    try:
        api = ctypes.pythonapi
    except AttributeError:
        return False
    if not all(hasattr(api, f) for f in _API):
        return False
    value = 1.25
    array = np.zeros(3, np.float32)
    return (ctypes.c_void_p.from_address(id(value) + TYPE_OFFSET).value == id(float)
            and ctypes.c_double.from_address(id(value) + FLOAT_VALUE_OFFSET).value == value
            and ctypes.c_void_p.from_address(id(array) + TYPE_OFFSET).value == id(np.ndarray)
            and ctypes.c_void_p.from_address(id(array) + DESCR_OFFSET).value == id(array.dtype))


LAYOUT_OK = _layout_ok()


def _table_values() -> list[int]:
    api = ctypes.pythonapi
    values = [0] * TABLE_SIZE
    values[NONE], values[NDARRAY], values[FLOAT] = id(None), id(np.ndarray), id(float)
    values[LONG_FROM] = ctypes.cast(api.PyLong_FromLongLong, ctypes.c_void_p).value
    values[INCREF] = ctypes.cast(api.Py_IncRef, ctypes.c_void_p).value
    values[SAVE_THREAD] = ctypes.cast(api.PyEval_SaveThread, ctypes.c_void_p).value
    values[RESTORE_THREAD] = ctypes.cast(api.PyEval_RestoreThread, ctypes.c_void_p).value
    for k, code in enumerate(DTYPE_CODES):
        values[DTYPES_AT + k] = id(np.dtype(NUMPY_NAME[code]))  # numpy's builtin dtype singletons
    return values


def fill_table(dll) -> bool:
    """Give the library the addresses its fastcall entries compare with and call."""
    try:
        table = (ctypes.c_int64 * TABLE_SIZE).in_dll(dll, TABLE_SYMBOL)
    except ValueError:
        return False
    table[:] = _table_values()
    return True


_new_function = None
_defs: list = []  # method definitions must outlive their function objects


def fastcall_function(name: str, address: int | None):
    """A builtin function calling the entry at `address`, or None."""
    global _new_function
    if not (LAYOUT_OK and address):
        return None
    if _new_function is None:
        _new_function = ctypes.pythonapi.PyCFunction_NewEx
        _new_function.restype = ctypes.py_object
        _new_function.argtypes = [ctypes.POINTER(_MethodDef), ctypes.py_object, ctypes.py_object]
    method = _MethodDef(name.encode(), address, METH_FASTCALL, None)
    _defs.append(method)
    return _new_function(ctypes.byref(method), None, None)
