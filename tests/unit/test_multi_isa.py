"""`dslc --target x86_64 --isa avx2,baseline`: both copies in one library, each
forced in turn with DSL_ISA (read once, when the library is loaded, so each
run is its own process), through `dsl.load`; same results, and the copies
really are AVX2+FMA and baseline code."""

from __future__ import annotations

import os
import platform
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from host_cpu import runs_avx2

from dsl.cli import main as dslc
from dsl.lowering.machine import Machine, micro_tile
from dsl.lowering.types import F32

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(platform.machine() != "x86_64", reason="multi-ISA libraries are x86-64 only")

CHILD = r"""
import ctypes, sys
import numpy as np
import dsl

lib = dsl.load(sys.argv[1])
isa = ctypes.CDLL(sys.argv[1]).__dsl_isa
isa.restype = ctypes.c_char_p
rng = np.random.default_rng(0)
a, b = rng.standard_normal((67, 45), np.float32), rng.standard_normal((45, 53), np.float32)
c = np.zeros((67, 53), np.float32)
lib.matmul_index(a, b.T.copy().T, c)
grid = rng.standard_normal((33, 70), np.float32)
out = np.empty_like(grid)
lib.jacobi_step(grid, out)
np.savez(sys.argv[2], isa=isa().decode(), a=a, b=b, c=c, grid=grid, out=out)
"""


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("multi_isa")
    source = out / "kernels.tk"
    source.write_text((ROOT / "examples" / "matmul_index.tk").read_text() + "\n"
                      + (ROOT / "examples" / "stencil2d.tk").read_text())
    result = CliRunner().invoke(dslc, [str(source), "--target", "x86_64", "--isa", "avx2,baseline",
                                       "-o", str(out / "kernels.so"), "-H", str(out / "kernels.h")])
    assert result.exit_code == 0, result.output
    return out / "kernels.so"


def _run(library: Path, isa: str | None) -> tuple[dict, str]:
    env = {k: v for k, v in os.environ.items() if k != "DSL_ISA"}
    if isa is not None:
        env["DSL_ISA"] = isa
    saved = library.parent / f"out-{isa}.npz"
    done = subprocess.run([sys.executable, "-c", CHILD, str(library), str(saved)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return dict(np.load(saved)), done.stderr


def test_each_forced_copy_gives_the_same_results(library):
    base, stderr = _run(library, "baseline")
    assert str(base["isa"]) == "baseline" and stderr == ""
    avx2, stderr = _run(library, "avx2")
    if runs_avx2():
        assert str(avx2["isa"]) == "avx2" and stderr == ""
    else:  # the CPU cannot run it: the library says so and picks by CPU
        assert str(avx2["isa"]) == "baseline" and "DSL_ISA" in stderr
    # The stencil has no product feeding a sum: bit for bit. The matmul may
    # round differently (FMA, vector widths): within its sum's error.
    np.testing.assert_array_equal(base["out"], avx2["out"])
    exact = base["a"].astype(np.float64) @ base["b"]
    bound = 45 * 2.0 ** -23 * (np.abs(base["a"]).astype(np.float64) @ np.abs(base["b"]))
    for run in (base, avx2):
        assert np.all(np.abs(run["c"] - exact) <= bound)


def test_unforced_library_picks_by_cpu(library):
    run, stderr = _run(library, None)
    assert str(run["isa"]) == ("avx2" if runs_avx2() else "baseline") and stderr == ""


def test_unknown_level_in_the_environment_warns_and_picks_by_cpu(library):
    run, stderr = _run(library, "avx9")
    assert "DSL_ISA names no ISA level of this library" in stderr
    assert str(run["isa"]) == ("avx2" if runs_avx2() else "baseline")


def _copies(disassembly: str, exported: set[str]) -> dict[str, str]:
    """Each copy's code: a function belongs to the copy of the last suffixed
    symbol before it (the objects are linked one after the other), until the
    dispatcher's exported trampolines."""
    code: dict[str, list[str]] = {"avx2": [], "baseline": []}
    current = None
    for chunk in re.split(r"\n(?=[0-9a-f]+ <)", disassembly):
        name = re.match(r"[0-9a-f]+ <([^>]+)>:", chunk)
        if name:
            symbol = name.group(1)
            suffix = symbol.rsplit(".", 1)[-1]
            current = suffix if suffix in code else (None if symbol in exported else current)
        if current:
            code[current].append(chunk)
    return {isa: "\n".join(chunks) for isa, chunks in code.items()}


def test_copies_are_avx2_and_baseline_code(library):
    exported = set(subprocess.run(["nm", "-D", "--defined-only", str(library)], capture_output=True, text=True,
                                  check=True).stdout.split())
    assert {"matmul_index", "jacobi_step__numpy", "__dsl_metadata", "__dsl_isa"} <= exported
    assert not any(name.endswith((".avx2", ".baseline")) for name in exported)
    text = subprocess.run(["objdump", "-d", "--no-show-raw-insn", str(library)], capture_output=True,
                          text=True, check=True).stdout
    copies = _copies(text, exported)
    assert "<jacobi_step.avx2>:" in copies["avx2"] and "<jacobi_step.baseline>:" in copies["baseline"]
    assert re.search(r"\bvfmadd\w+\s+.*%ymm", copies["avx2"])
    assert not re.search(r"%[yz]mm|\bvfmadd", copies["baseline"])
    # Without an FMA unit the micro-kernel multiplies and adds: no libm fmaf per element.
    assert "mulps" in copies["baseline"] and not re.search(r"call.*\bfmaf?\b", copies["baseline"])


def test_micro_kernel_fuses_only_with_an_fma_unit():
    assert micro_tile(Machine(256, 16, has_fma=True), F32).fused
    assert not micro_tile(Machine(128, 16, has_fma=False), F32).fused


@pytest.mark.parametrize("args, message", [
    (["--isa", "avx3"], "unknown ISA level 'avx3'"),
    (["--isa", "avx2", "--cpu", "znver3"], "does not go with --cpu"),
    (["--isa", "avx2", "--target", "aarch64-linux-gnu"], "builds x86-64 levels"),
    (["--isa", "avx2", "--emit", "asm"], "not --emit=asm"),
])
def test_bad_isa_options_are_usage_errors(args, message, tmp_path):
    result = CliRunner().invoke(dslc, [str(ROOT / "examples" / "saxpy.tk"), "-o", str(tmp_path / "s.so"), *args])
    assert result.exit_code == 2 and message in result.output


def test_header_declares_the_isa_query(library, tmp_path):
    header = library.parent / "kernels.h"
    assert "const char* __dsl_isa(void);" in header.read_text()
    main = tmp_path / "main.c"
    main.write_text('#include <stdio.h>\n#include "kernels.h"\n'
                    'int main(void) { puts(__dsl_isa()); return 0; }\n')
    exe = tmp_path / "main"
    subprocess.run(["cc", "-Wall", "-Werror", f"-I{library.parent}", str(main), str(library),
                    f"-Wl,-rpath,{library.parent}", "-o", str(exe)], check=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, check=True)
    assert run.stdout.strip() in ("avx2", "baseline")
