"""The activations of stdlib/mathfn.tk compile to straight-line vector code:
no call (a scalar libm fallback per lane) and no branch inside the loop over
16-lane blocks, FMAs on ymm registers (pinned to znver3, AVX2), and at most
one division a block. Also the same check for a `dsl.ops.fused` kernel."""

from __future__ import annotations

import re

import pytest

from dsl.grammar.diagnostics import Source
from dsl.ops.fused_expr import parse_expression
from dsl.ops.fusion import kernel_source
from dsl.ops.library import stdlib_path
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

HELPERS = ["exp", "tanh", "erf", "sigmoid", "silu", "gelu", "gelu_tanh"]
DIVISIONS = {"exp": 0, "erf": 1, "tanh": 1, "sigmoid": 1, "silu": 1, "gelu": 1, "gelu_tanh": 1}


def _asm(text: str) -> str:
    opts = CompileOptions(cpu="znver3", triple="x86_64-unknown-linux-gnu", use_cache=False)
    return compile_source(Source("t.tk", text), opts, stop_after="asm", base_dir=stdlib_path("mathfn").parent).asm


def _hot_loop(asm: str, kernel: str) -> list[str]:
    """The instructions of the first loop that steps 16 lanes (64 bytes) at a
    time in the body of `kernel`'s parallel loop, contiguous version (the
    function that each thread of a team, or a serial run, calls)."""
    function = f"{kernel}__unit__par0__body"
    body = asm.split(f"\n{function}:", 1)[1].split(".Lfunc_end", 1)[0].splitlines()
    for k, line in enumerate(body):
        if re.match(r"\s+addq\s+\$64, ", line):
            end = next(j for j in range(k, len(body)) if body[j].strip().startswith("j"))
            target = body[end].split()[-1]
            start = body.index(f"{target}:")
            return [x.strip() for x in body[start + 1:end + 1] if x.strip() and not x.strip().startswith((".", "#"))]
    raise AssertionError(f"no 16-lane loop in {function}")


@pytest.fixture(scope="module")
def activations_asm() -> str:
    lines = [f"from mathfn import {', '.join(f'{h}_f32' for h in HELPERS)}", ""]
    for h in HELPERS:
        lines += ["@schedule(split(i, 16384, tail=peel), parallel(i.outer), vectorize(i.inner, 16, tail=peel))",
                  f"def {h}_1(x: f32[N], out: f32[N]):", f"    out[i] = {h}_f32(x[i])", ""]
    return _asm("\n".join(lines))


@pytest.mark.parametrize("name", HELPERS)
def test_activation_loop_is_branch_free_vector_code(activations_asm, name):
    loop = _hot_loop(activations_asm, f"{name}_1")
    assert not [x for x in loop if x.startswith("call")], loop
    assert [x.split()[0] for x in loop if x.startswith("j")] == ["jne"]  # the back edge only
    assert any(x.startswith("vfmadd") and "ymm" in x for x in loop)
    assert sum(x.startswith("vdivps") for x in loop) == 2 * DIVISIONS[name]  # 16 lanes: two ymm


def test_fused_kernel_is_one_vector_loop():
    source = kernel_source(parse_expression("silu(a) * b + c"), (True, True, True))
    loop = _hot_loop(_asm(source), "fused_1")
    assert not [x for x in loop if x.startswith("call")]
    # One store of 16 lanes to out: two ymm (the 16 ymm registers of AVX2 may spill one to the stack).
    assert sum(x.startswith("vmovups") and x.endswith(")") and "(%rsp)" not in x for x in loop) == 2
    assert sum(x.startswith("vdivps") for x in loop) == 2 and any(x.startswith("vfmadd") for x in loop)
