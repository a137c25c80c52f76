"""Split one LLVM module into parts that LLVM can optimize and compile at the
same time (in other processes: llvmlite holds one lock for all its calls).

A stdlib kernel is one module of 30,000 lines or more, most of it in a few
large outlined loop bodies (`k__unit__par1__body`, ...). Those bodies are the
unit of the split: each lives in exactly one part (the parts balanced by
lines, at most MAX_PARTS of them); it becomes `hidden` (visible to the other
objects of the same library, not outside it) where it is defined, and a
`declare` where it is called. Everything else stays whole:

- exported definitions (the kernel, its entry points) stay in part 0, with the
  internal functions they call themselves (`k__unit`, `k__any`: LLVM inlines
  them there);
- small internal helpers (`__dsl_num_threads`, masked-load helpers, anything
  `alwaysinline`) are copied into every part that calls them, so they still
  inline;
- internal variables that parts share (the thread count `__dsl_set_num_threads`
  writes, the once-only warning flag, scratch caches) are defined, `hidden`,
  in part 0 and declared in the others, so the library keeps one of each;
- constants, declarations, types and metadata are copied.

    >>> parts = split_module(module)                   # doctest: +SKIP
    >>> len(parts), parts[0].startswith("; ModuleID")  # doctest: +SKIP
    (12, True)

Each part is LLVM IR text; linked together, the parts' objects make the same
library the whole module would. The split depends on the module alone (not
on how many processes compile it), so a library is the same on every machine.
Measured on matmul_f32 (35,000 lines; Zen 4): LLVM took 3.0 s for the whole
module and 2.5 s for its 12 parts one after another, since some of its
passes grow faster than the size of what they see.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property

import llvmlite.ir as ir

# Internal functions of at most this many lines are copied, not moved (they
# are helpers; the loop bodies worth a process of their own are thousands).
SMALL_FUNCTION_LINES = 300
MAX_PARTS = 16
_REFERENCE = re.compile(r'@"((?:[^"\\]|\\.)*)"|@([-\w.$]+)')
_LOCAL_LINKAGE = re.compile(r"^(define |@\S+ = )(internal|private) ")


@dataclass
class _Global:
    """One global value of the module: its text and what it refers to."""

    value: ir.GlobalValue
    text: str
    known: dict  # the module's globals by name

    @cached_property
    def refs(self) -> frozenset[str]:
        """The module's globals that the text names (found only when a split needs them)."""
        names = {m.group(1) if m.group(1) is not None else m.group(2) for m in _REFERENCE.finditer(self.text)}
        return frozenset(n for n in names if n in self.known)

    @property
    def name(self) -> str:
        return self.value.name

    @property
    def is_definition(self) -> bool:
        return isinstance(self.value, ir.Function) and not self.value.is_declaration

    @property
    def is_exported_definition(self) -> bool:
        """A function or variable defined here that other libraries see."""
        if isinstance(self.value, ir.Function):
            return self.is_definition and not self.is_local
        return self.value.initializer is not None and not self.is_local

    @property
    def is_local(self) -> bool:
        return self.value.linkage in ("internal", "private")

    @property
    def lines(self) -> int:
        return self.text.count("\n") + 1


def split_module(module: ir.Module) -> list[str]:
    """`module` as LLVM IR texts: one per large internal function that no
    exported function calls, plus part 0 (at most MAX_PARTS; just one text
    when there is nothing to move)."""
    whole = {v.name: _Global(v, str(v), module.globals) for v in module.globals.values()}
    metadata = module._get_metadata_lines()
    movable = [g for g in whole.values() if _movable(g)]
    if movable and not any("@" in line for line in metadata):  # (metadata naming a global would have to follow it)
        kept = {r for g in whole.values() if g.is_exported_definition for r in g.refs}
        movable = sorted((g for g in movable if g.name not in kept), key=lambda g: -g.lines)
    else:
        movable = []
    parts = min(len(movable) + 1, MAX_PARTS)
    if parts < 2:
        return [_part_text(module, whole, {}, set(whole), 0, metadata)]
    homes = _balance(whole, movable, parts)
    used = [_closure(whole, {n for n, h in homes.items() if h == p}, homes) for p in range(parts)]
    # Shared state lives in the first part that uses it; the others declare it.
    for name, g in whole.items():
        users = [p for p, u in enumerate(used) if name in u]
        if _is_shared_state(g) and len(users) > 1:
            homes[name] = users[0]
    return [_part_text(module, whole, homes, u, p, metadata) for p, u in enumerate(used)]


def _movable(g: _Global) -> bool:
    """A large internal function: it gets one home part."""
    return (g.is_definition and g.is_local and g.lines > SMALL_FUNCTION_LINES
            and "alwaysinline" not in g.value.attributes)


def _is_shared_state(g: _Global) -> bool:
    """An internal variable whose one copy every part must use."""
    return isinstance(g.value, ir.GlobalVariable) and g.is_local and not g.value.global_constant


def _balance(whole: dict[str, _Global], movable: list[_Global], parts: int) -> dict[str, int]:
    """Home parts: exported definitions in part 0, each large internal function
    (largest first) in the part with the fewest lines so far."""
    homes = {n: 0 for n, g in whole.items() if g.is_exported_definition}
    load = [sum(whole[n].lines for n in homes)] + [0] * (parts - 1)
    for g in movable:
        part = min(range(parts), key=lambda p: load[p])
        homes[g.name] = part
        load[part] += g.lines
    return homes


def _closure(whole: dict[str, _Global], roots: set[str], homes: dict[str, int]) -> set[str]:
    """`roots` and what they refer to, through copied globals (a function
    homed elsewhere is referred to, not followed)."""
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in roots or name not in homes:
            todo.extend(whole[name].refs)
    return seen


def _part_text(module: ir.Module, whole: dict[str, _Global], homes: dict[str, int], used: set[str],
               part: int, metadata: list[str]) -> str:
    lines = ['; ModuleID = "%s"' % (module.name if part == 0 else f"{module.name}.part{part}"),
             'target triple = "%s"' % module.triple,
             'target datalayout = "%s"' % module.data_layout, ""]
    lines += [t.get_declaration() for t in module.get_identified_types().values()]
    for name, g in whole.items():
        if name not in used:
            continue
        if name in homes and homes[name] != part:  # defined in another part
            lines.append(_declaration(g))
        elif name in homes and g.is_local:
            lines.append(_hidden(g.text))  # a moved function, or shared state, in its own part
        else:
            lines.append(g.text)
    lines += metadata
    return "\n".join(lines)


def _hidden(text: str) -> str:
    """`text` (a definition) with internal or private linkage made hidden."""
    changed, count = _LOCAL_LINKAGE.subn(lambda m: f"{m.group(1)}hidden ", text, count=1)
    assert count == 1, text.split("\n", 1)[0]
    return changed


def _declaration(g: _Global) -> str:
    """A declaration of `g`, defined in another part: hidden if it was
    internal (a hidden reference to an exported symbol would hide it)."""
    visibility = "hidden " if g.is_local else ""
    if isinstance(g.value, ir.Function):
        args = ", ".join(str(a) for a in g.value.ftype.args)
        return f"declare {visibility}{g.value.ftype.return_type} {g.value.get_reference()}({args})"
    return f"{g.value.get_reference()} = external {visibility}global {g.value.value_type}"
