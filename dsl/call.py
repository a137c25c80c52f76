"""Calling a compiled kernel from Python: check the arguments, pack them, call.

The checks made here are the ones only Python can make (is it an array, of the
right dtype and rank, is an output writable). Sizes, aliasing and bounds are
checked by the kernel's own entry code, which returns a status; a nonzero status
becomes the `ValueError` or `IndexError` that names the kernel and parameter. No
element is read or written before those checks pass.
"""

from __future__ import annotations

import ctypes
import struct

import numpy as np

from .metadata import KernelSpec, ParamSpec

NUMPY_CHAR = {"f16": "e", "f32": "f", "f64": "d", "i8": "b", "i16": "h", "i32": "i", "i64": "l",
              "u8": "B", "u16": "H", "u32": "I", "u64": "L", "bool": "?"}
NUMPY_NAME = {"f16": "float16", "f32": "float32", "f64": "float64", "i8": "int8", "i16": "int16",
              "i32": "int32", "i64": "int64", "u8": "uint8", "u16": "uint16", "u32": "uint32",
              "u64": "uint64", "bool": "bool"}
PACKED = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)


def describe(value) -> str:
    if isinstance(value, np.ndarray):
        return f"array of {value.dtype} with shape {value.shape}"
    return type(value).__name__


def as_array(kernel: str, p: ParamSpec, value) -> np.ndarray:
    """`value` as an ndarray without copying: ndarrays, `__dlpack__`, buffers."""
    if type(value) is np.ndarray:
        return value
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (TypeError, RuntimeError, BufferError) as exc:
            raise TypeError(f"{kernel}(): parameter '{p.name}': cannot view {describe(value)} as an array: {exc}") from None
    try:
        memoryview(value)
    except TypeError:
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects an array of {NUMPY_NAME[p.dtype]}, "
                        f"got {describe(value)}") from None
    return np.asarray(value)


def pack_scalar(kernel: str, p: ParamSpec, value) -> int:
    """The 8-byte slot of a scalar argument (see the packed ABI in backends.llvm)."""
    t = p.dtype
    if t == "bool":
        if not isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{kernel}(): parameter '{p.name}' expects a bool, got {describe(value)}")
        return int(bool(value))
    if t in ("f32", "f64"):
        if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
            raise TypeError(f"{kernel}(): parameter '{p.name}' expects a number ({t}), got {describe(value)}")
        if t == "f64":
            return struct.unpack("<q", struct.pack("<d", float(value)))[0]
        return struct.unpack("<i", struct.pack("<f", np.float32(value)))[0]
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects an integer ({t}), got {describe(value)}")
    value = int(value)
    bits = int(t[1:])
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if t[0] == "i" else (0, (1 << bits) - 1)
    if not lo <= value <= hi:
        raise OverflowError(f"{kernel}(): parameter '{p.name}': {value} does not fit in {t}")
    return value - (1 << 64) if value >= 1 << 63 else value


class Caller:
    """A kernel entry point callable with numpy arrays and Python scalars."""

    def __init__(self, spec: KernelSpec, packed_address: int, owner=None):
        self.spec = spec
        self.name = spec.name
        self._fn = PACKED(packed_address)
        self._owner = owner  # keeps the code (JIT engine or shared library) alive
        self._params = spec.params
        self._n_slots = spec.n_slots
        self._slots_type = ctypes.c_int64 * max(1, self._n_slots)
        self._chars = tuple(NUMPY_CHAR[p.dtype] for p in spec.params)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self._params):
            args = self._bind(args, kwargs)
        slots = self._slots_type()
        k = 0
        for value, p, char in zip(args, self._params, self._chars):
            if p.kind == "scalar":
                slots[k] = pack_scalar(self.name, p, value)
                k += 1
                continue
            a = value if type(value) is np.ndarray else as_array(self.name, p, value)
            if a.dtype.char != char or a.ndim != len(p.dims) or (p.output and not a.flags.writeable) \
                    or not a.flags.aligned:
                self._reject(p, a)
            slots[k] = a.ctypes.data
            size = a.itemsize
            rank = a.ndim
            for axis in range(rank):
                slots[k + 1 + axis] = a.shape[axis]
                slots[k + 1 + rank + axis] = a.strides[axis] // size
            k += 1 + 2 * rank
        status = self._fn(slots)
        if status:
            raise self._failure(status, args)

    def _bind(self, args, kwargs) -> tuple:
        names = [p.name for p in self._params]
        if len(args) > len(names):
            raise TypeError(f"{self.name}() takes {len(names)} arguments but {len(args)} were given")
        bound = dict(zip(names, args))
        for key, value in kwargs.items():
            if key not in names:
                raise TypeError(f"{self.name}() got an unexpected keyword argument '{key}'")
            if key in bound:
                raise TypeError(f"{self.name}() got multiple values for argument '{key}'")
            bound[key] = value
        missing = [n for n in names if n not in bound]
        if missing:
            raise TypeError(f"{self.name}() missing {len(missing)} required argument(s): "
                            + ", ".join(f"'{m}'" for m in missing))
        return tuple(bound[n] for n in names)

    def _reject(self, p: ParamSpec, a: np.ndarray):
        where = f"{self.name}(): parameter '{p.name}'"
        want = NUMPY_NAME[p.dtype]
        if a.dtype.char != NUMPY_CHAR[p.dtype]:
            raise TypeError(f"{where} expects an array of {want}, got an array of {a.dtype}")
        if a.ndim != len(p.dims):
            dims = ", ".join(map(str, p.dims))
            raise ValueError(f"{where} expects {len(p.dims)} dimensions ({p.dtype}[{dims}]), got {a.ndim} "
                             f"(shape {a.shape})")
        if p.output and not a.flags.writeable:
            raise ValueError(f"{where} is written by the kernel, but the array is read-only")
        raise ValueError(f"{where}: the array is not aligned to its element size")

    def _failure(self, status: int, args) -> Exception:
        from .errors import KernelError

        checks = self.spec.checks
        if not 0 < status <= len(checks):
            return KernelError(f"{self.name}(): kernel returned unknown status {status}")
        check = checks[status - 1]
        shapes = ", ".join(f"{p.name}.shape={tuple(np.shape(v))}" for p, v in zip(self._params, args)
                           if p.kind == "tensor" and p.name in check.tensors)
        where = f" ({check.location})" if check.location else ""
        message = f"{self.name}(): {check.message}{where}"
        if check.kind == "bounds":
            return IndexError(message + (f"; {shapes}" if shapes else ""))
        return ValueError(message + (f"; got {shapes}" if shapes else ""))
