"""Interleaved vector stores as one contiguous store (run after every schedule).

After `vectorize(l)` and `unroll(c)`, a copy into an interleaved layout, such
as planes of channels into pixels (`y[m, 3 * l + c] = x[c, m, l]`), is k
stores one after another whose lanes step by k elements: each a scatter. When
their lanes together fill a window of consecutive elements once each, they
are one store of the window, its value the k vectors interleaved by shuffles
(`ir.Shuffle`):

    y[m, 3 * ramp(0, 1, 16) + 0] = v0          v01 = shuffle(v0, v1, 0 ... 31)
    y[m, 3 * ramp(0, 1, 16) + 1] = v1   -->    v22 = shuffle(v2, v2, 0 ... 15, 0 ... 15)
    y[m, 3 * ramp(0, 1, 16) + 2] = v2          y[m, ramp(0, 1, 48)] = shuffle(v01, v22, 0, 16, 32, 1, 17, ...)

LLVM lowers such a store as its targets can (AArch64's st2/st3/st4, x86's
unpacks and permutes). The stores must be unmasked, of the same tensor, at
the same scalar indices, with no other statement between them; the values
must not read that tensor (the stores move to the last one's place), nor
anything at all in an `inplace` kernel, whose outputs may alias its inputs.
"""

from __future__ import annotations

from dataclasses import replace

from .. import ir
from ..rewrite import walk_expr
from ..types import I64
from ..vector import lane_constants, lanes_of
from .dependence import expr_key

name = "interleave_stores"
MAX_STORES = 8  # of a group: the interleave of k vectors takes about k log k shuffles


def run(kernel: ir.Kernel) -> ir.Kernel:
    """`kernel` with every group of interleaved stores merged; itself when none is."""
    body, changed = _block(kernel.body, kernel.options.inplace)
    return replace(kernel, body=body) if changed else kernel


def _block(stmts: tuple[ir.Stmt, ...], inplace: bool) -> tuple[tuple[ir.Stmt, ...], bool]:
    out: list[ir.Stmt] = []
    changed = False
    i = 0
    while i < len(stmts):
        s = stmts[i]
        if isinstance(s, ir.For):
            body, inner = _block(s.body, inplace)
            out.append(replace(s, body=body) if inner else s)
            changed |= inner
        elif isinstance(s, ir.If):
            then, a = _block(s.then, inplace)
            orelse, b = _block(s.orelse, inplace)
            out.append(replace(s, then=then, orelse=orelse) if a or b else s)
            changed |= a or b
        else:
            merged, used = _group(stmts, i, inplace)
            if merged is not None:
                out.append(merged)
                changed = True
                i += used
                continue
            out.append(s)
        i += 1
    return tuple(out), changed


def _group(stmts: tuple[ir.Stmt, ...], start: int, inplace: bool) -> tuple[ir.Store | None, int]:
    """The one store that the interleaved stores from `start` on make, and how
    many they are; (None, 0) when they make none."""
    first = _parts(stmts[start])
    if first is None:
        return None, 0
    group = [first]
    for s in stmts[start + 1:start + MAX_STORES]:
        parts = _parts(s)
        if parts is None or parts[0].tensor is not first[0].tensor or parts[1] != first[1] or parts[2] != first[2]:
            break
        group.append(parts)
    for k in range(len(group), 1, -1):  # the longest run that fills a window
        merged = _merged(group[:k], inplace)
        if merged is not None:
            return merged, k
    return None, 0


def _parts(s: ir.Stmt):
    """(store, key of its scalar indices and base, its lane count, the lanes'
    constant offsets along the last axis, the rest of that index) of a store
    `_merged` may take, else None."""
    if not isinstance(s, ir.Store) or s.mask is not None or s.nontemporal:
        return None
    lanes = lanes_of(s.value)
    *outer, inner = s.indices
    if lanes < 2 or any(lanes_of(i) > 1 for i in outer) or lanes_of(inner) != lanes:
        return None
    parts = lane_constants(inner, lanes)
    if parts is None:
        return None
    scalars, offsets = parts
    shift = sum(x.value for x in scalars if isinstance(x, ir.Const))  # constants join the offsets
    scalars = tuple(x for x in scalars if not isinstance(x, ir.Const))
    key = (tuple(expr_key(i) for i in outer), tuple(sorted(map(expr_key, scalars), key=repr)), s.safe)
    return s, key, lanes, tuple(o + shift for o in offsets), scalars


def _merged(group: list, inplace: bool) -> ir.Store | None:
    stores = [g[0] for g in group]
    lanes, k = group[0][2], len(group)
    where = {off: (n, lane) for n, g in enumerate(group) for lane, off in enumerate(g[3])}
    low = min(where)
    if len(where) != k * lanes or sorted(where) != list(range(low, low + k * lanes)):
        return None
    tensor = stores[0].tensor
    for s in stores:
        for n in walk_expr(s.value):
            if isinstance(n, ir.Load) and (inplace or n.tensor is tensor):
                return None
    value = _concatenated([s.value for s in stores])
    mask = tuple(where[low + t][0] * lanes + where[low + t][1] for t in range(k * lanes))
    value = _picked(value, mask)
    outer = stores[0].indices[:-1]
    base = _sum([*group[0][4], ir.Const(low, I64)])
    return replace(stores[0], indices=(*outer, ir.Ramp(base, 1, k * lanes)), value=value,
                   span=stores[-1].span)


def _concatenated(values: list[ir.Expr]) -> ir.Expr:
    """The values end to end, their count made a power of two with copies of
    the last one (lanes never picked), as one vector."""
    values = values + values[-1:] * ((1 << (len(values) - 1).bit_length()) - len(values))
    while len(values) > 1:
        values = [ir.Shuffle(a, b, tuple(range(2 * lanes_of(a)))) for a, b in zip(values[0::2], values[1::2])]
    return values[0]


def _picked(value: ir.Expr, mask: tuple[int, ...]) -> ir.Expr:
    """Lanes `mask` of `value`: a shuffle of it with itself, or of its two
    halves when it is itself a concatenation."""
    if isinstance(value, ir.Shuffle) and value.mask == tuple(range(len(value.mask))):
        return ir.Shuffle(value.a, value.b, mask)
    return ir.Shuffle(value, value, mask)


def _sum(terms: list[ir.Expr]) -> ir.Expr:
    total = terms[0]
    for t in terms[1:]:
        total = ir.Binary("+", total, t, I64)
    return total

