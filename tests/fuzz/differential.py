"""Differential testing: a random well-typed kernel with a random valid
schedule, compiled for this machine, against the reference interpreter
(`dsl.lowering.interpret.run_kernel`) running the unscheduled loop IR, on
random inputs.

    >>> run_case({"seed": 12})       # doctest: +SKIP
    {'kind': 'agree', 'detail': 'k3: split(i4, 3), parallel(i4.outer)'}

Integer programs (`ProgramGen(exact=True)`: integer and bool values only) must
agree bit for bit. Float programs are `smooth` (no comparisons of floats, no
float-to-int casts, no floor or transcendental functions), so the only
differences are FMA contraction and, under `reassociate`, the order of sums:
they must agree within FLOAT_TOLERANCE (relative to 1 + |reference|; f16
outputs within F16_TOLERANCE, as one rounding to f16 may flip), NaN
matching NaN.

A schedule is one to four directives drawn from split, tile, reorder, unroll,
fuse, parallel, vectorize and hoist over the loops the kernel has (after the
directives before it); one the compiler refuses (a located diagnostic) is
dropped. One case in five keeps the automatic schedule, one in ten runs as
written (`@schedule()`).
"""

from __future__ import annotations

import random
import tempfile
from pathlib import Path

import numpy as np

from gen_programs import ProgramGen

FLOAT_TOLERANCE = 1e-3
F16_TOLERANCE = 4e-3


def loop_names(kernel) -> list[str]:
    from dsl.lowering import ir
    from dsl.lowering.rewrite import walk_stmts

    return [s.name for s in walk_stmts(kernel.body) if isinstance(s, ir.For) and s.name]


def _directive(rng: random.Random, names: list[str]) -> str | None:
    if not names:
        return None
    a = rng.choice(names)
    kind = rng.choice(("split", "split", "tile", "reorder", "unroll", "fuse", "parallel", "vectorize",
                       "vectorize", "hoist"))
    if kind == "split":
        return f"split({a}, {rng.choice((2, 3, 4, 8))}{rng.choice(('', ', tail=mask', ', tail=peel'))})"
    if kind == "vectorize":
        return f"vectorize({a}{rng.choice(('', ', 4', ', 8', ', 16'))}{rng.choice(('', ', tail=mask'))})"
    if kind == "unroll":
        return f"unroll({a}{rng.choice(('', ', 2', ', 4'))})"
    if kind in ("parallel", "hoist"):
        return f"{kind}({a})"
    b = rng.choice(names)
    if kind == "tile":
        return f"tile({a}, {b}, {rng.choice((2, 4))}, {rng.choice((2, 8))})"
    return f"{kind}({a}, {b})"


def _with_schedule(text: str, kernel: str, directives: list[str]) -> str:
    return text.replace(f"def {kernel}(", f"@schedule({', '.join(directives)})\ndef {kernel}(", 1)


def schedule(rng: random.Random, text: str, kernel) -> tuple[str, str]:
    """`text` with a random valid schedule on `kernel`; (text, description)."""
    from dsl.errors import InternalError
    from dsl.grammar.diagnostics import CompileError, Source
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_source

    roll = rng.random()
    if roll < 0.2:
        return text, "automatic schedule"
    if roll < 0.3:
        return _with_schedule(text, kernel.name, []), "@schedule()"
    kept: list[str] = []
    names = loop_names(kernel)
    for _ in range(rng.randint(1, 4)):
        directive = _directive(rng, names)
        if directive is None:
            break
        candidate = _with_schedule(text, kernel.name, kept + [directive])
        try:
            job = compile_source(Source("d.tk", candidate), CompileOptions(), stop_after="schedule")
        except CompileError:
            continue  # refused, with a located diagnostic: not this one
        except InternalError as err:
            err.program = candidate  # the bug's program, for the report to keep
            raise
        kept.append(directive)
        names = loop_names(job.program.kernels[-1])
    return _with_schedule(text, kernel.name, kept), ", ".join(kept) or "@schedule()"


def inputs(rng: random.Random, kernel) -> dict:
    """Random arguments by parameter name: dims of size 1..7."""
    from dsl.lowering import ir

    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    sizes = {d.name: rng.randint(1, 7) for d in kernel.dims}
    args = {}
    for p in kernel.params:
        dtype = np.dtype(p.dtype.numpy_name)
        if isinstance(p, ir.TensorParam):
            shape = tuple(d if isinstance(d, int) else sizes[d.name] for d in p.dims)
            args[p.name] = _values(np_rng, dtype, shape)
        else:
            args[p.name] = _values(np_rng, dtype, ()).item()
    return args


def _values(np_rng, dtype: np.dtype, shape: tuple) -> np.ndarray:
    if dtype.kind == "f":
        return np_rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return np_rng.integers(0, 2, shape).astype(dtype)
    info = np.iinfo(dtype)
    if np_rng.random() < 0.5:  # small values too, so divisions and shifts do something
        return np_rng.integers(-8 if info.min < 0 else 0, 9, shape).astype(dtype)
    return np_rng.integers(info.min, info.max, shape, dtype=dtype, endpoint=True)


def compare(kernel, expected: dict, actual: dict) -> str | None:
    """Why the outputs differ, or None."""
    for p in kernel.params:
        if not hasattr(p, "dims"):
            continue
        want, got = expected[p.name], actual[p.name]
        if want.dtype.kind in "iub":
            if not np.array_equal(want, got):
                return f"{p.name}: expected {want.ravel()[:8]}, got {got.ravel()[:8]}"
            continue
        tol = F16_TOLERANCE if want.dtype == np.float16 else FLOAT_TOLERANCE
        w, g = want.astype(np.float64), got.astype(np.float64)
        same = (np.abs(w - g) <= tol * (1 + np.abs(w))) | (np.isnan(w) & np.isnan(g)) | (w == g)
        if not same.all():
            bad = np.argwhere(~same)[0]
            return f"{p.name}{tuple(bad)}: expected {w[tuple(bad)]!r}, got {g[tuple(bad)]!r}"
    return None


def run_case(job: dict) -> dict:
    """One differential case from `job["seed"]`: {"kind": "agree" | "mismatch" | "bug", ...}."""
    from dsl.errors import InternalError
    from dsl.grammar.diagnostics import CompileError, Source
    from dsl.lowering.interpret import run_kernel
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_source

    rng = random.Random(job["seed"])
    exact = rng.random() < 0.6
    program = ProgramGen(rng, exact=exact, smooth=not exact).program(kernels=1)
    try:
        plain = compile_source(Source("d.tk", program.text), CompileOptions(), stop_after="loops")
    except CompileError as err:
        return {"kind": "bug", "detail": f"generated program rejected: {err.render()}", "text": program.text}
    kernel = plain.program.kernels[-1]
    try:
        text, described = schedule(rng, program.text, kernel)
    except InternalError as err:
        return {"kind": "bug", "detail": str(err), "text": getattr(err, "program", program.text)}
    result = {"detail": f"{kernel.name}: {described}", "text": text}
    expected = inputs(rng, kernel)
    actual = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in expected.items()}
    run_kernel(kernel, expected)
    try:
        lib = _build(text)
    except InternalError as err:
        return {**result, "kind": "bug", "detail": f"{result['detail']}: {err}"}
    getattr(lib, kernel.name)(*[actual[p.name] for p in kernel.params])
    why = compare(kernel, expected, actual)
    if why is not None:
        return {**result, "kind": "mismatch", "detail": f"{result['detail']}: {why}"}
    return {**result, "kind": "agree"}


def _build(text: str):
    import dsl
    from dsl.backends.link import link_shared
    from dsl.grammar.diagnostics import Source
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_source

    job = compile_source(Source("d.tk", text), CompileOptions(), stop_after="obj")
    path = Path(tempfile.mkdtemp(prefix="dslc-diff-")) / "d.so"
    return dsl.load(link_shared(job.obj, path, job.target))
