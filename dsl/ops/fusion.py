"""`dsl.ops.fused`: a chain of elementwise ops as one pass over memory.

    y = dsl.ops.fused("silu(a) * b + c", a=gate, b=up, c=bias[None, :])
    dsl.ops.fused("x * 0.5 + y", x=x, y=1.0, out=x)

The expression (see `fused_expr.FUNCTIONS`) becomes a kernel in the language,
calling the math helpers of `stdlib/mathfn.tk`, compiled once per expression
and kind of operands (array or number) through the disk cache, as the
standard library is. Operands broadcast as in numpy (stride-0 views, never
copies); arrays must be float32, numbers become float32 scalars.
"""

from __future__ import annotations

import tempfile
import threading
from functools import lru_cache
from pathlib import Path

import numpy as np

from dsl import options as options_mod
from dsl.cache import DiskCache, make_key
from dsl.library import Library

from . import _layout as L
from .fused_expr import Expression, parse_expression
from .library import stdlib_path

__all__ = ["fused"]

_SCHEDULE_1 = "@schedule(split(i, 16384, tail=peel), parallel(i.outer), vectorize(i.inner, 16, tail=peel))"
_libraries: dict[str, Library] = {}  # by kernel source
_by_call: dict[tuple[str, tuple[bool, ...]], Library] = {}  # by (expression text, operand kinds)
_lock = threading.Lock()


def fused(expression: str, /, *, out=None, **operands):
    """Evaluate `expression` elementwise over the operands in one pass.

    Functions: exp log tanh erf sigmoid silu gelu gelu_tanh relu sqrt abs
    maximum minimum; operators + - * / and unary minus; finite number
    constants. Every name in the expression must be an operand, and every
    operand used:

        >>> dsl.ops.fused("gelu(x + b) * 2", x=np.ones((2, 3), np.float32), b=np.zeros(3, np.float32))

    Mistakes (unknown function or name, unsupported syntax) raise ValueError
    with a caret under the place in the expression.
    """
    expr = _parse(expression)
    _check_names(expr, operands)
    values = [_operand(name, operands[name]) for name in expr.names]
    arrays = {n: v for n, v in zip(expr.names, values) if isinstance(v, np.ndarray)}
    shapes = {a.shape for a in arrays.values()}
    shape = shapes.pop() if len(shapes) == 1 else L.broadcast_shape("fused", arrays)  # () when all are numbers
    result = L.output("fused", out, shape)
    if result.size == 0:
        return result
    kinds = tuple(isinstance(v, np.ndarray) for v in values)
    inputs = list(arrays.values())
    flat = L.flat_views(inputs, result)
    if flat is not None:
        _call(_library(expr, kinds).fused_1, values, flat)
        return result
    inputs = L.broadcast_inputs(inputs, result)
    rank, calls = L.rank_views(result.shape, [*inputs, result])
    fn = getattr(_library(expr, kinds), f"fused_{rank}")
    for views in calls:
        _call(fn, values, views)
    return result


@lru_cache(maxsize=256)
def _parse(expression: str) -> Expression:
    return parse_expression(expression)


def _check_names(expr: Expression, operands: dict) -> None:
    missing = [n for n in expr.names if n not in operands]
    if missing:
        given = ", ".join(operands) or "none"
        raise ValueError(expr.pointing_at(missing[0], f"'{missing[0]}' is not an operand (given: {given})"))
    unused = [n for n in operands if n not in expr.names]
    if unused:
        raise ValueError(f"dsl.ops.fused: operand '{unused[0]}' does not appear in the expression {expr.text!r}")


def _operand(name: str, value):
    """A Python number as a float, anything else as a float32 array."""
    if L.is_scalar(value):
        return float(value)
    return L.as_f32_array("fused", name, value)


def _call(fn, values: list, views: list[np.ndarray]) -> None:
    """Call `fn` with the numbers in their places and the array views in order, out last."""
    arrays = iter(views[:-1])
    fn(*[next(arrays) if isinstance(v, np.ndarray) else v for v in values], views[-1])


def kernel_source(expr: Expression, kinds: tuple[bool, ...]) -> str:
    """The `.tk` text of `fused_1` (rank 1, contiguous, 16 lanes on all threads,
    as stdlib/pointwise.tk) and `fused_3` (any strides, automatic schedule).

        >>> print(kernel_source(parse_expression("a * b"), (True, False)))   # doctest: +SKIP
    """
    lines = []
    mathfn = [h for h in expr.helpers() if h != "relu_f32"]
    if mathfn:
        lines += [f"from mathfn import {', '.join(mathfn)}", ""]
    if "relu_f32" in expr.helpers():
        lines += ["def relu_f32(x: f32) -> f32:", "    return 0.0 if x < 0.0 else x", ""]
    for rank, dims, index in ((1, "N", "i"), (3, "A, B, C", "a, b, c")):
        params = [f"v{k}: f32[{dims}]" if is_array else f"v{k}: f32" for k, is_array in enumerate(kinds)]
        names = {n: (f"v{k}[{index}]" if is_array else f"v{k}") for k, (n, is_array) in
                 enumerate(zip(expr.names, kinds))}
        lines += ["@options(inplace=True)", *([_SCHEDULE_1] if rank == 1 else []),
                  f"def fused_{rank}({', '.join(params)}, out: f32[{dims}]):",
                  f"    out[{index}] = {expr.to_tk(names)}", ""]
    return "\n".join(lines)


def _library(expr: Expression, kinds: tuple[bool, ...]) -> Library:
    known = _by_call.get((expr.text, kinds))  # ~25 us less a call than building the text
    if known is not None:
        return known
    source = kernel_source(expr, kinds)
    with _lock:
        if source not in _libraries:
            _libraries[source] = Library(_build_cached(source))
        _by_call[(expr.text, kinds)] = _libraries[source]
        return _libraries[source]


def _build_cached(source: str) -> Path:
    opts = options_mod.from_env(None)
    from dsl.backends.target import make_target

    target = make_target(opts.triple, opts.cpu, opts.features)
    mathfn = stdlib_path("mathfn")
    key = make_key(kind="fused", sources=[("fused.tk", source), (mathfn.name, mathfn.read_text())],
                   target=target.key(), options=opts.cache_key_part())
    if not opts.use_cache:
        return _build(source, opts, Path(tempfile.mkdtemp(prefix="dslc-")) / "fused.so")
    cache = DiskCache(options_mod.default_cache_dir(opts))
    return cache.get_or_build(key, lambda path: _build(source, opts, path))


def _build(source: str, opts: options_mod.CompileOptions, path: Path) -> Path:
    from dsl.backends.link import link_shared
    from dsl.grammar.diagnostics import Source
    from dsl.pipeline import compile_source

    job = compile_source(Source("fused.tk", source), opts, stop_after="so", base_dir=stdlib_path("mathfn").parent)
    return link_shared(job.objects, path, job.target)
