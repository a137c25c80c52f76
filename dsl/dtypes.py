"""Names a Python module needs to write kernel annotations: `f32[N, K]`.

Python 3.11 evaluates annotations when the `def` runs, so `f32`, `N` and `K` must
exist. The compiler never looks at these objects (it reads the function's source);
they only have to evaluate. Any capitalised name can be imported from `dsl` as a
dim (`from dsl import f32, M, N, K`), or made with `dsl.dims("Batch Seq")`.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsl.lowering.quant import FORMATS
from dsl.lowering.types import ALL_TYPES


@dataclass(frozen=True)
class Dim:
    """A symbolic dimension name used in annotations, e.g. `N` in `f32[N]`."""

    name: str

    def __repr__(self) -> str:
        return self.name


@dataclass(frozen=True)
class TensorAnnotation:
    dtype: "DType"
    dims: tuple

    def __repr__(self) -> str:
        return f"{self.dtype.name}[{', '.join(map(repr, self.dims))}]"


@dataclass(frozen=True)
class DType:
    """A scalar type of the language (`dsl.f32`); `dsl.f32[M, N]` is a tensor type."""

    name: str

    def __getitem__(self, dims) -> TensorAnnotation:
        return TensorAnnotation(self, dims if isinstance(dims, tuple) else (dims,))

    def __repr__(self) -> str:
        return self.name

    def __call__(self, value):
        raise TypeError(f"dsl.{self.name}(...) is a cast inside kernels; it cannot be called from Python")


DTYPES = {t.name: DType(t.name) for t in ALL_TYPES}
DTYPES.update({name: DType(name) for name in FORMATS})  # quantized tensor types: `q4_k[N, K]`


def dims(names: str) -> tuple[Dim, ...]:
    """`B, S = dsl.dims("B S")`: symbolic dims for annotations.

    >>> dims("Batch Seq")
    (Batch, Seq)
    """
    return tuple(Dim(n) for n in names.replace(",", " ").split())


def is_dim_name(name: str) -> bool:
    return name[:1].isupper() and name.isidentifier()
