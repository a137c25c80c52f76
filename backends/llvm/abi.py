"""The C ABI of a compiled kernel, as plain data (no LLVM here).

For each kernel `name` the library exports `int32_t name(...)` whose arguments,
in parameter order, are: for a tensor `x` of rank r, its data pointer, then r
int64 sizes `x_size0..`, then r int64 element strides `x_stride0..`; for a
scalar, its value (bool as uint8_t). It returns 0, or k+1 when check k failed.

`name__packed(const int64_t* args)` takes the same arguments, one 8-byte slot
each (see `slot_value`). The LLVM side (`signature.py`), the C header and the
Python caller all read the layout from `c_args`.

    >>> [a.name for a in c_args(saxpy)]           # doctest: +SKIP
    ['a', 'x', 'x_size0', 'x_stride0', 'y', 'y_size0', 'y_stride0']
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from dsl.lowering.ir import Kernel, Param, ScalarParam, TensorParam
from dsl.lowering.types import ScalarType

PACKED_SUFFIX = "__packed"
METADATA_SYMBOL = "__dsl_metadata"


@dataclass(frozen=True)
class CArg:
    """One C argument: `kind` is 'data', 'size', 'stride' or 'scalar'."""

    name: str
    kind: str
    param: Param
    axis: int | None = None

    @property
    def dtype(self) -> ScalarType:
        """The element type (data) or value type (scalar); sizes/strides are int64."""
        return self.param.dtype


def c_args(kernel: Kernel) -> list[CArg]:
    """The C arguments of `kernel`, in order (one packed slot each)."""
    args: list[CArg] = []
    for param in kernel.params:
        if isinstance(param, ScalarParam):
            args.append(CArg(param.name, "scalar", param))
            continue
        args.append(CArg(param.name, "data", param))
        args += [CArg(f"{param.name}_size{k}", "size", param, k) for k in range(param.rank)]
        args += [CArg(f"{param.name}_stride{k}", "stride", param, k) for k in range(param.rank)]
    return args


def c_scalar_type(dtype: ScalarType) -> str:
    """The C type of a scalar argument or tensor element (f16 as uint16_t, bool as uint8_t)."""
    if dtype.is_bool:
        return "uint8_t"
    return dtype.c_name


def c_type(arg: CArg) -> str:
    """The C type of one argument: `const float*`, `int64_t`, `uint8_t`, ..."""
    if arg.kind in ("size", "stride"):
        return "int64_t"
    if arg.kind == "scalar":
        return c_scalar_type(arg.dtype)
    assert isinstance(arg.param, TensorParam)
    const = "" if arg.param.is_output else "const "
    return f"{const}{c_scalar_type(arg.dtype)}*"


def slot_value(arg: CArg, value: int | float | bool) -> int:
    """The int64 stored in `arg`'s packed slot for `value` (a pointer is an int).

    >>> slot_value(CArg("a", "scalar", ScalarParam(Sym("a", F32, "scalar"))), 1.0)  # doctest: +SKIP
    1065353216
    """
    if arg.kind != "scalar":
        return _signed64(int(value))
    dtype = arg.dtype
    if dtype.is_float:
        fmt = "<f" if dtype.bits == 32 else "<d"
        raw = struct.pack(fmt, float(value)).ljust(8, b"\0")
        return struct.unpack("<q", raw)[0]
    if dtype.is_bool:
        return int(bool(value))
    bits = dtype.bits
    v = int(value) & ((1 << bits) - 1)
    if dtype.is_signed and v >= 1 << (bits - 1):
        v -= 1 << bits
    return _signed64(v)


def _signed64(v: int) -> int:
    v &= (1 << 64) - 1
    return v - (1 << 64) if v >= 1 << 63 else v
