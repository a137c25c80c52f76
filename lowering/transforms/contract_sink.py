"""Sink a loop that repeats an accumulating contraction into the sum itself.

    for c in range(0, Kc):                    for a in ...:
        for a in ...:                             for d in ...:
            for d in ...:                             sum = 0
                sum = 0                    ->         for c in range(0, Kc):
                for f in range(0, Kf):                    for f in range(0, Kf):
                    sum = sum + A[..] * B[..]                 sum = sum + A[..] * B[..]
                C[..] = C[..] + sum                   C[..] = C[..] + sum

Written the first way (`for c: C[..] += sum(..)`, the seeds' "K loop around
GEMMs"), every pass over `c` is a whole small matmul that loads and stores its
C tile; the second is one batch-reduce GEMM that keeps the tile in registers
across `c`. The additions into C are reordered, so only under
`@options(reassociate=True)`. `c` must index neither C nor any loop bound of
the nest, and nothing but the sum's operands may use it.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import stmt_exprs, walk_stmts
from .contract_match import Contraction, plain_loop, match_nest, uses
from .contract_zero_fill import FOLD_REMARK, fold_zero_fills
from .nest import remark

SUNK_REMARK = "moved inside the sum it repeats (reassociate): a batch-reduce loop of the contraction"


def sink_reduction_loops(kernel: ir.Kernel, remarks: list | None = None) -> ir.Kernel:
    """`kernel` with every loop that repeats an accumulating contraction moved
    into its sum, and a zero fill of C just before a contraction that adds
    into all of it folded into that (`contract_zero_fill`)."""
    if not kernel.options.reassociate:
        return kernel
    notes: list[tuple] = []
    body = fold_zero_fills(_sink_in(kernel.body, remarks), notes)
    for span, name in notes:
        remark(remarks, span, FOLD_REMARK.format(c=name))
    return kernel if body is kernel.body else replace(kernel, body=body)


def _sink_in(body: tuple[ir.Stmt, ...], remarks: list | None) -> tuple[ir.Stmt, ...]:
    out, changed = [], False
    for s in body:
        new = s
        if isinstance(s, ir.For):
            sunk = sink(s)
            if sunk is not None:
                remark(remarks, s.span, f"loop '{s.name}': {SUNK_REMARK}")
                new = sunk
            else:
                inner = _sink_in(s.body, remarks)
                new = s if inner is s.body else replace(s, body=inner)
        changed |= new is not s
        out.append(new)
    return tuple(out) if changed else body


def sink(loop: ir.For) -> ir.For | None:
    """The nest inside `loop` with `loop` moved around its reduction, when
    that nest is then a contraction (the caller checks `reassociate`)."""
    if not plain_loop(loop) or len(loop.body) != 1 or not isinstance(loop.body[0], ir.For):
        return None
    chain = [loop.body[0]]
    while len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], ir.For):
        chain.append(chain[-1].body[0])
    match chain[-1].body:
        case (ir.Assign(_, ir.Const(value=0)) as init, ir.For() as top, *between, ir.Store() as store):
            pass
        case _:
            return None
    c = loop.var
    bounds = tuple(e for f in chain for e in (f.start, f.stop))
    after = [*between, store]
    if c in uses(bounds) or any(c in uses(stmt_exprs(s)) for s in after):
        return None
    if any(isinstance(s, ir.Store) and s.tensor is store.tensor for s in walk_stmts((top,))):
        return None
    nest = replace(chain[-1], body=(init, replace(loop, body=(top,)), *between, store))
    for outer in reversed(chain[:-1]):
        nest = replace(outer, body=(nest,))
    found = [match_nest(s, True) for s in walk_stmts((nest,)) if isinstance(s, ir.For)]
    if not any(isinstance(f, Contraction) and f.accumulate and c in {r.var for r in f.br} for f in found):
        return None
    return nest

