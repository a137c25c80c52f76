"""Target intrinsics: single machine instructions the language names per ISA.

    x86.maddubs(a0, b0, a1, b1) -> i16    vpmaddubsw: u8 a * i8 b, pairs summed, saturated to i16
    x86.madd(a0, b0, a1, b1)    -> i32    vpmaddwd:   i16 a * i16 b, pairs summed (wrapping)
    x86.sign(a, b)              -> i8     vpsignb:    a, -a or 0 as b is > 0, < 0 or 0 (-(-128) wraps)
    arm.sdot(acc, a0, b0, ..., a3, b3) -> i32   sdot: acc + four i8 * i8 products (wrapping)

Each lane's operands are the pair (or quad) of values the instruction combines
into one result lane (`x86.sign` is lane-wise: one value each); `fallback` spells the same value in plain integer
arithmetic, which the reference interpreter runs and which is compiled where
the instruction does not exist. The namespaced spelling (`x86.maddubs`)
demands the instruction: the type checker refuses it on a target without the
feature. The bare spelling (`maddubs`) is the portable form: the instruction
where the target has it, the fallback elsewhere.

In a vectorized loop, lane l's operands are usually adjacent elements
(`w[2 * l]`, `w[2 * l + 1]`); the back-end then loads them as one contiguous
vector in the order the instruction wants (`lowering.interleave`).

    >>> SPECS["x86.maddubs"].group, SPECS["arm.sdot"].group
    (2, 4)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from . import ir
from .machine import Machine
from .types import BY_NAME, ScalarType

I8, U8, I16, I32, BOOL = BY_NAME["i8"], BY_NAME["u8"], BY_NAME["i16"], BY_NAME["i32"], BY_NAME["bool"]


def _pair_products(spec: TargetOpSpec, args: tuple[ir.Expr, ...], span) -> ir.Expr:
    """The sum of each pair's (or quad's) products in i32, onto the accumulator
    if the op has one; saturated to i16 for an i16 result."""
    a, b = spec.pairs(args)
    total = args[0] if spec.accumulates else None
    for x, y in zip(a, b):
        product = ir.Binary("*", _i32(x, span), _i32(y, span), I32, span)
        total = product if total is None else ir.Binary("+", total, product, I32, span)
    if spec.result == I32:
        return total
    low, high = ir.Const(-32768, I32, span), ir.Const(32767, I32, span)
    clamped = ir.Binary("max", ir.Binary("min", total, high, I32, span), low, I32, span)
    return ir.Cast(clamped, spec.result, span)


def _sign(spec: TargetOpSpec, args: tuple[ir.Expr, ...], span) -> ir.Expr:
    """a * (1, -1 or 0 as b is > 0, < 0 or 0), wrapping: vpsignb's lane. Plain
    arithmetic, not selects (whose loads would become branches)."""
    a, b = args
    zero = ir.Const(0, I8, span)
    positive = ir.Cast(ir.Binary(">", b, zero, BOOL, span), I8, span)
    negative = ir.Cast(ir.Binary("<", b, zero, BOOL, span), I8, span)
    return ir.Binary("*", a, ir.Binary("-", positive, negative, I8, span), I8, span)


@dataclass(frozen=True, slots=True)
class TargetOpSpec:
    name: str  # 'x86.maddubs'
    params: tuple[ScalarType, ...]
    result: ScalarType
    arch: tuple[str, ...]  # the triples' architectures that have it
    feature: str  # the `Machine.isa` entry it needs
    feature_label: str  # for people: 'AVX2'
    group: int  # values combined into one result lane
    accumulates: bool = False  # the first argument is an accumulator (sdot)
    meaning: Callable[..., ir.Expr] = _pair_products  # (spec, args, span): the value in plain arithmetic

    @property
    def portable(self) -> str:
        return self.name.split(".", 1)[1]

    def pairs(self, args: tuple[ir.Expr, ...]) -> tuple[tuple[ir.Expr, ...], tuple[ir.Expr, ...]]:
        """The (a, b) operands of each product, in order: ((a0, a1, ..), (b0, b1, ..))."""
        products = args[1:] if self.accumulates else args
        return products[0::2], products[1::2]


SPECS = {
    "x86.maddubs": TargetOpSpec("x86.maddubs", (U8, I8, U8, I8), I16, ("x86_64",), "avx2", "AVX2", 2),
    "x86.madd": TargetOpSpec("x86.madd", (I16, I16, I16, I16), I32, ("x86_64",), "avx2", "AVX2", 2),
    "x86.sign": TargetOpSpec("x86.sign", (I8, I8), I8, ("x86_64",), "avx2", "AVX2", 1, meaning=_sign),
    "arm.sdot": TargetOpSpec("arm.sdot", (I32, *(I8,) * 8), I32, ("aarch64", "arm64"), "dotprod",
                             "the dot-product extension (+dotprod)", 4, accumulates=True),
}
PORTABLE = {spec.portable: spec for spec in SPECS.values()}


def available(spec: TargetOpSpec, machine: Machine) -> bool:
    """Whether `machine` has the instruction of `spec`."""
    return machine.arch in spec.arch and spec.feature in machine.isa


def fallback(op: ir.TargetOp) -> ir.Expr:
    """The value of `op` in plain integer arithmetic (lane-wise on vectors).

    >>> fallback(TargetOp("x86.madd", (a0, b0, a1, b1), I32))   # doctest: +SKIP
    i32(a0) * i32(b0) + i32(a1) * i32(b1)
    """
    spec = SPECS[op.name]
    return spec.meaning(spec, op.args, op.span)


def _i32(x: ir.Expr, span) -> ir.Expr:
    return x if x.type == I32 else ir.Cast(x, I32, span)


def lowered(op: ir.TargetOp, machine: Machine | None) -> ir.Expr:
    """`op` itself where `machine` has the instruction (or is unknown), else its fallback."""
    if machine is None or available(SPECS[op.name], machine):
        return op
    return fallback(op)
