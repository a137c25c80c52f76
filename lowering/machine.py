"""What the scheduler knows about the machine: vector width, registers, FMA.

The back-end's `Target` derives one of these (`Target.machine`); the passes
take it as data, so nothing below `backends/` asks which CPU it is on.
"""

from __future__ import annotations

from dataclasses import dataclass

from .types import ScalarType


@dataclass(frozen=True, slots=True)
class Machine:
    vector_bits: int = 256
    vector_registers: int = 16
    has_fma: bool = True
    # The FMA can take its scalar from a lane of a register (NEON's by-element
    # `fmla v.4s, v.4s, v.s[i]`) instead of a broadcast register (x86).
    fma_by_element: bool = False
    # For target intrinsics (lowering/target_ops.py): the triple's architecture
    # ('x86_64', 'aarch64') and the instruction-set extensions it has ('avx2', 'dotprod').
    arch: str = ""
    isa: frozenset[str] = frozenset()
    # kc of the packed path's tile whose strip of B streams from L2 (AVX-512's
    # 6 x 64 f32, `packed_tile`): measured per core, see contract.py.
    streamed_strip_kc: int = 512

    def lanes(self, t: ScalarType) -> int:
        """Elements of type `t` in one vector register (8 f32 on AVX2, 4 on NEON)."""
        return max(1, self.vector_bits // t.bits)


@dataclass(frozen=True, slots=True)
class MicroTile:
    """A register block of C: `mr` rows by `vectors` vectors of `lanes` elements."""

    mr: int
    vectors: int
    lanes: int
    # fma(a, b, acc) when the machine has an FMA unit; else a * b + acc (an
    # `llvm.fma` without one becomes a libm call per element: 0.6 GFLOP/s).
    fused: bool = True

    @property
    def nr(self) -> int:
        return self.vectors * self.lanes


def micro_tile(machine: Machine, t: ScalarType, max_vectors: int = 4) -> MicroTile:
    """The largest register block of C that fits with its operands.

    The accumulators (mr x vectors), one row of B (vectors) and the values of
    A in flight must fit in the vector registers. A takes one broadcast
    register on x86; with a by-element FMA (NEON) LLVM loads A in pairs
    (`ldp s, s`) and keeps about three registers of it live, and mr is kept a
    multiple of the lanes so a panel's column of A is whole vectors. (On
    neoverse-n1, 14 x 8 left two registers for A and LLVM spilled an
    accumulator in the loop; 12 x 8 and 13 x 8 do not spill.) Each k step
    issues mr x vectors FMAs and mr + vectors loads; a shape is load-bound
    when the loads outnumber the FMAs (both units issue about as many per
    cycle). Among the shapes that are not, take the most accumulators (they
    hide the FMA latency), then the one closest to two vectors wide: 6 x 16
    f32 on AVX2's 16 registers, 12 x 8 on NEON's 32. `max_vectors=1` gives
    the tall, one-vector-wide tile for products with few columns (14 x 8 on
    AVX2, 30 x 16 with AVX-512).

    >>> micro_tile(Machine(256, 16), F32)          # doctest: +SKIP
    MicroTile(mr=6, vectors=2, lanes=8)
    """
    lanes = machine.lanes(t)
    a_registers = 3 if machine.fma_by_element else 1
    best: tuple | None = None
    for vectors in range(1, max_vectors + 1):
        mr = (machine.vector_registers - vectors - a_registers) // vectors
        if machine.fma_by_element and mr >= lanes:
            mr -= mr % lanes
        if mr < 1:
            continue
        fmas, loads = mr * vectors, mr + vectors
        score = (min(1.0, fmas / loads), fmas, -abs(vectors - 2))
        if best is None or score > best[0]:
            best = (score, MicroTile(mr, vectors, lanes, machine.has_fma))
    assert best is not None
    return best[1]


def packed_tile(machine: Machine, t: ScalarType) -> MicroTile:
    """The tile of the packed path, where B's strip streams from L2 through
    the micro-kernel: with 32 registers of 16 f32 lanes (AVX-512), 6 x 64
    (24 FMAs and 10 loads a k step) rather than micro_tile's 14 x 32 (28 and
    16). One thread of Zen 4, GFLOP/s: 1024^3 104.7 -> 108.5, 512 x 3584 x
    3584 102.8 -> 104.2, (1,128,256) @ (64,256,128) 92.7 -> 94.6. The
    unpacked path keeps micro_tile's (there 6 x 64 lost 14% on a strided 1x1
    convolution, 64 -> 128 channels) but for batch-reduce products of several
    steps (contract_direct.unpacked). Elsewhere (AVX2, NEON, f64; not
    measured) micro_tile's."""
    if machine.vector_registers >= 32 and not machine.fma_by_element and machine.lanes(t) == 16 and t.bits == 32:
        return MicroTile((machine.vector_registers - 4 - 1) // 4, 4, 16, machine.has_fma)
    return micro_tile(machine, t)
