"""Schedule directives: how a kernel runs, written beside what it computes.

    @schedule(tile(i, j, 8, 64, tail=mask), reorder(i.outer, j.outer, k, i.inner, j.inner),
              unroll(i.inner), parallel(i.outer))
    def matmul(...): ...

A directive names loops by their source names (`i`), or by the names a
transform gives (`i.outer`, `i.inner`, `i.tail` after a split). Directives are
read here, in order, into `Directive` values; `transforms/` applies them to the
loop IR after lowering, each as a named pass.
"""

from __future__ import annotations

from dataclasses import dataclass

from dsl.grammar import ast
from dsl.grammar.diagnostics import DiagnosticBag, Span, did_you_mean


@dataclass(frozen=True, slots=True)
class LoopRef:
    name: str
    span: Span


@dataclass(frozen=True, slots=True)
class Directive:
    """One directive: positional loop names and integers, and keyword options."""

    name: str
    loops: tuple[LoopRef, ...]
    ints: tuple[int, ...]
    options: tuple[tuple[str, object], ...]
    span: Span

    def option(self, key: str, default=None):
        return dict(self.options).get(key, default)


@dataclass(frozen=True, slots=True)
class Choice:
    """An open parameter, `choice(4, 8, 16)`: one of `values`, picked by the
    autotuner (the first when nobody tunes). In a directive's integers and
    integer options, or, as `one_of(d1, d2)`, a whole directive."""

    values: tuple
    span: Span


# name -> (number of loops (None: two or more), number of ints allowed, keywords)
SIGNATURES: dict[str, tuple[int | None, tuple[int, ...], tuple[str, ...]]] = {
    "split": (1, (1,), ("tail",)),
    "tile": (2, (2,), ("tail",)),
    "reorder": (None, (0,), ()),
    "unroll": (1, (0, 1), ()),
    "parallel": (1, (0,), ("min_work",)),
    "hoist": (1, (0,), ()),
    "pack": (2, (0,), ()),
    "fuse": (2, (0,), ()),
    "vectorize": (1, (0, 1), ("tail", "nontemporal", "vectors")),
    "contract": (None, (0,), ("mr", "nr", "mc", "kc", "nc")),
}
INT_OPTIONS = ("mr", "nr", "mc", "kc", "nc", "min_work", "vectors")
# Bounds that keep the compiler's own arithmetic in i64 and its output finite
# (found by tests/fuzz: split(i, 10**20) broke the verifier; contract(mr=1000,
# nr=1000) spent minutes building a million-accumulator micro-kernel).
MAX_FACTOR = (1 << 31) - 1
MAX_MICRO_TILE = 1024  # mr * nr elements held in registers
TAILS = ("peel", "mask")


def read_schedule(decorators, bag: DiagnosticBag) -> tuple[Directive, ...]:
    """The directives of every `@schedule(...)` above a kernel, in order."""
    out: list[Directive] = []
    for dec in decorators:
        if dec.name.rsplit(".", 1)[-1] != "schedule":
            continue
        for kw in dec.keywords:
            bag.error(kw.span, "@schedule takes directives, e.g. @schedule(split(i, 8))")
        for arg in dec.args:
            directive = _one_of(arg, bag) if _called(arg, "one_of") else _directive(arg, bag)
            if directive is not None:
                out.append(directive)
    return tuple(out)


def _called(node, name: str) -> bool:
    return isinstance(node, ast.Call) and node.func.rsplit(".", 1)[-1] == name


def _one_of(node: ast.Call, bag: DiagnosticBag) -> Choice | None:
    """`one_of(reorder(i, k), reorder(k, i))`: one of several directives."""
    if node.keywords or len(node.args) < 2:
        bag.error(node.span, "one_of() takes two or more directives: one_of(reorder(i, k), reorder(k, i))")
        return None
    alternatives = [_directive(a, bag) for a in node.args]
    if any(a is None for a in alternatives):
        return None
    return Choice(tuple(alternatives), node.span)


def _int_or_choice(node, name: str, bag: DiagnosticBag):
    """An integer argument: a positive literal, or `choice(...)` of them."""
    items = node.args if _called(node, "choice") else (node,)
    if _called(node, "choice") and (node.keywords or not node.args):
        bag.error(node.span, "choice() takes one or more positive integers: choice(4, 8, 16)")
        return None
    for item in items:
        if not isinstance(item, ast.IntLit):
            number = _number_text(item)
            bag.error(item.span, f"{name}(): the factor must be a positive integer, not {number}" if number
                      else f"{name}(): expected a loop name or an integer")
            return None
        if item.value <= 0:
            bag.error(item.span, f"{name}(): the factor must be a positive integer, not {item.value}")
            return None
        if item.value > MAX_FACTOR:
            bag.error(item.span, f"{name}(): the factor {item.value} is too large (at most {MAX_FACTOR})")
            return None
    if not _called(node, "choice"):
        return node.value
    return Choice(tuple(dict.fromkeys(item.value for item in items)), node.span)


def _number_text(node) -> str | None:
    """'-1', '1.5': a number that is no positive integer (None for anything else)."""
    if isinstance(node, ast.FloatLit | ast.IntLit):
        return repr(node.value)
    if isinstance(node, ast.UnaryOp) and node.op == "-" and isinstance(node.operand, ast.FloatLit | ast.IntLit):
        return f"-{node.operand.value!r}"
    return None


def _directive(node, bag: DiagnosticBag) -> Directive | None:
    if not isinstance(node, ast.Call):
        bag.error(node.span, "expected a schedule directive such as split(i, 8)")
        return None
    name = node.func.rsplit(".", 1)[-1]
    if name not in SIGNATURES:
        bag.error(node.func_span, f"unknown schedule directive '{name}'", *did_you_mean(name, SIGNATURES))
        return None
    n_loops, n_ints, keywords = SIGNATURES[name]
    loops = tuple(LoopRef(a.id, a.span) for a in node.args if isinstance(a, ast.Name))
    ints = [_int_or_choice(a, name, bag) for a in node.args if not isinstance(a, ast.Name)]
    if any(v is None for v in ints):
        return None
    if name == "contract":
        n_loops = len(loops) if len(loops) <= 1 else 1
    if (n_loops is None and len(loops) < 2) or (n_loops is not None and len(loops) != n_loops) \
            or len(ints) not in n_ints:
        bag.error(node.span, f"{name}() takes {_describe(name)}")
        return None
    options = []
    for kw in node.keywords:
        value = _option(name, kw, keywords, bag)
        if value is not None:
            options.append((kw.name, value))
    mr, nr = dict(options).get("mr"), dict(options).get("nr")
    if isinstance(mr, int) and isinstance(nr, int) and mr * nr > MAX_MICRO_TILE:
        bag.error(node.span, f"{name}(): a micro-tile of mr x nr = {mr} x {nr} does not fit in registers "
                  f"(at most {MAX_MICRO_TILE} elements)")
        return None
    return Directive(name, loops, tuple(ints), tuple(options), node.span)


def _option(name: str, kw: ast.Keyword, keywords, bag: DiagnosticBag):
    if kw.name not in keywords:
        bag.error(kw.span, f"{name}() has no option '{kw.name}'", *did_you_mean(kw.name, keywords))
        return None
    if kw.name in INT_OPTIONS:
        if _called(kw.value, "choice"):
            return _int_or_choice(kw.value, name, bag)
        if not isinstance(kw.value, ast.IntLit) or kw.value.value <= 0:
            bag.error(kw.value.span, f"{kw.name}= takes a positive integer")
            return None
        if kw.value.value > MAX_FACTOR:
            bag.error(kw.value.span, f"{kw.name}={kw.value.value} is too large (at most {MAX_FACTOR})")
            return None
        return kw.value.value
    if kw.name == "nontemporal":
        if not isinstance(kw.value, ast.Name):
            bag.error(kw.value.span, "nontemporal= takes the name of the tensor the loop stores to: nontemporal=out")
            return None
        return kw.value.id
    is_choice = _called(kw.value, "choice") and kw.value.args and not kw.value.keywords
    values = []
    for item in kw.value.args if is_choice else (kw.value,):
        value = item.id if isinstance(item, ast.Name) else None
        if value not in TAILS:
            bag.error(item.span, f"tail= takes {' or '.join(TAILS)}", *did_you_mean(str(value), TAILS))
            return None
        values.append(value)
    return Choice(tuple(dict.fromkeys(values)), kw.value.span) if is_choice else values[0]


def _describe(name: str) -> str:
    return {
        "split": "a loop and a factor: split(i, 8)",
        "tile": "two loops and two factors: tile(i, j, 8, 64)",
        "reorder": "two or more loops, outermost first: reorder(k, i)",
        "unroll": "a loop and an optional factor: unroll(k) or unroll(k, 4)",
        "parallel": "one loop: parallel(i) or parallel(i, min_work=65536)",
        "hoist": "one loop: hoist(i)",
        "pack": "an input tensor and a loop: pack(B, j.outer)",
        "fuse": "two adjacent loops: fuse(i, j)",
        "vectorize": "a loop and an optional width: vectorize(i), vectorize(i, 8) or vectorize(i, vectors=4)",
        "contract": "at most one loop, the nest's outermost: contract(m) or contract()",
    }[name]
