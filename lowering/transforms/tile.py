"""`tile(i, j, fi, fj)`: split `i` by `fi` and `j` by `fj`, then order the loops
`i.outer, j.outer, i.inner, j.inner` — a 2-D block of the iteration space.

With `tail=peel` (the default, as for split) the whole tiles are one perfect
nest, and what is left runs after it as two strips: the columns past the last
whole tile, for the rows of whole tiles (`j.tail`, around its own copy of `i`,
`j.tail.i`), then the rows past the last whole tile (`i.tail`, around
`i.tail.j`). With `tail=mask` the last tile of each axis is shorter instead,
and the nest stays one piece.

    for i in range(M):          for i.outer in range(M // fi):
        for j in range(N):          for j.outer in range(N // fj):
            body(i, j)       -->        for i.inner in range(fi):
                                            for j.inner in range(fj):
                                                body(i.outer * fi + i.inner, j.outer * fj + j.inner)
                                for j.tail in range(N // fj * fj, N):
                                    for j.tail.i in range(0, M // fi * fi):
                                        body(j.tail.i, j.tail)
                                for i.tail in range(M // fi * fi, M):
                                    for i.tail.j in range(0, N):
                                        body(i.tail, i.tail.j)

Needs `i` and `j` perfectly nested, and `j`'s range not to depend on `i`; the
reorder of the masked tiles is checked like `reorder`. The peeled pieces are
legal when the masked tiles are: they run the same iterations, and any two
that touch one element (a loop reducing into it) keep the order they have in
the masked tiles — of the rows of one column, or of the columns of one row.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..schedule import Directive, LoopRef
from . import reorder, split
from .nest import find_loop, replace_loop, substitute
from .split import split_loop

name = "tile"


def run(kernel: ir.Kernel, d: Directive) -> ir.Kernel:
    masked = _masked(kernel, d)  # refuses, with reorder's reasons, what neither form may do
    return masked if d.option("tail", "peel") == "mask" else _peeled(kernel, d)


def _masked(kernel: ir.Kernel, d: Directive) -> ir.Kernel:
    (a, b), (fa, fb) = d.loops, d.ints
    kernel = split.run(kernel, _directive("split", (a,), (fa,), d))
    kernel = split.run(kernel, _directive("split", (b,), (fb,), d))
    refs = tuple(LoopRef(f"{ref.name}.{part}", ref.span) for part in ("outer", "inner") for ref in (a, b))
    return reorder.run(kernel, _directive("reorder", refs, (), d))


def _peeled(kernel: ir.Kernel, d: Directive) -> ir.Kernel:
    """Whole tiles, then the right strip, then the bottom strip."""
    (a, b), (fa, fb) = d.loops, d.ints
    rows = find_loop(kernel.body, a.name, a.span)
    if not (len(rows.body) == 1 and isinstance(rows.body[0], ir.For) and rows.body[0].name == b.name):
        # `b` around `a` (after a reorder): `a` outermost first, as the masked tiles may have it
        kernel = reorder.run(kernel, _directive("reorder", (a, b), (), d))
        rows = find_loop(kernel.body, a.name, a.span)
    cols = rows.body[0]  # the only statement: the masked tiles' reorder needed it
    main, bottom = split_loop(rows, fa, "peel", d.span)
    row_block = main.body[0]
    tiles, _ = split_loop(row_block.body[0], fb, "peel", d.span)
    nest = replace(main, body=(replace(tiles, body=(replace(row_block, body=tiles.body),)),))
    _, right = split_loop(cols, fb, "peel", d.span)
    var = ir.Sym(f"{right.name}.{rows.name}", rows.var.type, "loop")
    whole_rows = ir.For(var, rows.start, bottom.start, 1, substitute(right.body, {rows.var: ir.Var(var)}),
                        var.name, rows.kind, rows.span)
    return replace(kernel, body=replace_loop(kernel.body, rows, [nest, replace(right, body=(whole_rows,)), bottom]))


def _directive(name: str, loops, ints, d: Directive) -> Directive:
    return replace(d, name=name, loops=tuple(loops), ints=tuple(ints), options=(("tail", "mask"),))
