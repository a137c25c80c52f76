"""benchmarks/fma_peak.py: the FMA loop the GEMM tables divide by runs its
trips and counts its FLOP (nothing here is timed against a number)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import fma_peak  # noqa: E402
from dsl.backends.target import host_target  # noqa: E402


def test_the_loop_has_one_fma_per_accumulator_and_counts_down():
    ir = fma_peak._loop_ir("ymm", 8)
    assert ir.count("vfmadd231ps") == fma_peak.ACCUMULATORS
    assert "dec $0" in ir and "jnz 1b" in ir


@pytest.mark.skipif(host_target().arch != "x86_64" or host_target().vector_bits < 256, reason="x86-64 with AVX only")
def test_the_loop_runs_every_trip_at_the_hosts_width():
    run, flops = fma_peak.fma_loop()
    assert run() == 0  # the counter reached zero: every trip ran
    lanes = host_target().vector_bits // 32
    assert flops == fma_peak.TRIPS * fma_peak.ACCUMULATORS * lanes * 2
    assert fma_peak.fma_peak_gflops(repeats=2) > 0
