"""Interleaving vector expressions: the operands of a target intrinsic as one wide vector.

A pairwise instruction (vpmaddubsw) takes, for result lane l, the two values
(a0[l], a1[l]) from adjacent lanes 2l and 2l + 1 of one register. In a
vectorized loop those values are usually adjacent elements of memory:

    a0 = w[base + ramp(0, 2, L)]        a1 = w[base + 1 + ramp(0, 2, L)]
      -> interleaved: w[base + ramp(0, 1, 2L)]        (one contiguous load)

`interleave(parts)` finds that wide expression when the parts are the same
tree except that their lane indices are offset by 0, d, 2d, ... on a stride of
k * d (k = len(parts)), through lane-wise operations (`w[i] & 15`) and nested
target intrinsics. It returns None when the parts are not of that shape; the
back-end then interleaves the computed vectors with shuffles. The wide
expression touches exactly the elements the parts touch.

    >>> interleave([load_at(ramp(b, 2, 8)), load_at(ramp(b + 1, 2, 8))])   # doctest: +SKIP
    load_at(b + ramp(0, 1, 16))
"""

from __future__ import annotations

from dataclasses import fields, is_dataclass, replace

from . import ir
from .rewrite import child_exprs, map_children
from .types import I64
from .vector import lanes_of


def interleave(parts: list[ir.Expr]) -> ir.Expr | None:
    """One expression whose lanes are parts[0][0], parts[1][0], ..., parts[0][1], ...
    (lanes_of = len(parts) * L), or None."""
    lanes = {lanes_of(p) for p in parts}
    if lanes == {1}:
        return parts[0] if all(same(p, parts[0]) for p in parts[1:]) else None
    if len(lanes) != 1 or any(type(p) is not type(parts[0]) for p in parts):
        return None
    first = parts[0]
    if first.type == I64:
        affine = _affine(parts)
        if affine is not None:
            return affine
    match first:
        case ir.Broadcast(_, count):
            return replace(first, lanes=count * len(parts)) if all(same(p, first) for p in parts) else None
        case ir.Var() | ir.Ramp() | ir.HReduce() | ir.Shuffle():
            return None
        case ir.Load(mask=mask) if mask is not None:
            return None
        case ir.Load(tensor) if any(p.tensor is not tensor for p in parts):
            return None
    if any(not _same_fields(p, first) for p in parts):
        return None
    kids = [child_exprs(p) for p in parts]
    wide = [interleave([k[n] for k in kids]) for n in range(len(kids[0]))]
    if any(w is None for w in wide):
        return None
    it = iter(wide)
    out = map_children(first, lambda _: next(it))
    return replace(out, safe=all(p.safe for p in parts)) if isinstance(out, ir.Load) else out


def _affine(parts: list[ir.Expr]) -> ir.Expr | None:
    """base + ramp(0, d, kL) for i64 parts base + j*d + ramp(0, k*d, L), j = 0..k-1."""
    split = [_affine_parts(p) for p in parts]
    if any(s is None for s in split):
        return None
    k = len(parts)
    terms0, const0, stride0 = split[0]
    d = split[1][1] - const0 if k > 1 else 0
    for j, (terms, const, stride) in enumerate(split):
        if stride != stride0 or const != const0 + j * d or not same(terms, terms0):
            return None
    if d == 0 or stride0 != k * d:
        return None
    span = parts[0].span
    base = ir.Const(const0, I64, span)
    for t in terms0:
        base = ir.Binary("+", t, base, I64, span)
    return ir.Binary("+", base, ir.Ramp(ir.Const(0, I64, span), d, k * lanes_of(parts[0]), span), I64, span)


def _affine_parts(e: ir.Expr) -> tuple[tuple[ir.Expr, ...], int, int] | None:
    """(terms, c, k) when the i64 `e` is sum(terms) + c + (0, k, 2k, ...) lane-wise."""
    if isinstance(e, ir.Const):
        return (), e.value, 0
    match e:
        case ir.Ramp(base, stride):
            inner = _affine_parts(base)
            return None if inner is None else (inner[0], inner[1], inner[2] + stride)
        case ir.Broadcast(value):
            return _affine_parts(value)
        case ir.Binary(op="+", lhs=lhs, rhs=rhs):
            a, b = _affine_parts(lhs), _affine_parts(rhs)
            return None if a is None or b is None else (a[0] + b[0], a[1] + b[1], a[2] + b[2])
        case ir.Binary(op="*", lhs=ir.Const(value=c), rhs=x) | ir.Binary(op="*", lhs=x, rhs=ir.Const(value=c)):
            inner = _affine_parts(x)
            if inner is None:
                return None
            scale = ir.Const(c, I64)
            terms = tuple(ir.Binary("*", t, scale, I64) for t in inner[0])
            return terms, inner[1] * c, inner[2] * c
    return ((e,), 0, 0) if lanes_of(e) == 1 else None


def same(a, b) -> bool:
    """Structural equality of IR trees, spans ignored (symbols and tensors by identity)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if not is_dataclass(a) or isinstance(a, (ir.Sym, ir.TensorParam)):
        return a is b or a == b
    return all(same(getattr(a, f.name), getattr(b, f.name)) for f in fields(a) if f.name != "span")


_OWN_FIELDS = ("op", "name", "type", "tensor")  # what a node is, apart from its children


def _same_fields(a: ir.Expr, b: ir.Expr) -> bool:
    """The same node but for its children (operator, name, type, tensor)."""
    return all(same(getattr(a, f, None), getattr(b, f, None)) for f in _OWN_FIELDS)
