"""The kernel-level nodes of the IR: parameters, the check table, options,
kernels and programs. Part of `lowering.ir`, which re-exports them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from dsl.grammar.diagnostics import Span

from .types import ScalarType

if TYPE_CHECKING:
    from .ir import Stmt, Sym


@dataclass(frozen=True, eq=False, slots=True)
class TensorParam:
    """A tensor parameter: dtype, one dim per axis (a dim `Sym` or an int).

    `scratch` marks a buffer a transform allocates (`Alloc`), not a parameter:
    rank 1, unit stride, owned by the kernel. `local` marks (with `scratch`) a
    local array the source declares (`LocalArray`): int dims, row-major. `quant` (a `lowering.quant.Quantized`)
    marks a block-quantized parameter (u8 blocks; dims count values), which is
    only read through `view`s: tensors that are a field of its blocks
    (`lowering.quant.BlockView`), not parameters either.
    """

    name: str
    dtype: ScalarType
    dims: tuple[Sym | int, ...]
    is_output: bool
    span: Span | None = None
    scratch: bool = False
    local: bool = False
    quant: object | None = None
    view: object | None = None

    @property
    def rank(self) -> int:
        return len(self.dims)

    def __repr__(self) -> str:
        return f"TensorParam({self.name})"


@dataclass(frozen=True, slots=True)
class ScalarParam:
    sym: Sym
    span: Span | None = None

    @property
    def name(self) -> str:
        return self.sym.name

    @property
    def dtype(self) -> ScalarType:
        return self.sym.type


Param = TensorParam | ScalarParam


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """What a failed `Check` means: `kind` is 'shape', 'overlap', 'bounds' or 'memory'."""

    kind: str
    message: str
    span: Span | None = None
    tensors: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class KernelOptions:
    """Per-kernel compile options from the source (`@options(...)`)."""

    reassociate: bool = False  # allow reordering float reductions
    inplace: bool = False  # outputs may alias inputs elementwise
    contract: bool = True  # allow fusing a*b+c into one FMA (False: every op rounds, as in C without FMA)


@dataclass(frozen=True, slots=True)
class Kernel:
    """A kernel: parameters, the dims they introduce, and a body.

    `dims` are bound at entry from the first tensor axis that names them
    (`lowering.loops` emits those `Assign`s and the `Check`s that the others agree).
    `checks` is the table behind every `Check.code`.
    """

    name: str
    params: tuple[Param, ...]
    dims: tuple[Sym, ...]
    body: tuple[Stmt, ...]
    options: KernelOptions = KernelOptions()
    checks: tuple[CheckInfo, ...] = ()
    doc: str | None = None
    span: Span | None = None
    schedule: tuple = ()  # `lowering.schedule.Directive`s, applied after lowering
    auto_schedule: bool = True  # no @schedule at all: the automatic one (`@schedule()`: none)

    def tensor(self, name: str) -> TensorParam:
        return next(p for p in self.params if isinstance(p, TensorParam) and p.name == name)

    @property
    def tensors(self) -> tuple[TensorParam, ...]:
        return tuple(p for p in self.params if isinstance(p, TensorParam))


@dataclass(frozen=True, slots=True)
class Program:
    """The kernels of one compile, with the names of the sources they came from."""

    kernels: tuple[Kernel, ...]
    sources: tuple[str, ...] = ()
