"""Calling every kernel of a library on small random arguments, whatever its
signature (from the library's own metadata): what the memcheck run and the
guard-page tests share.

    >>> for name, args in calls(lib, sizes=(1, 7)): getattr(lib, name)(*args)   # doctest: +SKIP

`place(array, output)` decides where each array lives (a guarded page, say)
and may return a view of it (reversed, transposed); the values do not change.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent.parent
NUMPY = {"f16": np.float16, "f32": np.float32, "f64": np.float64, "i8": np.int8, "i16": np.int16,
         "i32": np.int32, "i64": np.int64, "u8": np.uint8, "u16": np.uint16, "u32": np.uint32,
         "u64": np.uint64, "bool": np.bool_}


def kernel_files() -> list[Path]:
    """The example kernels and whatever standard-library kernels exist."""
    return sorted(ROOT.glob("examples/*.tk")) + sorted(ROOT.glob("stdlib/*.tk"))


def build(path: Path, out_dir: Path, cpu: str | None = None) -> Path:
    """`path` compiled for this machine (or `cpu`) into `out_dir`."""
    from dsl.backends.link import link_shared
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_file

    job = compile_file(path, CompileOptions(cpu=cpu), stop_after="obj")
    return link_shared(job.obj, out_dir / f"{path.stem}.so", job.target)


def _values(rng, dtype, shape) -> np.ndarray:
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)


MAX_ELEMENTS = 1 << 20


def _fitting(spec, size: int) -> int:
    """`size`, lowered until no tensor of `spec` exceeds MAX_ELEMENTS (a conv's
    7-d window at size 33 would take hundreds of GiB)."""
    while size > 1:
        largest = max((int(np.prod([d if isinstance(d, int) else size for d in p.dims], dtype=np.int64))
                       for p in spec.params if p.kind == "tensor"), default=0)
        if largest <= MAX_ELEMENTS:
            break
        size -= 1
    return size


def arguments(spec, size: int, rng, place=None) -> list:
    """Arguments for kernel `spec` with every named dim of size `size` (or less,
    for kernels whose tensors would be too large)."""
    size = _fitting(spec, size)
    args = []
    for p in spec.params:
        dtype = NUMPY[p.dtype]
        if p.kind == "scalar":
            args.append(_values(rng, dtype, ()).item())
            continue
        shape = tuple(d if isinstance(d, int) else size for d in p.dims)
        values = _values(rng, dtype, shape) if not p.output else np.zeros(shape, dtype)
        args.append(values if place is None else place(values, p.output))
    return args


def calls(lib, sizes=(1, 3, 7, 17), seed: int = 0, place=None):
    """(kernel name, arguments) for every kernel of `lib` at every size."""
    rng = np.random.default_rng(seed)
    for name, spec in sorted(lib.specs.items()):
        for size in sizes:
            yield name, arguments(spec, size, rng, place)
