"""`pack(T, L)`: before loop `L`, copy the part of input `T` that `L` reads
into a scratch buffer laid out in the order `L` reads it, and read the buffer.

    for j.outer ...:                         for j.outer ...:
        for k in range(K):                       for a0 in <k's range>:         # the copy
            for j.inner in range(16):                for a1 in <j's range>:
                ... B[k, j.outer*16 + j.inner]           B.packed[(a0-lo0)*16 + (a1-lo1)] = B[a0, a1]
                                                 for k in range(K):
                                                     for j.inner in range(16):
                                                         ... B.packed[k*16 + j.inner]

The region is, per axis of `T`, the range its index takes over the loops in
`L` (bounds from the loop ranges, in the variables of the loops around `L`).
The buffer's axes are ordered by how deep the loop is that moves each index:
the axis the innermost loop walks is the buffer's last, so that loop reads
consecutive elements whatever `T`'s own strides (a transposed `B` packs into
rows). The copy is clamped to `T`'s bounds; elements outside were never read.

Contract: needs `T` read-only in the kernel, every index of `T` in `L` affine
in the loop variables (constant step), every such access proven in bounds,
and region sizes that depend only on dims (the buffer is allocated once,
before the top-level statement holding `L`, or at the start of the parallel
loop holding it: one buffer per thread). Results are unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..arith import add, i64, maximum, minimum, mul, sub
from ..bounds_proof import LoopRange, _add, _extreme, linear, to_expr
from ..rewrite import map_stmts, stmt_exprs, walk_expr, walk_stmts
from ..types import I64
from .nest import ScheduleError, find_loop

name = "pack"


def run(kernel: ir.Kernel, d) -> ir.Kernel:
    tensor_ref, loop_ref = d.loops
    tensor = _input_tensor(kernel, tensor_ref)
    loop = find_loop(kernel.body, loop_ref.name, loop_ref.span)
    what = f"pack '{tensor.name}' at '{loop.name}'"
    reads = list(_reads(loop, tensor))
    if not reads:
        raise ScheduleError(d.span, f"cannot {what}: the loop does not read '{tensor.name}'")
    region = [_axis_region(tensor, axis, reads, what, d.span) for axis in range(tensor.rank)]
    order = sorted(range(tensor.rank), key=lambda a: (region[a][2], a))
    buffer = ir.TensorParam(f"{tensor.name}.packed", tensor.dtype, (ir.Sym(f"{tensor.name}.packed.size", I64, "dim"),),
                            True, d.span, scratch=True)
    lows = [ir.Sym(f"{tensor.name}.lo{a}", I64, "local") for a in range(tensor.rank)]
    strides = _strides(order, [r[3] for r in region])
    setup = [ir.Assign(lows[a], to_expr(region[a][0]), d.span) for a in range(tensor.rank)]
    copy = _copy(tensor, buffer, region, lows, order, strides, d.span)
    packed_loop = map_stmts((loop,), expr_fn=lambda e: _read_buffer(e, tensor, buffer, lows, strides))[0]
    checks = (*kernel.checks, ir.CheckInfo("memory", f"out of memory packing '{tensor.name}'", d.span))
    size = i64(1)
    for a in range(tensor.rank):
        size = mul(size, to_expr(region[a][3]))
    alloc = ir.Alloc(buffer, size, len(checks) - 1, d.span)
    body = _place_alloc(kernel.body, loop, alloc)
    body = _replace(body, loop, [*setup, *copy, packed_loop])
    return replace(kernel, body=body, checks=checks)


def _input_tensor(kernel: ir.Kernel, ref) -> ir.TensorParam:
    tensor = next((t for t in kernel.tensors if t.name == ref.name), None)
    if tensor is None:
        names = ", ".join(t.name for t in kernel.tensors)
        raise ScheduleError(ref.span, f"pack(): no tensor named '{ref.name}'", f"tensors: {names}")
    if any(isinstance(s, ir.Store) and s.tensor is tensor for s in walk_stmts(kernel.body)):
        raise ScheduleError(ref.span, f"pack(): '{tensor.name}' is written by the kernel; only inputs are packed")
    return tensor


def _reads(loop: ir.For, tensor):
    """(load, ranges of the loops from `loop` in, {var: depth}) for each read of `tensor`."""
    yield from _reads_in(loop.body, tensor, [LoopRange(loop.var, loop.start, loop.stop, loop.step)])


def _reads_in(body, tensor, ranges: list[LoopRange]):
    depths = {r.var: k for k, r in enumerate(ranges)}
    for s in body:
        for e in stmt_exprs(s):
            for node in walk_expr(e):
                if isinstance(node, ir.Load) and node.tensor is tensor:
                    yield node, ranges, depths
        match s:
            case ir.For(var, start, stop, step, inner):
                yield from _reads_in(inner, tensor, ranges + [LoopRange(var, start, stop, step)])
            case ir.If(then=then, orelse=orelse):
                yield from _reads_in(then, tensor, ranges)
                yield from _reads_in(orelse, tensor, ranges)


def _axis_region(tensor, axis: int, reads, what: str, span):
    """(low, high, depth, extent) of axis `axis`: linear forms in outer variables and dims."""
    lows, highs, depth = [], [], -1
    for load, ranges, depths in reads:
        form = linear(load.indices[axis])
        if form is None or not load.safe or load.mask is not None:
            why = "is not affine in the loops" if form is None else "is not proven in bounds"
            raise ScheduleError(span, f"cannot {what}: index {axis} of '{tensor.name}' {why}")
        lows.append(_extreme(form, ranges, largest=False, free=True))
        highs.append(_extreme(form, ranges, largest=True, free=True))
        depth = max([depth] + [depths[k] for k in form if k in depths])
    if any(x is None for x in lows + highs):
        raise ScheduleError(span, f"cannot {what}: the range of index {axis} of '{tensor.name}' is unknown")
    low, high = _common(lows, largest=False), _common(highs, largest=True)
    extent = _add(_add(high, low, -1), {1: 1}, 1) if low is not None and high is not None else None
    if extent is None or any(isinstance(k, ir.Sym) and k.role != "dim" for k in extent):
        raise ScheduleError(span, f"cannot {what}: the size of the region of axis {axis} of '{tensor.name}' "
                            "depends on loop variables", "pack at a loop whose region has a fixed size")
    return low, high, depth, extent


def _common(forms, largest: bool):
    """The min (max) of linear forms that differ only in their constant."""
    shape = {k: v for k, v in forms[0].items() if k != 1}
    if any({k: v for k, v in f.items() if k != 1} != shape for f in forms):
        return None
    pick = max if largest else min
    return {**shape, 1: pick(f.get(1, 0) for f in forms)}


def _strides(order: list[int], extents) -> dict[int, ir.Expr]:
    strides, step = {}, i64(1)
    for axis in reversed(order):
        strides[axis] = step
        step = mul(step, to_expr(extents[axis]))
    return strides


def _offset(indices, lows, strides) -> ir.Expr:
    out = i64(0)
    for axis, index in enumerate(indices):
        out = add(out, mul(sub(index, ir.Var(lows[axis])), strides[axis]))
    return out


def _copy(tensor, buffer, region, lows, order, strides, span) -> list[ir.Stmt]:
    """The copy loops, in buffer order, clamped to the tensor's bounds."""
    vars_ = {a: ir.Sym(f"{tensor.name}.p{a}", I64, "loop") for a in order}
    index = tuple(ir.Var(vars_[a]) for a in range(tensor.rank))
    body: tuple = (ir.Store(buffer, (_offset(index, lows, strides),),
                            ir.Load(tensor, index, tensor.dtype, span, safe=True), span, safe=True),)
    for a in reversed(order):
        start = maximum(ir.Var(lows[a]), i64(0))
        stop = minimum(add(ir.Var(lows[a]), to_expr(region[a][3])), ir.Shape(tensor, a, span))
        body = (ir.For(vars_[a], start, stop, 1, body, f"pack.{tensor.name}.{a}", span=span),)
    return list(body)


def _read_buffer(e: ir.Expr, tensor, buffer, lows, strides) -> ir.Expr:
    if isinstance(e, ir.Load) and e.tensor is tensor:
        return ir.Load(buffer, (_offset(e.indices, lows, strides),), e.type, e.span, safe=True)
    return e


def _replace(body, target: ir.For, new: list[ir.Stmt]) -> tuple:
    out = []
    for s in body:
        if s is target:
            out.extend(new)
        elif isinstance(s, ir.For):
            out.append(replace(s, body=_replace(s.body, target, new)))
        elif isinstance(s, ir.If):
            out.append(replace(s, then=_replace(s.then, target, new), orelse=_replace(s.orelse, target, new)))
        else:
            out.append(s)
    return tuple(out)


def _place_alloc(body, loop: ir.For, alloc: ir.Alloc) -> tuple:
    """`alloc` first in the body of the outermost parallel loop around `loop`
    (one buffer per thread), else before the top-level statement holding it."""
    path = _path(body, loop) or []
    parallel = next((s for s in path if isinstance(s, ir.For) and s.kind == "parallel"), None)
    if parallel is not None:
        return _replace(body, parallel, [replace(parallel, body=(alloc, *parallel.body))])
    top = path[0] if path else loop  # `loop` is still the original: the copy goes in later
    return _replace(body, top, [alloc, top])


def _path(body, target) -> list[ir.Stmt] | None:
    """The statements around `target`, outermost first ([] if it is in `body` itself)."""
    for s in body:
        if s is target:
            return []
        children = s.body if isinstance(s, ir.For) else (*s.then, *s.orelse) if isinstance(s, ir.If) else ()
        found = _path(children, target)
        if found is not None:
            return [s, *found]
    return None
