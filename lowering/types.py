"""Scalar types of the language and the rules for mixing them.

Implicit conversions only widen without loss (i8 -> i32, f32 -> f64, u8 -> f32, ...).
Anything that could lose precision (i64 -> f64, f64 -> f32, i32 -> f32) needs an
explicit cast such as `f32(x)`. `f16` is a storage type: a load from an `f16`
tensor gives an `f32`, and a store converts back.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ScalarType:
    """`kind` is 'f' (float), 'i' (signed), 'u' (unsigned) or 'b' (bool)."""

    name: str
    kind: str
    bits: int

    def __repr__(self) -> str:
        return self.name

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind == "i"

    @property
    def is_bool(self) -> bool:
        return self.kind == "b"

    @property
    def itemsize(self) -> int:
        """Bytes per element in memory (bool takes a byte, as in numpy)."""
        return max(1, self.bits // 8)

    @property
    def numpy_name(self) -> str:
        if self.kind == "b":
            return "bool"
        letter = {"f": "float", "i": "int", "u": "uint"}[self.kind]
        return f"{letter}{self.bits}"

    @property
    def c_name(self) -> str:
        if self.kind == "b":
            return "bool"
        if self.kind == "f":
            return {16: "uint16_t", 32: "float", 64: "double"}[self.bits]
        return f"{'u' if self.kind == 'u' else ''}int{self.bits}_t"


F16 = ScalarType("f16", "f", 16)
F32 = ScalarType("f32", "f", 32)
F64 = ScalarType("f64", "f", 64)
I8 = ScalarType("i8", "i", 8)
I16 = ScalarType("i16", "i", 16)
I32 = ScalarType("i32", "i", 32)
I64 = ScalarType("i64", "i", 64)
U8 = ScalarType("u8", "u", 8)
U16 = ScalarType("u16", "u", 16)
U32 = ScalarType("u32", "u", 32)
U64 = ScalarType("u64", "u", 64)
BOOL = ScalarType("bool", "b", 1)

ALL_TYPES = (F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL)
BY_NAME = {t.name: t for t in ALL_TYPES}
STORAGE_ONLY = (F16,)


def value_type(storage: ScalarType) -> ScalarType:
    """The type a loaded element has in expressions (f16 computes as f32)."""
    return F32 if storage == F16 else storage


def widens_to(src: ScalarType, dst: ScalarType) -> bool:
    """True when every value of `src` is exactly representable in `dst`."""
    if src == dst:
        return True
    if src.is_bool:
        return True
    if dst.is_bool:
        return False
    if src.is_float:
        return dst.is_float and dst.bits > src.bits
    if dst.is_float:
        mantissa = {16: 11, 32: 24, 64: 53}[dst.bits]
        return src.bits - (1 if src.is_signed else 0) <= mantissa
    if src.is_signed:
        return dst.is_signed and dst.bits > src.bits
    return dst.bits > src.bits if dst.is_signed else dst.bits >= src.bits


def common_type(a: ScalarType, b: ScalarType) -> ScalarType | None:
    """The smallest type both widen to without loss, or None if there is none."""
    if a == b:
        return a
    candidates = [t for t in ALL_TYPES if t not in STORAGE_ONLY and not t.is_bool]
    fits = [t for t in candidates if widens_to(a, t) and widens_to(b, t)]
    if not fits:
        return None
    return min(fits, key=lambda t: (t.bits, t.is_float))
