"""Strided vector loads as transposes in registers (run after every schedule, the automatic one too).

After `vectorize(j)`, a load whose lanes step along an outer axis of a tensor
is a gather. When the loop around it moves along the tensor's contiguous
innermost axis, W of its iterations read a W x W block of the tensor column
by column:

    for i in range(0, 16):                        for i.t in range(0, 1):
        Y[i, j0 + ramp(0, 1, 16)] =                   r0 = X[j0 + 0, ramp(i.t * 16, 1, 16)]   # rows:
            X[j0 + ramp(0, 1, 16), i]       -->       ...                                    # contiguous
                                                      r15 = X[j0 + 15, ramp(i.t * 16, 1, 16)]
                                                      c0, ..., c15 = shuffles of r0 ... r15  # the transpose
                                                      Y[i.t * 16 + 0, j0 + ramp(0, 1, 16)] = c0
                                                      ...

The block is read row by row instead (W contiguous loads) and transposed with
log2(W) rounds of interleaving shuffles (`ir.Shuffle`); the W iterations of
the loop become W copies of its body, each taking its column. Same elements,
same values: a gather touches W cache lines per vector, the rows one each.

Applies to a loop with a constant trip count that W divides, whose body is
straight-line code (assignments and stores), to unmasked loads proven in
bounds (`safe`), of a power-of-two lane count W, whose one vector index is a
single ramp on an axis other than the innermost, and whose innermost index is
`base + i` (the loop variable with coefficient 1; `base` free of it). The
tensor must not be written in the loop (nor anything, in an `inplace` kernel,
where outputs may alias it): the rows are read before the copies run.

The ramp may also be shifted by the loop variable, by a different constant
d(i) in [0, W) for each of the W iterations (`X[16 jb + (12 i) % 16 + ramp,
16 ib + i]`: each row of a tile of Y starts on a cache line when Y's rows are
4 elements mod 16 apart). Then 2W rows are read (those up to W + max d - 1;
the lanes past them are never picked), both W x W blocks are transposed, and
column i is lanes d(i) ... d(i) + W - 1 of the two blocks' columns i, end to
end: one two-source shuffle (`valignd`) per register of lanes (AVX2 holds
8 of 16: the rows are read and transposed in pieces of 8, as above).
"""

from __future__ import annotations

import functools
from dataclasses import replace

from .. import ir
from ..bounds_proof import linear
from ..machine import Machine
from ..rewrite import map_expr, map_stmts, stmt_exprs, walk_expr
from ..vector import lanes_of
from .dependence import expr_key
from .nest import add, i64, mul, substitute, substitute_expr

name = "transpose_loads"
MAX_BLOCKS = 2  # transposes per loop: each holds 2W vectors live
MAX_STATEMENTS = 512  # of the copied body


def run(kernel: ir.Kernel, machine: Machine) -> ir.Kernel:
    """Every eligible loop of `kernel` rewritten (innermost first); `machine`
    tells how many lanes one register holds. `kernel` itself when none is."""
    changed = []

    def rewrite(s: ir.Stmt):
        new = _rewrite(kernel, s, machine)
        changed.append(new is not None)
        return new

    body = map_stmts(kernel.body, None, rewrite)
    return replace(kernel, body=body) if any(changed) else kernel


def _rewrite(kernel: ir.Kernel, loop: ir.Stmt, machine: Machine):
    if not isinstance(loop, ir.For) or loop.kind == "parallel" or loop.step != 1:
        return None
    if not (isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const)):
        return None
    if any(not isinstance(s, (ir.Assign, ir.Store)) for s in loop.body):
        return None
    blocks = _blocks(kernel, loop)
    if not blocks:
        return None
    width = lanes_of(blocks[0])
    trips = loop.stop.value - loop.start.value
    if any(lanes_of(b) != width for b in blocks) or trips % width or len(loop.body) * width > MAX_STATEMENTS:
        return None
    if trips != width and any(_shifted(b, loop) for b in blocks):
        return None
    return _transposed(loop, blocks, width, trips, machine)


def _blocks(kernel: ir.Kernel, loop: ir.For) -> list[ir.Load]:
    """The distinct loads of `loop`'s body that a transpose can serve."""
    written = {s.tensor for s in loop.body if isinstance(s, ir.Store)}
    found: dict = {}
    for s in loop.body:
        for e in stmt_exprs(s):
            for n in walk_expr(e):
                if isinstance(n, ir.Load) and _eligible(n, loop):
                    if n.tensor in written or (written and kernel.options.inplace):
                        return []
                    found.setdefault(expr_key(n), n)
    return list(found.values())[:MAX_BLOCKS]


def _eligible(load: ir.Load, loop: ir.For) -> bool:
    width, var = lanes_of(load), loop.var
    if load.mask is not None or not load.safe or width < 2 or width & (width - 1):
        return False
    *outer, inner = load.indices
    form = linear(inner)
    if lanes_of(inner) != 1 or form is None or form.get(var) != 1 or _uses(inner, var) != 1:
        return False
    vector_axes = [i for i in outer if lanes_of(i) > 1]
    if len(vector_axes) != 1 or any(_uses(i, var) for i in outer if lanes_of(i) == 1):
        return False
    if _uses(vector_axes[0], var) and _shifted(load, loop) is None:
        return False
    vectors = [n for n in walk_expr(vector_axes[0]) if lanes_of(n) > 1]
    ramps = [n for n in vectors if isinstance(n, ir.Ramp)]
    # Only the ramp and the operations over it are vectors (no vector locals).
    return len(ramps) == 1 and all(isinstance(n, (ir.Ramp, ir.Binary, ir.Unary)) for n in vectors)


def _uses(e: ir.Expr, var: ir.Sym) -> int:
    """How many times `e` reads `var`."""
    return sum(1 for n in walk_expr(e) if isinstance(n, ir.Var) and n.sym is var)


def _transposed(loop: ir.For, blocks: list[ir.Load], width: int, trips: int, machine: Machine) -> list[ir.Stmt]:
    """The loop's W iterations as W copies of its body after the transposes.
    A block wider than a register is done in pieces of n = one register of
    lanes: the pieces of columns q n ... q n + n - 1 just before their copies,
    so only those columns are live at a time."""
    step = ir.Sym(f"{loop.name}.t", loop.var.type, "loop")
    first = add(loop.start, mul(ir.Var(step), i64(width))) if trips > width else loop.start
    n = min(width, max(2, min(machine.lanes(b.type) for b in blocks)))
    # each block as read (its ramp unshifted) and the shift of each column
    reads = [_shifted(load, loop) or (load, (0,) * width) for load in blocks]
    body: list[ir.Stmt] = []
    for q in range(width // n):
        columns: dict = {}
        for k, (load, (read, shifts)) in enumerate(zip(blocks, reads)):
            stmts, columns[expr_key(load)] = _columns(read, shifts, loop.var, first, q, n,
                                                      f"{load.tensor.name}.{k}", loop.span)
            body.extend(stmts)
        for c in range(n):
            def pick(e: ir.Expr, c=c) -> ir.Expr:
                cols = columns.get(expr_key(e)) if isinstance(e, ir.Load) else None
                return cols[c] if cols is not None else e
            copy = map_stmts(loop.body, pick)
            body.extend(substitute(copy, {loop.var: add(first, i64(q * n + c))}))
    if trips == width:
        return body
    return [ir.For(step, i64(0), i64(trips // width), 1, tuple(body), f"{loop.name}.t", loop.kind, loop.span)]


def _columns(load: ir.Load, shifts: tuple[int, ...], var: ir.Sym, first: ir.Expr, q: int, n: int,
             label: str, span) -> tuple[list[ir.Stmt], list[ir.Var]]:
    """Statements putting columns q n ... q n + n - 1 of the block `load`
    gathers from into the returned locals, column c moved down by
    shifts[c] rows (all 0 for a load that is not shifted): rows 0 ... W +
    max(shifts) - 1 read in pieces of n rows of n lanes, each piece
    transposed; then each n lanes of a column are a piece of it, or one
    shuffle of two (where a shift does not start a piece)."""
    width = lanes_of(load)
    out: list[ir.Stmt] = []

    def local(name: str, value: ir.Expr, lanes: int) -> ir.Var:
        sym = ir.Sym(f"{label}.{name}", value.type, "local", lanes=lanes)
        out.append(ir.Assign(sym, value, span))
        return ir.Var(sym)

    tag = f".{q}" if n < width else ""
    count = width + max(shifts)
    pieces = -(-count // n)
    parts: list[list[ir.Expr]] = [[] for _ in range(n)]
    for p in range(pieces):  # each piece's rows read just before its transpose
        rows = [local(f"r{s}{tag}", _row(load, var, add(first, i64(q * n)), s, n), n)
                for s in range(p * n, min(count, (p + 1) * n))]
        rows += [rows[-1]] * (n - len(rows))  # lanes no column picks
        for c, col in enumerate(_interleave_rounds(rows, local, f".{p}{tag}" if pieces > 1 else "")):
            parts[c].append(col)
    columns = []
    for c in range(n):
        d, column = shifts[q * n + c], []
        for k in range(width // n):
            a, off = divmod(d + k * n, n)
            column.append(parts[c][a] if off == 0 else
                          local(f"a{q * n + c}.{k}", ir.Shuffle(parts[c][a], parts[c][a + 1], tuple(range(off, off + n))),
                                n))
        columns.append(_join(column, local, f"c{q * n + c}"))
    return out, columns


def _shifted(load: ir.Load, loop: ir.For) -> tuple[ir.Load, tuple[int, ...]] | None:
    """For a load whose ramp (of stride 1) is shifted by the loop variable,
    `load` unshifted and the shift d(i) of each iteration, d(i) in [0, W)
    (the least taken into the ramp); None for any other load."""
    *outer, _ = load.indices
    axis = next(k for k, i in enumerate(outer) if lanes_of(i) > 1)
    if not (isinstance(loop.start, ir.Const) and isinstance(loop.stop, ir.Const)):
        return None
    ramps, shift = [], []
    rest = _without_shift(outer[axis], loop.var, ramps, shift)
    if not shift or rest is None or len(ramps) != 1 or ramps[0].stride != 1:
        return None
    values = []
    for v in range(loop.start.value, loop.stop.value):
        value = _evaluate(shift, loop.var, v)
        if value is None:
            return None
        values.append(value)
    low = min(values)
    shifts = tuple(v - low for v in values)
    if max(shifts) >= lanes_of(load):
        return None
    rest = map_expr(rest, lambda n: ir.Ramp(add(n.base, i64(low)), 1, n.lanes, n.span) if isinstance(n, ir.Ramp)
                    else n)
    indices = list(load.indices)
    indices[axis] = rest
    return replace(load, indices=tuple(indices)), shifts


def _without_shift(e: ir.Expr, var: ir.Sym, ramps: list, shift: list) -> ir.Expr | None:
    """`e` without its terms (summands, also of a ramp's base) that read
    `var`, which go to `shift`; its ramps go to `ramps`. None when a
    vector term reads `var`."""
    if isinstance(e, ir.Binary) and e.op == "+":
        a, b = _without_shift(e.lhs, var, ramps, shift), _without_shift(e.rhs, var, ramps, shift)
        if a is None or b is None:
            return None
        return replace(e, lhs=a, rhs=b)
    if isinstance(e, ir.Ramp):
        base = _without_shift(e.base, var, [], shift)
        ramps.append(e)
        return None if base is None else replace(e, base=base)
    if _uses(e, var):
        if lanes_of(e) > 1:
            return None
        shift.append(e)
        return i64(0)
    return e


def _evaluate(terms: list[ir.Expr], var: ir.Sym, value: int) -> int | None:
    """The sum of `terms` with `var` = value, when they hold nothing else."""
    def ev(e: ir.Expr) -> int | None:
        match e:
            case ir.Const(v) if isinstance(v, int) and not isinstance(v, bool):
                return v
            case ir.Var(sym) if sym is var:
                return value
            case ir.Binary("+" | "-" | "*" | "//" | "%" as op, a, b):
                x, y = ev(a), ev(b)
                if x is None or y is None:
                    return None
                if op in ("//", "%"):  # as the target computes them: for x >= 0, y > 0 only
                    return None if x < 0 or y <= 0 else x // y if op == "//" else x % y
                return x + y if op == "+" else x - y if op == "-" else x * y
        return None

    total = 0
    for t in terms:
        v = ev(t)
        if v is None:
            return None
        total += v
    return total


def _row(load: ir.Load, var: ir.Sym, first: ir.Expr, s: int, lanes: int) -> ir.Load:
    """Lane s of the gather's ramp, `lanes` consecutive elements from `first` along the last axis."""
    def lane(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Ramp):
            return add(e.base, i64(s * e.stride))
        return e

    *outer, inner = load.indices
    outer = [map_expr(i, lane) if lanes_of(i) > 1 else i for i in outer]
    inner = substitute_expr(inner, {var: ir.Ramp(first, 1, lanes)})
    return replace(load, indices=(*outer, inner))


def _interleave_rounds(block: list[ir.Expr], local, tag: str) -> list[ir.Expr]:
    """The columns of a square block of n registers: log2(n) rounds pairing
    registers k and k + 2^r, each pair giving the low and the high halves of
    an interleave (`_round_masks`). The rounds interleave inside each 128-bit
    lane first, then move whole lanes, as x86's unpck and shuf_i32x4 do:
    AVX-512 runs a 16 x 16 f32 block 1.8x faster so than by interleaving
    whole registers, whose every shuffle is a two-source vpermt2d. The
    columns come out in a bit-shuffled order, put right at the end."""
    n = len(block)
    rounds = _round_masks(n, max(1, min(n, 128 // block[0].type.bits)))
    block = _run_rounds(block, rounds, lambda r, k, which, a, b, mask:
                        local(f"s{r}.{which}{k}{tag}", ir.Shuffle(a, b, mask), n))
    return [block[k] for k in _column_order(n, rounds)]


def _run_rounds(block: list, rounds, pair) -> list:
    """`block` after `rounds`: in round r, registers k and k + 2^r (k without
    that bit) become pair(r, k, 'lo' / 'hi', the two, the mask) in turn."""
    for r, (low, high) in enumerate(rounds):
        apart = 1 << r
        new = list(block)
        for k in range(len(block)):
            if not k & apart:
                a, b = block[k], block[k + apart]
                new[k], new[k + apart] = pair(r, k, "lo", a, b, low), pair(r, k, "hi", a, b, high)
        block = new
    return block


@functools.cache
def _round_masks(n: int, lane: int) -> tuple[tuple[tuple[int, ...], tuple[int, ...]], ...]:
    """The (low, high) shuffle masks over the concatenation of two n-element
    registers, round by round: in each `lane`-element lane, the low (high)
    halves of both interleaved in blocks of 1, 2, ... lane / 2 elements; then
    the even (odd) lanes of the first, followed by those of the second, until
    log2(n) rounds are done."""
    rounds = []
    g = 1
    while g < lane:
        low, high = [], []
        for base in range(0, n, lane):
            for half, out in ((0, low), (lane // 2, high)):
                for b in range(lane // 2 // g):
                    for source in (0, n):
                        out.extend(source + base + half + b * g + e for e in range(g))
        rounds.append((tuple(low), tuple(high)))
        g *= 2
    while len(rounds) < n.bit_length() - 1:
        low, high = [], []
        for parity, out in ((0, low), (1, high)):
            for source in (0, n):
                for l in range(parity, n // lane, 2):
                    out.extend(source + l * lane + e for e in range(lane))
        rounds.append((tuple(low), tuple(high)))
    return tuple(rounds)


def _column_order(n: int, rounds) -> list[int]:
    """Which register holds column c after `rounds`, for c = 0 ... n - 1
    (found by running the rounds on (row, column) labels, once per block shape)."""
    return list(_found_order(n, rounds))


@functools.cache
def _found_order(n: int, rounds) -> tuple[int, ...]:
    labels = [[(row, col) for col in range(n)] for row in range(n)]
    regs = _run_rounds(labels, rounds, lambda r, k, which, a, b, mask: [(a + b)[m] for m in mask])
    where = {}
    for k, reg in enumerate(regs):
        assert [row for row, _ in reg] == list(range(n)) and len({col for _, col in reg}) == 1, "not a transpose"
        where[reg[0][1]] = k
    return tuple(where[c] for c in range(n))


def _join(parts: list[ir.Expr], local, name: str) -> ir.Var:
    """One local holding `parts` end to end (pairwise concatenation)."""
    while len(parts) > 1:
        n = lanes_of(parts[0])
        both = tuple(range(2 * n))
        last = len(parts) == 2
        parts = [local(name if last else f"{name}.{k}", ir.Shuffle(a, b, both), 2 * n)
                 for k, (a, b) in enumerate(zip(parts[0::2], parts[1::2]))]
    return parts[0]
