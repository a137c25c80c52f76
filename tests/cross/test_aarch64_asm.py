"""AArch64 assembly patterns (FileCheck style, not whole-file goldens): the
matmul micro-kernel is `fmla` on `.4s` in the by-element form with no stack
traffic in its loop; an int8 dot product becomes `sdot` with +dotprod. Only
LLVM's AArch64 back-end is needed, not qemu."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from dsl.backends.target import make_target
from dsl.lowering.machine import micro_tile
from dsl.lowering.types import F32
from dsl.options import CompileOptions
from dsl.pipeline import compile_file

ROOT = Path(__file__).resolve().parents[2]
NEON = CompileOptions(triple="aarch64-linux-gnu", cpu="neoverse-n1", features="+neon")
BY_ELEMENT_FMLA = re.compile(r"\bfmla\s+v\d+\.4s, v\d+\.4s, v\d+\.s\[\d\]")


def asm(path: Path, opts: CompileOptions) -> str:
    return compile_file(path, opts, stop_after="asm").asm


def innermost_loops(text: str) -> list[list[str]]:
    """The bodies of the innermost loops: from a label to the branch back to it,
    with no other backward branch inside."""
    lines = text.splitlines()
    heads = {line[:-1]: k for k, line in enumerate(lines) if re.match(r"^\.LBB\w+:$", line)}
    loops = []
    for end, line in enumerate(lines):
        target = re.search(r"^\s+(?:b\.\w+|b|cbn?z|tbn?z)\s.*?(\.LBB\w+)$", line)
        if target and heads.get(target.group(1), end) < end:
            loops.append(lines[heads[target.group(1)]:end + 1])
    return [body for body in loops if not any(inner is not body and inner[0] in body[1:] for inner in loops)]


def test_short_triple_is_the_neon_target():
    target = make_target("aarch64-linux-gnu")
    assert (target.triple, target.cpu, target.features) == ("aarch64-unknown-linux-gnu", "neoverse-n1", "+neon")
    assert (target.vector_bits, target.vector_registers) == (128, 32)


def test_neon_micro_tile_comes_from_the_register_file():
    tile = micro_tile(make_target("aarch64-linux-gnu").machine, F32)
    # 24 accumulators + 2 vectors of B + A's values in flight fit in 32 registers.
    assert (tile.mr, tile.vectors, tile.lanes) == (12, 2, 4)


def test_matmul_micro_kernel_is_by_element_fmla_without_spills():
    tile = micro_tile(make_target("aarch64-linux-gnu").machine, F32)
    text = asm(ROOT / "examples" / "matmul_index.tk", NEON)
    kernels = [body for body in innermost_loops(text)
               if len(BY_ELEMENT_FMLA.findall("\n".join(body))) >= tile.mr * tile.vectors - 2]
    assert kernels, "no micro-kernel loop of by-element fmla .4s found"
    for body in kernels:
        loop = "\n".join(body)
        assert len(re.findall(r"\bfmla\s+v\d+\.4s", loop)) == tile.mr * tile.vectors, loop
        assert "[sp" not in loop, f"stack traffic in the micro-kernel loop:\n{loop}"
        assert not re.search(r"\bmov\s+v\d+\.16b", loop), f"register copies in the micro-kernel loop:\n{loop}"


# neoverse-n1 (Armv8.2) has the dot product whatever the feature string says;
# cortex-a72 (Armv8.0) only when asked.
@pytest.mark.parametrize("cpu, features, expect", [
    ("neoverse-n1", "+neon,+dotprod", True), ("cortex-a72", "+neon,+dotprod", True),
    ("cortex-a72", "+neon", False), ("neoverse-n1", "+neon,-dotprod", False)])
def test_int8_dot_uses_sdot_with_dotprod(cpu, features, expect):
    text = asm(ROOT / "tests" / "cross" / "kernels" / "dot_i8.tk",
               CompileOptions(triple="aarch64-linux-gnu", cpu=cpu, features=features))
    found = re.search(r"\bsdot\s+v\d+\.4s, v\d+\.16b, v\d+\.16b", text)
    assert bool(found) == expect, text if expect else found.group(0)
