"""The vector nodes of the loop IR: values with lanes, which only the
transforms make (`vectorize`, `transpose_loads`, the micro-kernel). Part of
`lowering.ir`, which re-exports them; `lowering.vector.lanes_of` counts lanes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsl.grammar.diagnostics import Span

from .types import I64, ScalarType

if TYPE_CHECKING:
    from .ir import Expr


@dataclass(frozen=True, slots=True)
class Ramp:
    """The i64 vector (base, base + stride, ..., base + (lanes - 1) * stride)."""

    base: "Expr"
    stride: int
    lanes: int
    span: Span | None = None
    type: ScalarType = I64


@dataclass(frozen=True, slots=True)
class Broadcast:
    """A scalar repeated in every lane."""

    value: "Expr"
    lanes: int
    span: Span | None = None

    @property
    def type(self) -> ScalarType:
        return self.value.type


@dataclass(frozen=True, slots=True)
class HReduce:
    """The lanes of a vector combined with `op` (+, *, min, max) into a scalar."""

    op: str
    value: "Expr"
    type: ScalarType
    span: Span | None = None


@dataclass(frozen=True, slots=True)
class Shuffle:
    """Lanes picked from two vectors of one lane count n: lane l of the result
    is lane mask[l] of `a` (mask[l] < n) or lane mask[l] - n of `b` (LLVM's
    shufflevector). Made by transforms (transpose_loads), not by the language."""

    a: "Expr"
    b: "Expr"
    mask: tuple[int, ...]
    span: Span | None = None

    @property
    def type(self) -> ScalarType:
        return self.a.type
