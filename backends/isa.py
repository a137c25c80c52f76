"""x86-64 instruction-set levels a multi-ISA library is built for, as data.

Each level is an LLVM CPU name (the psABI micro-architecture levels) and the
CPUID bits a processor must report to run code built for it, plus the
register state the OS must save (XCR0, read with `xgetbv`).

    >>> [isa.cpu for isa in parse_isas("avx2,baseline")]
    ['x86-64-v3', 'x86-64']
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CpuidBit:
    """Bit `bit` of register `reg` ('ebx', 'ecx', 'edx') of CPUID leaf `leaf` (subleaf 0)."""

    leaf: int
    reg: str
    bit: int
    name: str


@dataclass(frozen=True)
class Isa:
    name: str
    cpu: str
    requires: tuple[CpuidBit, ...] = ()
    xcr0: int = 0  # bits of XCR0 that must all be set (OS-enabled register state)


_V2 = (
    CpuidBit(1, "ecx", 0, "sse3"), CpuidBit(1, "ecx", 9, "ssse3"), CpuidBit(1, "ecx", 13, "cx16"),
    CpuidBit(1, "ecx", 19, "sse4.1"), CpuidBit(1, "ecx", 20, "sse4.2"), CpuidBit(1, "ecx", 23, "popcnt"),
    CpuidBit(0x80000001, "ecx", 0, "lahf"),
)
_V3 = _V2 + (
    CpuidBit(1, "ecx", 12, "fma"), CpuidBit(1, "ecx", 22, "movbe"), CpuidBit(1, "ecx", 27, "osxsave"),
    CpuidBit(1, "ecx", 28, "avx"), CpuidBit(1, "ecx", 29, "f16c"), CpuidBit(7, "ebx", 3, "bmi"),
    CpuidBit(7, "ebx", 5, "avx2"), CpuidBit(7, "ebx", 8, "bmi2"), CpuidBit(0x80000001, "ecx", 5, "lzcnt"),
)
_V4 = _V3 + (
    CpuidBit(7, "ebx", 16, "avx512f"), CpuidBit(7, "ebx", 17, "avx512dq"), CpuidBit(7, "ebx", 28, "avx512cd"),
    CpuidBit(7, "ebx", 30, "avx512bw"), CpuidBit(7, "ebx", 31, "avx512vl"),
)
_XMM_YMM = 0b110  # SSE and AVX state
_ZMM = 0b11100110  # and the AVX-512 opmask and upper ZMM state

ISAS = {
    "baseline": Isa("baseline", "x86-64"),
    "sse4": Isa("sse4", "x86-64-v2", _V2),
    "avx2": Isa("avx2", "x86-64-v3", _V3, _XMM_YMM),
    "avx512": Isa("avx512", "x86-64-v4", _V4, _ZMM),
}


def parse_isas(text: str) -> list[Isa]:
    """The levels named in a comma-separated list, in order of preference.

    Raises ValueError naming an unknown or repeated level.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise ValueError("--isa needs at least one level")
    unknown = [n for n in names if n not in ISAS]
    if unknown:
        raise ValueError(f"unknown ISA level {unknown[0]!r}; known: {', '.join(ISAS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"--isa names a level twice: {text!r}")
    return [ISAS[n] for n in names]
