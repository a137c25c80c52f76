"""What a caller needs to know about a compiled kernel, as JSON.

The same description travels inside every `.so` (returned by its exported
`__dsl_metadata()`), in the compile cache, and in memory for the JIT, so `dsl.load`
and `@dsl.kernel` check arguments and explain failures the same way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from dsl.lowering import ir

FORMAT_VERSION = 1


@dataclass(frozen=True)
class ParamSpec:
    name: str
    kind: str  # 'tensor' or 'scalar'
    dtype: str  # a type name of the language: f32, i64, ...
    dims: tuple  # per axis: a dim name or an int (tensors only)
    output: bool = False
    quant: str | None = None  # a quantized tensor's format ('q4_k'): dtype u8, dims in values


@dataclass(frozen=True)
class CheckSpec:
    kind: str  # 'shape', 'overlap' or 'bounds'
    message: str
    tensors: tuple[str, ...]
    location: str  # file:line:col of the construct checked, or ''


@dataclass(frozen=True)
class KernelSpec:
    name: str
    params: tuple[ParamSpec, ...]
    checks: tuple[CheckSpec, ...]
    inplace: bool = False
    doc: str | None = None

    @property
    def n_slots(self) -> int:
        """How many 8-byte argument slots the packed entry point takes."""
        return sum(1 + 2 * len(p.dims) if p.kind == "tensor" else 1 for p in self.params)


def kernel_spec(kernel: ir.Kernel) -> KernelSpec:
    params = []
    for p in kernel.params:
        if isinstance(p, ir.TensorParam):
            dims = tuple(d if isinstance(d, int) else d.name for d in p.dims)
            quant = p.quant.fmt.name if p.quant is not None else None
            params.append(ParamSpec(p.name, "tensor", p.dtype.name, dims, p.is_output, quant))
        else:
            params.append(ParamSpec(p.name, "scalar", p.dtype.name, ()))
    checks = tuple(CheckSpec(c.kind, c.message, c.tensors, c.span.location if c.span else "")
                   for c in kernel.checks)
    return KernelSpec(kernel.name, tuple(params), checks, kernel.options.inplace, kernel.doc)


def program_metadata(program: ir.Program) -> str:
    return dumps([kernel_spec(k) for k in program.kernels])


def dumps(specs: list[KernelSpec]) -> str:
    data = {"format": FORMAT_VERSION, "kernels": [_spec_dict(s) for s in specs]}
    return json.dumps(data, separators=(",", ":"))


def _spec_dict(s: KernelSpec) -> dict:
    return {
        "name": s.name, "doc": s.doc, "inplace": s.inplace,
        "params": [{"name": p.name, "kind": p.kind, "dtype": p.dtype, "dims": list(p.dims), "output": p.output,
                    **({"quant": p.quant} if p.quant else {})} for p in s.params],
        "checks": [{"kind": c.kind, "message": c.message, "tensors": list(c.tensors), "location": c.location}
                   for c in s.checks],
    }


def loads(text: str) -> list[KernelSpec]:
    """Kernel specs from metadata text; a `ValueError` for anything malformed
    (a library is checked before any of its code is called)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"kernel metadata is not valid JSON ({exc})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT_VERSION:
        found = data.get("format") if isinstance(data, dict) else None
        raise ValueError(f"kernel metadata format {found} is not supported (expected {FORMAT_VERSION})")
    try:
        return [_kernel(k) for k in data["kernels"]]
    except (KeyError, TypeError, AssertionError) as exc:
        raise ValueError(f"kernel metadata is malformed ({type(exc).__name__}: {exc})") from None


def _kernel(k: dict) -> KernelSpec:
    from dsl.lowering.quant import FORMATS
    from dsl.lowering.types import BY_NAME

    assert isinstance(k["name"], str) and k["name"].isidentifier(), "kernel name"
    params = []
    for p in k["params"]:
        assert p["kind"] in ("tensor", "scalar") and p["dtype"] in BY_NAME, f"parameter {p.get('name')!r}"
        assert all(isinstance(d, str) or (isinstance(d, int) and d >= 0) for d in p["dims"]), "dims"
        assert p["kind"] == "tensor" or not p["dims"], "a scalar with dims"
        quant = p.get("quant")
        assert quant is None or (quant in FORMATS and p["kind"] == "tensor"), f"parameter {p.get('name')!r}"
        params.append(ParamSpec(str(p["name"]), p["kind"], p["dtype"], tuple(p["dims"]), bool(p["output"]), quant))
    checks = tuple(CheckSpec(str(c["kind"]), str(c["message"]), tuple(map(str, c["tensors"])), str(c["location"]))
                   for c in k["checks"])
    return KernelSpec(k["name"], tuple(params), checks, bool(k["inplace"]), k["doc"])
