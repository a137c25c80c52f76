"""Loops found in x86-64 assembly text, for tests that look at code generation."""

from __future__ import annotations

import re


def single_block_loops(asm: str, function_prefix: str = "") -> list[str]:
    """The single-block loops (a label, then instructions up to a jump back
    to it, with no other label between) of the functions whose names start
    with `function_prefix` (all of them by default)."""
    loops = []
    for function in re.split(r"\n(?=[A-Za-z_][\w.]*:\n)", asm):
        if not function.lstrip().startswith(function_prefix):
            continue
        label, start, lines = None, 0, function.splitlines()
        for k, line in enumerate(lines):
            if re.fullmatch(r"\.LBB\w+:", line):
                label, start = line[:-1], k
                continue
            jump = re.fullmatch(r"\s+j\w+\s+(\.LBB\w+)", line)
            if jump and jump.group(1) == label:
                loops.append("\n".join(lines[start: k + 1]))
    return loops
