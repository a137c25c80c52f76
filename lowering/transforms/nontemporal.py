"""`vectorize(i, w, nontemporal=out)`: the loop's vector stores to `out` may
bypass the cache. The loop first runs a head of iterations that brings the
address of its store to `out` to a multiple of the vector's size
(`AlignGap`, at most w - 1 iterations, run as one masked vector step: a
scalar head would round some functions differently, so an element's value
would depend on the array's address); the rest is vectorized as usual and
its full, unmasked vector stores to `out` are marked `nontemporal`. When
the stores are aligned exactly when `out`'s rows are (`aligned_with_tensor`),
or the loop is one vector (w iterations: a tile's row, which the kernel
places on a line itself), there is no head.

    for i in range(a, b):               h = min(align_gap(out[a], 64), max(b - a, 0))
        out[i] = f(i)           -->     for i.head in range(a, a + h): out[i.head] = f(i.head)
                                        for i in range(a + h, b): out[i] = f(i)   (then vectorized)

Always legal: the iterations run in the same order. Whether a marked store
bypasses the cache is decided when it runs (backends/llvm/streaming.py): only
for a large `out`, at an aligned address.
"""

from __future__ import annotations

from dataclasses import replace

from dsl.grammar.diagnostics import did_you_mean

from .. import ir
from ..bounds_proof import linear
from ..rewrite import map_stmts, walk_expr, walk_stmts
from ..vector import lanes_of, prefix_count
from ..arith import fold, minimum
from .nest import ScheduleError, add, copy_loops, i64, maximum, sub, substitute, substitute_expr

MAX_ALIGN = 64  # bytes: a cache line


def peel_head(kernel: ir.Kernel, loop: ir.For, name: str, width: int, span) -> tuple[list[ir.Stmt], ir.For]:
    """([count, head], rest): `loop` split where its stores to tensor `name`
    become aligned, after `count` (an Assign of the head's length) and `head`."""
    tensor = _output(kernel, name, span)
    store = _first_store(loop, tensor, span)
    first = tuple(fold(substitute_expr(i, {loop.var: loop.start})) for i in store.indices)
    nbytes = alignment(width, tensor.dtype.itemsize)
    trips = maximum(sub(loop.stop, loop.start), i64(0))
    count = ir.Sym(f"{loop.name}.align", loop.var.type, "local")
    assign = ir.Assign(count, minimum(ir.AlignGap(tensor, first, nbytes, span), trips), span)
    head_var = ir.Sym(f"{loop.name}.head", loop.var.type, "loop")
    body = copy_loops(substitute(loop.body, {loop.var: ir.Var(head_var)}), prefix=f"{loop.name}.head.")
    stop = add(loop.start, ir.Var(count))
    head = ir.For(head_var, loop.start, stop, 1, body, f"{loop.name}.head", loop.kind, loop.span)
    return [assign, head], replace(loop, start=stop)


def aligned_with_tensor(kernel: ir.Kernel, loop: ir.For, name: str, width: int, span) -> bool:
    """Whether `loop`'s stores to tensor `name` are aligned exactly when its
    rows are: its last axis has a literal size that `width` divides, and each
    store starts at a multiple of `width` along it (a 16 x 16 tile's row:
    `Y[..., jb, jl]` with Y's last axis 16). Then no head is peeled: the
    loop keeps its constant trip count, which later passes need (the
    transposes of transpose_loads), and each store checks at run time."""
    tensor = _output(kernel, name, span)
    last = tensor.dims[-1]
    if not isinstance(last, int) or last % width:
        return False
    _first_store(loop, tensor, span)  # the same checks (and messages) as a peeled head's
    for s in walk_stmts(loop.body):
        if isinstance(s, ir.Store) and s.tensor is tensor:
            form = linear(substitute_expr(s.indices[-1], {loop.var: loop.start}))
            if form is None or any(c % width for c in form.values()):
                return False
    return True


def alignment(width: int, itemsize: int) -> int:
    """Bytes a vector of `width` items is aligned to: its size rounded down to a
    power of two, at most a cache line (as backends/llvm/streaming.py checks)."""
    size = min(width * itemsize, MAX_ALIGN)
    return 1 << (size.bit_length() - 1)


def mark_stores(body: tuple[ir.Stmt, ...], tensor: ir.TensorParam) -> tuple[ir.Stmt, ...]:
    """`body` with its vector stores to `tensor` marked non-temporal: the
    unmasked ones, and those masked by `ramp(0, 1, L) < n` (the head's and
    the tail's, which the backend stores as plain pieces)."""
    def stmt_fn(s: ir.Stmt):
        if isinstance(s, ir.Store) and s.tensor is tensor and any(lanes_of(i) > 1 for i in s.indices) \
                and (s.mask is None or prefix_count(s.mask) is not None):
            return replace(s, nontemporal=True)
        return None

    return map_stmts(body, None, stmt_fn)


def _output(kernel: ir.Kernel, name: str, span) -> ir.TensorParam:
    if name not in {t.name for t in kernel.tensors}:
        names = [t.name for t in kernel.tensors if t.is_output]
        raise ScheduleError(span, f"nontemporal=: no tensor named '{name}'", *did_you_mean(name, names))
    return kernel.tensor(name)


def _first_store(loop: ir.For, tensor: ir.TensorParam, span) -> ir.Store:
    """The loop's first store to `tensor`; each must move by one element per
    iteration along the last axis and stay put along the others."""
    stores = [s for s in walk_stmts(loop.body) if isinstance(s, ir.Store) and s.tensor is tensor]
    if not stores:
        raise ScheduleError(span, f"nontemporal=: loop '{loop.name}' stores nothing to '{tensor.name}'")
    for s in stores:
        *outer, last = s.indices
        form = linear(last)
        moves = any(isinstance(n, ir.Var) and n.sym is loop.var for i in outer for n in walk_expr(i))
        if moves or form is None or form.get(loop.var, 0) != 1:
            line = f" (line {s.span.line})" if s.span else ""
            raise ScheduleError(span, f"nontemporal=: the store to '{tensor.name}'{line} does not move by one "
                                f"element of its last axis per iteration of '{loop.name}'",
                                "only contiguous vector stores can bypass the cache")
    return stores[0]
