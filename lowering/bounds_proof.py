"""Proving at compile time that an index stays in bounds.

An index that is a linear combination of loop variables, dims and constants is
bounded by substituting each loop variable, innermost first, with the end of its
range that makes the expression largest (or smallest). If the largest value is
provably below the axis size and the smallest provably >= 0 — e.g. `A[i, k]`
inside `for i in range(M)` where A's axis 0 is M — the check is not needed.
Dims are sizes, so they are never negative.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from . import ir

Linear = dict  # sym or 1 (the constant term) -> int coefficient


@dataclass(frozen=True)
class LoopRange:
    var: ir.Sym
    start: ir.Expr
    stop: ir.Expr
    step: int


def linear(e: ir.Expr) -> Linear | None:
    match e:
        case ir.Const(value) if isinstance(value, int) and not isinstance(value, bool):
            return {1: value}
        case ir.Var(sym) if sym.role in ("loop", "dim"):
            return {sym: 1}
        case ir.Shape(tensor, axis):
            dim = tensor.dims[axis]
            return {1: dim} if isinstance(dim, int) else {dim: 1}
        case ir.Binary("+" | "-", lhs, rhs):
            a, b = linear(lhs), linear(rhs)
            if a is None or b is None:
                return None
            return _add(a, b, 1 if e.op == "+" else -1)
        case ir.Binary("*", lhs, rhs):
            a, b = linear(lhs), linear(rhs)
            if a is None or b is None:
                return None
            if set(a) <= {1}:
                return _scale(b, a.get(1, 0))
            if set(b) <= {1}:
                return _scale(a, b.get(1, 0))
        case ir.Unary("neg", operand):
            a = linear(operand)
            return None if a is None else _scale(a, -1)
        case ir.Binary("//", ir.Var(sym), ir.Const(value)) if sym.role == "dim" and isinstance(value, int) and value > 0:
            return {(sym, value): 1}  # a size divided exactly (K // 256 of a quantized tensor): never negative
    return None


def _add(a: Linear, b: Linear, sign: int) -> Linear:
    out = dict(a)
    for key, coef in b.items():
        out[key] = out.get(key, 0) + sign * coef
    return {k: v for k, v in out.items() if v or k == 1}


def _scale(a: Linear, factor: int) -> Linear:
    return {k: v * factor for k, v in a.items()}


def _extreme(form: Linear, loops: list[LoopRange], largest: bool, free: bool = False) -> Linear | None:
    """The largest (or smallest) value of `form` over the loops' ranges: in
    dims and constants only, or (`free`) also in variables of other loops."""
    for loop in reversed(loops):
        coef = form.get(loop.var, 0)
        if not coef:
            continue
        up = (coef > 0) == largest
        low, high = _bounds(loop)
        end = high if up else low
        if end is None:
            return None
        rest = {k: v for k, v in form.items() if k is not loop.var}
        form = _add(rest, _scale(end, coef), 1)
    if not free and any(isinstance(k, ir.Sym) and k.role != "dim" for k in form):
        return None
    return form


def to_expr(form: Linear) -> ir.Expr:
    """A linear form back as an i64 expression (folded as it is built)."""
    from .arith import add, i64, mul

    out: ir.Expr = i64(form.get(1, 0))
    for key, coef in form.items():
        if key != 1 and coef:
            term = ir.Binary("//", ir.Var(key[0]), i64(key[1]), key[0].type) if isinstance(key, tuple) else ir.Var(key)
            out = add(out, mul(term, i64(coef)))
    return out


def _bounds(loop: LoopRange) -> tuple[Linear | None, Linear | None]:
    """(lowest, highest) value of the loop's variable, each None when not linear
    (a loop over `range((R + 15) // 16)` still starts at 0)."""
    if loop.step > 0:
        start, stop = linear(loop.start), _upper(loop.stop)
        return start, None if stop is None else _add(stop, {1: -1}, 1)
    start, stop = linear(loop.start), linear(loop.stop)
    if start is None or stop is None:
        return None, None
    return _add(stop, {1: 1}, 1), start


def _upper(e: ir.Expr) -> Linear | None:
    """A linear upper bound of `e`: itself, or for `min(a, b)` the simpler of a, b
    (a masked tail's inner loop stops at `min(f, n - i.outer * f)`)."""
    if isinstance(e, ir.Binary) and e.op == "min":
        forms = [f for f in (_upper(e.lhs), _upper(e.rhs)) if f is not None]
        return min(forms, key=len) if forms else None
    return linear(e)


def provably_in_bounds(index: ir.Expr, size: ir.Expr, loops: list[LoopRange]) -> bool:
    if _quant_block_index(index, size, loops):
        return True
    span = _const_range(index, loops)
    if span is not None and isinstance(size, ir.Shape) and isinstance(size.tensor.dims[size.axis], int):
        return span[0] >= 0 and span[1] < size.tensor.dims[size.axis]
    form, bound = linear(index), linear(size)
    spread = (0, 0)
    if form is None:
        form, spread = _linear_and_bounded(index, loops)
    if form is None or bound is None:
        return False
    return any(_below(form, bound, choice, spread) for choice in _min_choices(loops))


def _linear_and_bounded(index: ir.Expr, loops: list[LoopRange]) -> tuple[Linear | None, tuple[int, int]]:
    """`index` as a sum of a linear form and terms of constant range
    (`16 * jb + (12 * il) % 16 + jl`: the form 16 jb + jl, and (0, 15)),
    or (None, _) when some term is neither."""
    form: Linear = {1: 0}
    low = high = 0
    for term in summands(index):
        part = linear(term)
        if part is not None:
            form = _add(form, part, 1)
            continue
        span = _const_range(term, loops)
        if span is None:
            return None, (0, 0)
        low, high = low + span[0], high + span[1]
    return form, (low, high)


_MAX_MIN_LOOPS = 3  # loops stopping at a min(a, b) whose sides are tried one by one


def _min_choices(loops: list[LoopRange]):
    """`loops`, and, for each loop stopping at `min(a, b)`, with `a` or `b` as
    its stop: both bound it (`i < min(16, R - 16 b)` gives i < 16 and
    16 b + i < R), and an index may need either."""
    yield loops
    picks = [k for k, loop in enumerate(loops) if isinstance(loop.stop, ir.Binary) and loop.stop.op == "min"]
    if not picks or len(picks) > _MAX_MIN_LOOPS:
        return
    for sides in itertools.product((0, 1), repeat=len(picks)):
        choice = list(loops)
        for k, side in zip(picks, sides):
            stop = choice[k].stop
            choice[k] = LoopRange(choice[k].var, choice[k].start, stop.rhs if side else stop.lhs, choice[k].step)
        yield choice


def summands(e: ir.Expr) -> list[ir.Expr]:
    """The terms of a sum `a + b + ...` (`e` itself when it is no sum)."""
    terms, stack = [], [e]
    while stack:
        e = stack.pop()
        if isinstance(e, ir.Binary) and e.op == "+":
            stack += [e.lhs, e.rhs]
        else:
            terms.append(e)
    return terms


def _below(form: Linear, bound: Linear, loops: list[LoopRange], spread: tuple[int, int] = (0, 0)) -> bool:
    """0 <= form + t < bound over the loops' ranges, for any t in `spread`."""
    low = _extreme(form, loops, largest=False)
    high = _extreme(form, loops, largest=True)
    if low is None or high is None:
        return False
    low, high = _add(low, {1: spread[0]}, 1), _add(high, {1: spread[1]}, 1)
    nonneg = all(v >= 0 for v in low.values())
    slack = _add(_undivide(high), bound, -1)  # high - size must be <= -1
    below = all(v <= 0 for k, v in slack.items() if k != 1) and slack.get(1, 0) <= -1
    return nonneg and below


def _undivide(form: Linear) -> Linear:
    """An upper bound of `form` with c * (K // d) replaced by c / d * K where d divides
    c > 0 (d * (K // d) <= K): `32 * s + l` for s < K // 32, l < 32 stays below K."""
    out: Linear = {}
    for key, coef in form.items():
        if isinstance(key, tuple) and coef > 0 and coef % key[1] == 0:
            key, coef = key[0], coef // key[1]
        out[key] = out.get(key, 0) + coef
    return out


def _const_range(e: ir.Expr, loops: list[LoopRange]) -> tuple[int, int] | None:
    """Constant bounds of index arithmetic on masked bits (`x & 7`, `(x & 7) >> 1`,
    `32 * (j & 1) + 4`, whatever x is: the in-block indices of quantized views)
    and on loops of constant range (`2 + l // 4` for l in range(8))."""
    match e:
        case ir.Const(value) if isinstance(value, int) and not isinstance(value, bool):
            return value, value
        case ir.Var(sym) if sym.role == "loop":
            return _loop_range(sym, loops)
        case ir.Binary("&", _, ir.Const(mask)) if mask >= 0:
            return 0, mask  # two's complement: no bit beyond the mask survives
        case ir.Binary(">>" | "//" | "%" as op, a, ir.Const(c)) if c >= (0 if op == ">>" else 1):
            r = _const_range(a, loops)
            if r is None or r[0] < 0:
                return None
            if op == "%":
                return (r[0], r[1]) if r[1] < c else (0, c - 1)
            return (r[0] >> c, r[1] >> c) if op == ">>" else (r[0] // c, r[1] // c)
        case ir.Binary("+", a, b):
            ra, rb = _const_range(a, loops), _const_range(b, loops)
            return None if ra is None or rb is None else (ra[0] + rb[0], ra[1] + rb[1])
        case ir.Binary("-", a, b):
            ra, rb = _const_range(a, loops), _const_range(b, loops)
            return None if ra is None or rb is None else (ra[0] - rb[1], ra[1] - rb[0])
        case ir.Binary("*", a, ir.Const(c)) | ir.Binary("*", ir.Const(c), a) if c >= 0:
            r = _const_range(a, loops)
            return None if r is None else (r[0] * c, r[1] * c)
    return None


def _loop_range(sym: ir.Sym, loops: list[LoopRange]) -> tuple[int, int] | None:
    for loop in loops:
        if loop.var is sym:
            low, high = _bounds(loop)
            if low is None or high is None or set(low) != {1} or set(high) != {1}:
                return None
            return low[1], high[1]
    return None


def _quant_block_index(index: ir.Expr, size: ir.Expr, loops: list[LoopRange]) -> bool:
    """`x >> c` on the block axis of a quantized tensor's view (K / block blocks):
    in bounds when 0 <= x < K / 2**(log2(block) - c), K being a multiple of the block."""
    if not (isinstance(index, ir.Binary) and index.op == ">>" and isinstance(index.rhs, ir.Const)):
        return False
    if not isinstance(size, ir.Shape) or size.tensor.view is None:
        return False
    parent = size.tensor.view.parent
    if size.axis != parent.rank - 1:
        return False
    block, bits = parent.quant.fmt.block, index.rhs.value
    if not 0 <= bits <= block.bit_length() - 1:
        return False
    factor = block >> bits
    dim = parent.dims[-1]
    if isinstance(dim, int):
        bound: Linear = {1: dim // factor}
    else:
        bound = {dim: 1} if factor == 1 else {(dim, factor): 1}
    form = linear(index.lhs)
    if form is None:
        return False
    low = _extreme(form, loops, largest=False)
    high = _extreme(form, loops, largest=True)
    if low is None or high is None:
        return False
    slack = _add(_undivide(high), bound, -1)
    return all(v >= 0 for v in low.values()) and all(v <= 0 for k, v in slack.items() if k != 1) \
        and slack.get(1, 0) <= -1
