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


# name -> (number of loops (None: two or more), number of ints allowed, keywords)
SIGNATURES: dict[str, tuple[int | None, tuple[int, ...], tuple[str, ...]]] = {
    "split": (1, (1,), ("tail",)),
    "tile": (2, (2,), ("tail",)),
    "reorder": (None, (0,), ()),
    "unroll": (1, (0, 1), ()),
    "parallel": (1, (0,), ()),
    "fuse": (2, (0,), ()),
    "vectorize": (1, (0, 1), ("tail",)),
    "contract": (None, (0,), ("mr", "nr", "mc", "kc", "nc")),
}
INT_OPTIONS = ("mr", "nr", "mc", "kc", "nc")
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
            directive = _directive(arg, bag)
            if directive is not None:
                out.append(directive)
    return tuple(out)


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
    ints = [a for a in node.args if not isinstance(a, ast.Name)]
    if any(not isinstance(a, ast.IntLit) for a in ints):
        bad = next(a for a in ints if not isinstance(a, ast.IntLit))
        bag.error(bad.span, f"{name}(): expected a loop name or an integer")
        return None
    if any(a.value <= 0 for a in ints):
        bad = next(a for a in ints if a.value <= 0)
        bag.error(bad.span, f"{name}(): the factor must be a positive integer, not {bad.value}")
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
    return Directive(name, loops, tuple(a.value for a in ints), tuple(options), node.span)


def _option(name: str, kw: ast.Keyword, keywords, bag: DiagnosticBag):
    if kw.name not in keywords:
        bag.error(kw.span, f"{name}() has no option '{kw.name}'", *did_you_mean(kw.name, keywords))
        return None
    if kw.name in INT_OPTIONS:
        if not isinstance(kw.value, ast.IntLit) or kw.value.value <= 0:
            bag.error(kw.value.span, f"{kw.name}= takes a positive integer")
            return None
        return kw.value.value
    value = kw.value.id if isinstance(kw.value, ast.Name) else None
    if value not in TAILS:
        bag.error(kw.value.span, f"tail= takes {' or '.join(TAILS)}", *did_you_mean(str(value), TAILS))
        return None
    return value


def _describe(name: str) -> str:
    return {
        "split": "a loop and a factor: split(i, 8)",
        "tile": "two loops and two factors: tile(i, j, 8, 64)",
        "reorder": "two or more loops, outermost first: reorder(k, i)",
        "unroll": "a loop and an optional factor: unroll(k) or unroll(k, 4)",
        "parallel": "one loop: parallel(i)",
        "fuse": "two adjacent loops: fuse(i, j)",
        "vectorize": "a loop and an optional width: vectorize(i) or vectorize(i, 8)",
        "contract": "at most one loop, the nest's outermost: contract(m) or contract()",
    }[name]
