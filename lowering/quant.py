"""GGML's block-quantized tensor types in the language: `w: q4_k[N, K]`.

A quantized tensor is a u8 parameter whose dims count *values* (its last axis
is a whole number of blocks); kernels never load it directly. The type checker
turns every access into loads from typed *views* of its block bytes (one per
field of ggml's block struct, `BlockView`), and arithmetic on them:

    w[n, k]          the dequantized f32 value (bit-exact with dequantize_row_*)
    w.q[n, s, l]     the integer level of value s * G + l (G values share a scale)
    w.scale[n, s]    the f32 scale of group s; w.min[n, s] its min (q4_k, q5_k)
    w.d[n, b], w.qs[n, b, i], ...   block b's fields, as in ggml's structs

so everything below the type checker sees ordinary loads. A view's first axes
are the parent's (a row stride in blocks), then the block axis (K / block
values), then, for an array field, the bytes or values inside the block.

    >>> FORMATS["q4_k"].field("qs")
    Field(name='qs', dtype=u8, offset=16, count=128)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from . import ir
from .arith import add, i64, mul
from .types import BOOL, F16, F32, I8, I16, U8, ScalarType


@dataclass(frozen=True)
class Field:
    """One field of a block: `count` values of `dtype` at byte `offset` (count 0: one scalar)."""

    name: str
    dtype: ScalarType
    offset: int
    count: int


@dataclass(frozen=True)
class QuantFormat:
    """A block format: `block` values in `nbytes` bytes; `group` values share one
    scale (the middle axis of `w.q`); `level` is the type of `w.q`."""

    name: str
    block: int
    nbytes: int
    group: int
    level: ScalarType
    has_min: bool
    fields: tuple[Field, ...]

    def field(self, name: str) -> Field | None:
        if name == "blocks":
            return Field("blocks", U8, 0, self.nbytes)
        return next((f for f in self.fields if f.name == name), None)

    @property
    def align(self) -> int:
        """The largest field element: block data must start at a multiple of it."""
        return max(f.dtype.itemsize for f in self.fields)

    @property
    def names(self) -> tuple[str, ...]:
        """What `w.<name>` may be: the computed fields, the raw ones, the blocks."""
        return ("q", "scale") + (("min",) if self.has_min else ()) + tuple(f.name for f in self.fields) + ("blocks",)


FORMATS = {f.name: f for f in (
    QuantFormat("q8_0", 32, 34, 32, I8, False, (Field("d", F16, 0, 0), Field("qs", I8, 2, 32))),
    QuantFormat("q4_k", 256, 144, 32, U8, True, (Field("d", F16, 0, 0), Field("dmin", F16, 2, 0),
                                                  Field("scales", U8, 4, 12), Field("qs", U8, 16, 128))),
    QuantFormat("q5_k", 256, 176, 32, U8, True, (Field("d", F16, 0, 0), Field("dmin", F16, 2, 0),
                                                  Field("scales", U8, 4, 12), Field("qh", U8, 16, 32),
                                                  Field("qs", U8, 48, 128))),
    QuantFormat("q6_k", 256, 210, 16, I8, False, (Field("ql", U8, 0, 128), Field("qh", U8, 128, 64),
                                                   Field("scales", I8, 192, 16), Field("d", F16, 208, 0))),
    QuantFormat("q8_k", 256, 292, 256, I8, False, (Field("d", F32, 0, 0), Field("qs", I8, 4, 256),
                                                    Field("bsums", I16, 260, 16))),
)}


@dataclass(eq=False)
class Quantized:
    """What a quantized parameter carries: its format, its last dim divided by
    the block and by the group size (a dim bound at entry, or a constant), and
    the views made of it so far (one object per view: tensors compare by identity)."""

    fmt: QuantFormat
    blocks_dim: ir.Sym | int
    groups_dim: ir.Sym | int
    views: dict = field(default_factory=dict)


@dataclass(frozen=True, eq=False)
class BlockView:
    """A view's origin: `field` of every block of the quantized tensor `parent`.
    `rows` (default: the field's count) splits an array field into [count / rows, rows]."""

    parent: ir.TensorParam
    field: Field
    rows: int = 0


def derived_dims(kernel: ir.Kernel) -> list[tuple[ir.Sym, ir.Sym, int]]:
    """(derived dim, dim, divisor) for every `K / block` and `K / group` the
    quantized parameters use (bound at entry after K, once each)."""
    out, seen = [], set()
    for t in kernel.tensors:
        if t.quant is None or not isinstance(t.dims[-1], ir.Sym):
            continue
        for sym, divisor in ((t.quant.blocks_dim, t.quant.fmt.block), (t.quant.groups_dim, t.quant.fmt.group)):
            if sym not in seen:
                seen.add(sym)
                out.append((sym, t.dims[-1], divisor))
    return out


def view(param: ir.TensorParam, name: str, rows: int = 0) -> ir.TensorParam:
    """The view of field `name` of quantized `param` (made once, then shared).

    `rows` > 0 shapes an array field as [count / rows, rows] per block, so the
    `l` of `w.q[n, s, l]` is checked against the group size exactly.
    """
    q = param.quant
    key = (name, rows)
    found = q.views.get(key)
    if found is not None:
        return found
    f = q.fmt.field(name)
    inner: tuple = () if f.count == 0 else ((f.count // rows, rows) if rows else (f.count,))
    made = ir.TensorParam(f"{param.name}.{name}", f.dtype, param.dims[:-1] + (q.blocks_dim,) + inner,
                          False, param.span, view=BlockView(param, f, rows))
    q.views[key] = made
    return made


# ---------------------------------------------------------------- expressions
# Index arithmetic is i64 and folded as it is built; bit fields are u8.

def _shr(e: ir.Expr, bits: int) -> ir.Expr:
    if bits == 0:
        return e
    if isinstance(e, ir.Const):
        return i64(e.value >> bits)
    if isinstance(e, ir.Binary) and e.op == ">>" and isinstance(e.rhs, ir.Const):
        return _shr(e.lhs, bits + e.rhs.value)
    return ir.Binary(">>", e, i64(bits), e.type)


def _and(e: ir.Expr, mask: int) -> ir.Expr:
    if isinstance(e, ir.Const):
        return ir.Const(e.value & mask, e.type)
    if isinstance(e, ir.Binary) and e.op == "&" and isinstance(e.rhs, ir.Const):
        return _and(e.lhs, e.rhs.value & mask)
    return ir.Binary("&", e, ir.Const(mask, e.type), e.type)


def _u8(e: ir.Expr) -> ir.Expr:
    return ir.Const(e.value, U8) if isinstance(e, ir.Const) else ir.Cast(e, U8)


def _bits(e: ir.Expr, shift: ir.Expr, mask: int) -> ir.Expr:
    """(e >> shift) & mask on a u8 byte, shift an i64 expression."""
    shifted = e if isinstance(shift, ir.Const) and shift.value == 0 else ir.Binary(">>", e, _u8(shift), U8)
    return _and(shifted, mask)


def _f32(e: ir.Expr) -> ir.Expr:
    return e if e.type == F32 else ir.Cast(e, F32)


def _mul_f(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Binary("*", a, b, F32)


@dataclass(frozen=True)
class Access:
    """An access of quantized `param` at outer indices `outer` (the rows), group
    `s` (an i64 expression) and, for a level, `l` in [0, group)."""

    param: ir.TensorParam
    outer: tuple[ir.Expr, ...]
    span: object = None

    @property
    def fmt(self) -> QuantFormat:
        return self.param.quant.fmt

    def load(self, name: str, block: ir.Expr, *inner: ir.Expr, rows: int = 0) -> ir.Expr:
        t = view(self.param, name, rows)
        return ir.Load(t, self.outer + (block,) + inner, F32 if t.dtype == F16 else t.dtype, self.span)

    def block_of(self, s: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
        """(block index, group within the block) of group `s`."""
        per_block = self.fmt.block // self.fmt.group
        return _shr(s, per_block.bit_length() - 1), _and(s, per_block - 1)

    def value(self, k: ir.Expr) -> ir.Expr:
        """The dequantized value of element k of the row: scale * q - min, in
        ggml's order (every product here is exact in f32, so FMA contraction
        cannot change the result)."""
        shift = self.fmt.group.bit_length() - 1
        s, l = _shr(k, shift), _and(k, self.fmt.group - 1)
        scaled = _mul_f(self.scale(s), _f32(self.level(s, l)))
        if not self.fmt.has_min:
            return scaled
        return ir.Binary("-", scaled, self.min(s), F32, self.span)

    def scale(self, s: ir.Expr) -> ir.Expr:
        b, j = self.block_of(s)
        d = self.load("d", b)
        match self.fmt.name:
            case "q4_k" | "q5_k":
                return _mul_f(d, _f32(self._scale_min(b, j)[0]))
            case "q6_k":
                return _mul_f(d, _f32(self.load("scales", b, j)))
        return d

    def min(self, s: ir.Expr) -> ir.Expr:
        b, j = self.block_of(s)
        return _mul_f(self.load("dmin", b), _f32(self._scale_min(b, j)[1]))

    def _scale_min(self, b: ir.Expr, j: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
        """ggml's get_scale_min_k4 for sub-block j (0..7) of the 12 packed bytes,
        without a branch: both forms are computed and a byte mask picks one."""
        lo, hi = self.load("scales", b, j), self.load("scales", b, add(j, i64(4)))
        top = self.load("scales", b, _and(j, 3))
        low_sc, low_m = _and(lo, 63), _and(hi, 63)
        high_sc = ir.Binary("|", _and(hi, 15), ir.Binary("<<", _bits(top, i64(6), 3), ir.Const(4, U8), U8), U8)
        high_m = ir.Binary("|", _bits(hi, i64(4), 15), ir.Binary("<<", _bits(lo, i64(6), 3), ir.Const(4, U8), U8), U8)
        if isinstance(j, ir.Const):
            return (low_sc, low_m) if j.value < 4 else (high_sc, high_m)
        upper = ir.Binary("-", ir.Const(0, U8), ir.Cast(ir.Binary(">=", j, i64(4), BOOL), U8), U8)
        lower = ir.Unary("invert", upper, U8)

        def pick(a: ir.Expr, b: ir.Expr) -> ir.Expr:
            return ir.Binary("|", ir.Binary("&", b, upper, U8), ir.Binary("&", a, lower, U8), U8)

        return pick(low_sc, high_sc), pick(low_m, high_m)

    def level(self, s: ir.Expr, l: ir.Expr) -> ir.Expr:
        """The integer level of value l of group s (u8 or i8, as `fmt.level`)."""
        b, j = self.block_of(s)
        match self.fmt.name:
            case "q4_k" | "q5_k":
                low = _bits(self.load("qs", b, _shr(j, 1), l, rows=32), mul(_and(j, 1), i64(4)), 15)
                if self.fmt.name == "q4_k":
                    return low
                high = ir.Binary("<<", _bits(self.load("qh", b, i64(0), l, rows=32), j, 1), ir.Const(4, U8), U8)
                return ir.Binary("|", low, high, U8)
            case "q6_k":
                # 16 values a group; the block's halves h hold four 32-value parts each.
                h, part, half = _shr(j, 3), _and(_shr(j, 1), 3), _and(j, 1)
                ql_row = add(add(mul(h, i64(4)), mul(_and(part, 1), i64(2))), half)
                low = _bits(self.load("ql", b, ql_row, l, rows=16), mul(_shr(part, 1), i64(4)), 15)
                high = _bits(self.load("qh", b, add(mul(h, i64(2)), half), l, rows=16), mul(part, i64(2)), 3)
                q = ir.Binary("|", low, ir.Binary("<<", high, ir.Const(4, U8), U8), U8)
                return ir.Binary("-", ir.Cast(q, I8), ir.Const(32, I8), I8)
        return self.load("qs", b, i64(0), l, rows=self.fmt.group)
