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
import sys

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


def foreign_view(value) -> np.ndarray:
    """An ndarray sharing `value`'s memory: through `__dlpack__` (torch, JAX and
    CuPy CPU tensors, any strides) or the buffer protocol (memoryview, bytes,
    array.array). TypeError with the exporter's reason when there is no such
    view: no `__dlpack__` and no buffer, a tensor that requires grad, a dtype
    numpy lacks (bfloat16), memory not on the CPU.

        >>> foreign_view(torch.zeros(3, 4).T).strides        # doctest: +SKIP
        (4, 16)
    """
    if hasattr(value, "__dlpack__"):
        try:
            return np.from_dlpack(value)
        except (TypeError, ValueError, RuntimeError, BufferError) as exc:
            raise TypeError(str(exc)) from None
    memoryview(value)  # TypeError when `value` has no buffer
    return np.asarray(value)


def as_array(kernel: str, p: ParamSpec, value) -> np.ndarray:
    """`value` as an ndarray without copying: ndarrays, `__dlpack__`, buffers."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__dlpack__"):
        try:
            return foreign_view(value)
        except TypeError as exc:
            raise TypeError(f"{kernel}(): parameter '{p.name}': cannot view {describe(value)} as an array: {exc}") from None
    try:
        return foreign_view(value)
    except TypeError:
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects an array of {NUMPY_NAME[p.dtype]}, "
                        f"got {describe(value)}") from None


_F32 = struct.Struct("<f")
_F64 = struct.Struct("<d")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")
_NUMBER = (int, float, np.integer, np.floating)


def check_number(kernel: str, p: ParamSpec, value) -> None:
    """A float parameter takes any number but a bool."""
    if type(value) is not float and (not isinstance(value, _NUMBER) or isinstance(value, (bool, np.bool_))):
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects a number ({p.dtype}), got {describe(value)}")


def _pack_float(kernel: str, p: ParamSpec, value) -> int:
    check_number(kernel, p, value)
    if p.dtype == "f64":
        return _I64.unpack(_F64.pack(float(value)))[0]
    try:
        return _I32.unpack(_F32.pack(value))[0]
    except OverflowError:  # beyond f32's range: round like numpy (to inf)
        return _I32.unpack(_F32.pack(np.float32(value)))[0]


def _pack_bool(kernel: str, p: ParamSpec, value) -> int:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects a bool, got {describe(value)}")
    return int(bool(value))


def _pack_int(kernel: str, p: ParamSpec, value) -> int:
    if not isinstance(value, (int, np.integer)) or isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{kernel}(): parameter '{p.name}' expects an integer ({p.dtype}), got {describe(value)}")
    value = int(value)
    bits = int(p.dtype[1:])
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if p.dtype[0] == "i" else (0, (1 << bits) - 1)
    if not lo <= value <= hi:
        raise OverflowError(f"{kernel}(): parameter '{p.name}': {value} does not fit in {p.dtype}")
    return value - (1 << 64) if value >= 1 << 63 else value


def pack_scalar(kernel: str, p: ParamSpec, value) -> int:
    """The 8-byte slot of a scalar argument (see the packed ABI in backends.llvm)."""
    if p.dtype in ("f32", "f64"):
        return _pack_float(kernel, p, value)
    if p.dtype == "bool":
        return _pack_bool(kernel, p, value)
    return _pack_int(kernel, p, value)


def _numpy_layout_ok() -> bool:
    """Do numpy array objects have the header `__numpy` entry points read?

    Checked once against numpy's own view of a few arrays; if anything differs
    (an exotic build), calls take the slower `__packed` door instead.
    """
    if not hasattr(sys, "getrefcount"):  # not CPython: id() is no address
        return False
    read_only = np.zeros(3, np.float64)
    read_only.setflags(write=False)
    samples = [np.zeros((4, 6), np.float32)[:, ::2], read_only, np.zeros(0, np.int8)]
    for a in samples:
        base = id(a)
        rank = ctypes.c_int.from_address(base + 24).value
        dims = ctypes.cast(ctypes.c_void_p.from_address(base + 32).value, ctypes.POINTER(ctypes.c_int64))
        strides = ctypes.cast(ctypes.c_void_p.from_address(base + 40).value, ctypes.POINTER(ctypes.c_int64))
        flags = ctypes.c_int.from_address(base + 64).value
        if (ctypes.c_void_p.from_address(base + 16).value or 0) != a.ctypes.data or rank != a.ndim:
            return False
        if tuple(dims[k] for k in range(rank)) != a.shape or tuple(strides[k] for k in range(rank)) != a.strides:
            return False
        if bool(flags & 0x0100) != a.flags.aligned or bool(flags & 0x0400) != a.flags.writeable:
            return False
    return True


NUMPY_LAYOUT_OK = _numpy_layout_ok()


def _not_plain(*args) -> int:
    """`Caller.try_fast` where there is no builtin door: always 0, "not done"."""
    return 0


class Caller:
    """A kernel entry point callable with numpy arrays and Python scalars."""

    def __init__(self, spec: KernelSpec, packed_address: int, owner=None, numpy_address: int | None = None,
                 fastcall=None):
        self.spec = spec
        self.name = spec.name
        self._owner = owner  # keeps the code (JIT engine or shared library) alive
        self._params = spec.params
        self._chars = tuple(NUMPY_CHAR[p.dtype] for p in spec.params)
        # Quantized parameters take the packed door: their arrays are block bytes, not their shape.
        self._fast = bool(numpy_address) and NUMPY_LAYOUT_OK and not any(p.quant for p in spec.params)
        if self._fast:
            # One argument per parameter: the array object itself, or a scalar's packed bits.
            argtypes = [ctypes.py_object if p.kind == "tensor" else
                        ctypes.c_double if p.dtype in ("f32", "f64") else ctypes.c_int64 for p in spec.params]
            self._fn = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)(numpy_address)
        else:
            self._fn = PACKED(packed_address)
            self._slots_type = ctypes.c_int64 * max(1, spec.n_slots)
        # The common call: only ndarrays, each of exactly the builtin dtype object
        # numpy gives arrays of that type. One identity test per argument.
        # A float scalar passes as it is when it is a Python float (`want` is float).
        self._plain = self._fast and all(p.kind == "tensor" or p.dtype in ("f32", "f64") for p in spec.params)
        self._wants = tuple(np.dtype(NUMPY_NAME[p.dtype]) if p.kind == "tensor" else float for p in spec.params)
        # The builtin-function door (dsl.fastcall): no ctypes on a plain call.
        self._fastcall = fastcall if self._plain else None
        # The builtin door alone, for callers that cannot spare this method's
        # ~0.2 us (dsl.ops' small matrix products): None when the kernel ran;
        # anything else means "call the Caller", which runs the kernel or
        # raises its error (a refused call has touched no memory).
        self.try_fast = self._fastcall or _not_plain

    def __call__(self, *args, **kwargs):
        if self._fastcall is not None and not kwargs:
            status = self._fastcall(*args)
            if status is None:
                return None
            if status:
                raise self._failure(status, args)
        if self._plain and not kwargs and len(args) == len(self._wants):
            for value, want in zip(args, self._wants):
                if want is float:
                    if type(value) is not float:
                        break
                elif type(value) is not np.ndarray or value.dtype is not want:
                    break
            else:
                status = self._fn(*args)
                if status:
                    raise self._failure(status, args)
                return None
        if kwargs or len(args) != len(self._params):
            args = self._bind(args, kwargs)
        if self._fast:
            return self._call_numpy(args)
        return self._call_packed(args)

    def _call_numpy(self, args) -> None:
        """One argument per parameter: the array object itself (see numpy_entry.py)."""
        values = []  # also keeps converted arrays alive during the call
        for value, p, char in zip(args, self._params, self._chars):
            if p.kind == "scalar":
                if p.dtype in ("f32", "f64"):  # a C double (numpy_entry.py)
                    check_number(self.name, p, value)
                    values.append(float(value))
                else:
                    values.append(pack_scalar(self.name, p, value))
                continue
            if type(value) is not np.ndarray:
                value = as_array(self.name, p, value)
            if value.dtype.char != char or not value.dtype.isnative:
                self._reject(p, value)
            values.append(value)
        status = self._fn(*values)
        if status:
            raise self._failure(status, [v if p.kind == "tensor" else a
                                         for v, a, p in zip(values, args, self._params)])

    def _call_packed(self, args) -> None:
        slots = self._slots_type()
        k = 0
        for value, p, char in zip(args, self._params, self._chars):
            if p.kind == "scalar":
                slots[k] = pack_scalar(self.name, p, value)
                k += 1
                continue
            if p.quant:
                k = self._pack_quant(slots, k, p, value, args)
                continue
            a = value if type(value) is np.ndarray else as_array(self.name, p, value)
            if a.dtype.char != char or not a.dtype.isnative or a.ndim != len(p.dims) or (p.output and not a.flags.writeable) \
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

    def _pack_quant(self, slots, k: int, p: ParamSpec, value, args) -> int:
        """A quantized argument's slots: block data, sizes in values, strides in blocks."""
        from .quant_args import FORMATS, block_strides, blocks_of

        blocks, shape = blocks_of(self.name, p, value, self._params, args)
        rank = len(shape)
        slots[k] = blocks.ctypes.data
        for axis, (size, stride) in enumerate(zip(shape, block_strides(blocks, FORMATS[p.quant].nbytes))):
            slots[k + 1 + axis] = size
            slots[k + 1 + rank + axis] = stride
        return k + 1 + 2 * rank

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
        if not a.dtype.isnative:
            raise TypeError(f"{where} expects {want} in this machine's byte order, got {a.dtype.str}")
        if a.ndim != len(p.dims):
            dims = ", ".join(map(str, p.dims))
            raise ValueError(f"{where} expects {len(p.dims)} dimensions ({p.dtype}[{dims}]), got {a.ndim} "
                             f"(shape {a.shape})")
        if p.output and not a.flags.writeable:
            raise ValueError(f"{where} is written by the kernel, but the array is read-only")
        raise ValueError(f"{where}: the array is not aligned to its element size")

    def _failure(self, status: int, args) -> Exception:
        from .errors import KernelError

        if status < 0:  # an argument the numpy entry point refused
            index, _ = divmod(-status - 1, 4)
            try:
                self._reject(self._params[index], args[index])
            except (TypeError, ValueError) as exc:
                return exc

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
        if check.kind == "memory":
            return MemoryError(message)
        return ValueError(message + (f"; got {shapes}" if shapes else ""))
