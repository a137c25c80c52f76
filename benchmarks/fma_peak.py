"""The f32 FMA peak of one core of this machine, measured: a loop of 12
independent vector FMAs (inline assembly, so nothing but FMAs and the loop
counter runs), JIT-compiled with llvmlite and timed. The GEMM tables divide
by it: no kernel can beat it, so `peak / numpy` is the highest ratio to
OpenBLAS any kernel could reach at that size.

    >>> fma_peak_gflops()          # doctest: +SKIP
    113.4

x86-64 only (AVX2 or AVX-512 registers, whichever the host has; on Zen 4 both
give the same FLOP/s); None elsewhere.
"""

from __future__ import annotations

import ctypes
import functools
import time

import llvmlite.binding as llvm

from dsl.backends.jit import JitLibrary
from dsl.backends.target import host_target

ACCUMULATORS = 12  # more than FMA latency x pipes (4 x 2 on Zen 3/4), fewer than 16 registers
TRIPS = 1_000_000  # 2-3 ms a pass


def _loop_ir(register: str, lanes: int) -> str:
    """`i64 @fma_loop(i64 n)`: n trips of ACCUMULATORS FMAs on `register`s."""
    fmas = "".join(f"vfmadd231ps %{register}14, %{register}15, %{register}{r}\\0A" for r in range(ACCUMULATORS))
    body = (f"vxorps %{register}14, %{register}14, %{register}14\\0A"
            f"vxorps %{register}15, %{register}15, %{register}15\\0A"
            f"1:\\0A{fmas}dec $0\\0Ajnz 1b")
    clobbers = ",".join(f"~{{{register}{r}}}" for r in range(16))
    return f"""
define i64 @fma_loop(i64 %n) {{
  %left = call i64 asm sideeffect "{body}", "=r,0,{clobbers},~{{cc}}"(i64 %n)
  ret i64 %left
}}
"""


@functools.cache
def fma_loop():
    """(run, flops): `run()` makes one pass of the FMA loop, `flops` FLOP (an FMA
    counts 2 per lane); None on a machine that is not x86-64 with AVX. Time it
    beside the kernels it is a scale for, so that it runs at their clock."""
    target = host_target()
    if target.arch != "x86_64" or target.vector_bits < 256:
        return None
    register, lanes = ("zmm", 16) if target.vector_bits >= 512 else ("ymm", 8)
    module = llvm.parse_assembly(_loop_ir(register, lanes))
    module.triple = target.triple
    return _Pass(JitLibrary.from_module(module, target)), TRIPS * ACCUMULATORS * lanes * 2


class _Pass:
    """One call: TRIPS trips of the loop; returns the trips left (0)."""

    def __init__(self, lib: JitLibrary):
        self._lib = lib  # the code lives as long as this object
        self._loop = ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(lib.address("fma_loop"))

    def __call__(self) -> int:
        return self._loop(TRIPS)


def fma_peak_gflops(repeats: int = 20) -> float | None:
    """The best of `repeats` passes of the FMA loop, in GFLOP/s of one core."""
    found = fma_loop()
    if found is None:
        return None
    run, flops = found
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - start)
    return flops / best / 1e9


if __name__ == "__main__":
    print(f"f32 FMA peak of one core: {fma_peak_gflops():.1f} GFLOP/s")
