"""Which source loops LLVM vectorized, read back from the optimized module.

Every loop the back-end emits carries `!llvm.loop !{self, !{"dsl.loop", name,
line, col}}` (`llvm/stmts.py`); LLVM keeps a loop's hints on the loops it makes
from it and marks them `llvm.loop.isvectorized`. A vector loop is one such
loop whose latch block computes on vectors; its widest element count is the
width. `vectorized_loops(text)` maps (name, line, col) to that width, or 0
for a tagged loop that stayed scalar.

    >>> vectorized_loops(str(optimized_module))          # doctest: +SKIP
    {('i', 5, 5): (8, 'float')}
"""

from __future__ import annotations

import re

_NODE = re.compile(r"^!(\d+) = (?:distinct )?!\{(.*)\}$", re.MULTILINE)
_TAG = re.compile(r'^!"dsl\.loop", !"([^"]*)", i32 (\d+), i32 (\d+)$')
_LATCH = re.compile(r"!llvm\.loop !(\d+)")
# A shufflevector's lane mask is a vector of i32 whatever the data's type.
_SHUFFLE_MASK = re.compile(r"(?<=\S), <\d+ x i32> (?:zeroinitializer|<[^>\n]*>)")
_VECTOR = re.compile(r"<(\d+) x (float|double|half|i8|i16|i32|i64)>")


def vectorized_loops(text: str) -> dict[tuple[str, int, int], tuple[int, str]]:
    """(loop name, line, col) -> (lanes, element type) of its widest vector
    loop; (0, '') when LLVM left every copy of it scalar."""
    nodes = {int(m.group(1)): m.group(2) for m in _NODE.finditer(text)}
    tags = {}
    for number, body in nodes.items():
        found = _TAG.match(body)
        if found:
            tags[number] = (found.group(1), int(found.group(2)), int(found.group(3)))
    loop_tag = {}
    for number, body in nodes.items():
        refs = {int(r) for r in re.findall(r"!(\d+)", body)}
        for tag in refs & tags.keys():
            loop_tag[number] = tags[tag]
    out: dict[tuple[str, int, int], tuple[int, str]] = {}
    for block in _blocks(text):
        latch = _LATCH.search(block)
        if latch is None or int(latch.group(1)) not in loop_tag:
            continue
        key = loop_tag[int(latch.group(1))]
        widths = [(int(n), t) for n, t in _VECTOR.findall(_SHUFFLE_MASK.sub("", block))]
        best = max(widths, default=(0, ""))
        out[key] = max(out.get(key, (0, "")), best)
    return out


def _blocks(text: str):
    """The basic blocks of every function, as text."""
    block: list[str] = []
    for line in text.splitlines():
        if line and not line.startswith((" ", "\t")):  # a label, a define, or '}'
            if block:
                yield "\n".join(block)
            block = []
        block.append(line)
    if block:
        yield "\n".join(block)
