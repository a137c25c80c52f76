"""The reference interpreter: the executable definition of docs/semantics.md.

    >>> run_kernel(saxpy, {"alpha": 2.0, "x": x, "y": y, "out": out})  # doctest: +SKIP

It runs loop IR, and kernel IR too: index notation and reductions are evaluated
directly, after the entry prologue `lowering.loops` would add. The IR is compiled
once into Python closures (`interpret_compile.py`), cached by kernel identity;
scalar semantics live in `interpret_ops.py`.

Beyond the document, the interpreter defines what compiled code leaves to the
`guard` pass or to luck: an element access outside [0, size) on any axis raises
`IndexError`, and reading a local before any assignment raises
`UnboundLocalError`.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from . import interpret_ops as ops
from . import ir
from .interpret_compile import UNSET, CheckFailed, Compiled, Compiler, EnvView
from .prologue import entry_prologue
from .quant_arrays import field_array, logical_shape, quant_blocks
from .rewrite import stmt_exprs, walk_expr, walk_stmts

__all__ = ["run_kernel", "CheckFailed", "EnvView"]

_CACHE_SIZE = 64
_cache: dict[int, tuple[ir.Kernel, Compiled]] = {}


def run_kernel(kernel: ir.Kernel, args: dict[str, object], trace=None) -> None:
    """Run `kernel` on numpy arrays (tensors) and scalars, given by parameter name.

    Outputs are written in place. Raises `CheckFailed` when a `Check` fails,
    `IndexError` on an out-of-bounds element access, `TypeError` (or
    `OverflowError` for an integer scalar that does not fit) on bad arguments.
    `trace(stmt, env_view)`, if given, is called before every statement runs;
    `env_view` is an `EnvView` of the current values.

        >>> out = np.zeros(4, np.float32)
        >>> run_kernel(saxpy, {"alpha": 2.0, "x": x, "y": y, "out": out})  # doctest: +SKIP
    """
    if trace is None:
        compiled = _cached(kernel)
    else:  # tracing wraps every statement, so it gets its own compile
        compiled = Compiler(_with_entry(kernel), trace).build()
    env = [UNSET] * compiled.size
    _bind(compiled, env, args)
    with np.errstate(all="ignore"):  # wraparound and inf are defined, not warnings
        compiled.body(env)


def _cached(kernel: ir.Kernel) -> Compiled:
    hit = _cache.get(id(kernel))
    if hit is not None and hit[0] is kernel:
        return hit[1]
    compiled = Compiler(_with_entry(kernel), None).build()
    if len(_cache) >= _CACHE_SIZE:
        _cache.pop(next(iter(_cache)))
    _cache[id(kernel)] = (kernel, compiled)  # holding `kernel` keeps its id unique
    return compiled


def _bind(compiled: Compiled, env: list, args: dict[str, object]) -> None:
    name = compiled.kernel.name
    unknown = set(args) - {p.name for p, _ in compiled.params}
    if unknown:
        raise TypeError(f"kernel '{name}' has no parameter(s) {sorted(unknown)}")
    for p, k in compiled.params:
        if p.name not in args:
            raise TypeError(f"kernel '{name}': missing argument '{p.name}'")
        what = f"kernel '{name}': argument '{p.name}'"
        if isinstance(p, ir.TensorParam) and p.quant is not None:
            arr = quant_blocks(args[p.name], p, what)
            env[k], env[k + 1] = arr, logical_shape(arr, p)
        elif isinstance(p, ir.TensorParam):
            arr = _check_array(args[p.name], p, what)
            env[k], env[k + 1] = arr, arr.shape
        else:
            env[k] = ops.scalar_arg(args[p.name], p.dtype, what)
    slots = {p: k for p, k in compiled.params}
    for view, k in compiled.views:
        arr = field_array(env[slots[view.view.parent]], view)
        env[k], env[k + 1] = arr, arr.shape


def _check_array(value, p: ir.TensorParam, what: str) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{what} must be a numpy array, got {type(value).__name__}")
    want = np.dtype(p.dtype.numpy_name)
    if value.dtype != want or value.ndim != p.rank:
        raise TypeError(f"{what} must be a {p.rank}-d {want} array, got {value.ndim}-d {value.dtype}")
    return value


def _with_entry(kernel: ir.Kernel) -> ir.Kernel:
    """Kernel IR gets the entry prologue (dims, shape and overlap checks) that
    lowering would add. Kernel IR is recognized by index notation, or by dims
    that nothing assigns; loop IR already binds its dims."""
    if not _is_kernel_ir(kernel):
        return kernel
    prologue, checks = entry_prologue(kernel)
    return replace(kernel, body=tuple(prologue) + tuple(kernel.body), checks=tuple(checks))


def _is_kernel_ir(kernel: ir.Kernel) -> bool:
    dims = set(kernel.dims)
    dims_assigned = False
    for s in walk_stmts(kernel.body):
        if isinstance(s, ir.IndexStore):
            return True
        if any(isinstance(n, ir.Reduce) for e in stmt_exprs(s) for n in walk_expr(e)):
            return True
        dims_assigned = dims_assigned or (isinstance(s, ir.Assign) and s.sym in dims)
    return bool(dims) and not dims_assigned
