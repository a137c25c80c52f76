"""The machine we generate code for, and the LLVM TargetMachines that go with it.

A `Target` is plain data (triple, cpu, LLVM feature string and a few derived
facts the scheduler wants: vector width, register count, FMA). Opt levels are
not part of it: they belong to the compile options.

    >>> t = host_target()
    >>> tm = target_machine(t, 3)          # cached per (target, opt level)
"""

from __future__ import annotations

import functools
import hashlib
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm

from dsl.lowering.machine import Machine

# CPUs whose vector width we must know when no feature string is given
# (LLVM derives the features from the name, but does not tell llvmlite).
_AVX512_CPUS = (
    "skylake-avx512", "cascadelake", "cooperlake", "cannonlake", "icelake-client",
    "icelake-server", "tigerlake", "rocketlake", "sapphirerapids", "emeraldrapids",
    "graniterapids", "graniterapids-d", "diamondrapids", "znver4", "znver5",
    "x86-64-v4", "knl", "knm",
)
_AVX2_CPUS = (
    "haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake",
    "arrowlake", "arrowlake-s", "lunarlake", "pantherlake", "gracemont", "sierraforest",
    "grandridge", "clearwaterforest", "znver1", "znver2", "znver3", "x86-64-v3",
    "bdver4",
)
# AArch64 CPUs with the dot-product extension (Armv8.2's optional `sdot`).
_DOTPROD_CPUS = (
    "neoverse-n1", "neoverse-n2", "neoverse-n3", "neoverse-v1", "neoverse-v2", "neoverse-v3",
    "neoverse-512tvb", "cortex-a55", "cortex-a65", "cortex-a75", "cortex-a76", "cortex-a77",
    "cortex-a78", "cortex-a710", "cortex-a715", "cortex-x1", "cortex-x2", "cortex-x3",
    "apple-m1", "apple-m2", "apple-m3", "apple-m4", "ampere1", "ampere1a", "a64fx",
)
_AVX_NO_FMA_CPUS = ("sandybridge", "ivybridge", "btver2", "bdver1")
_FMA_AVX_CPUS = ("bdver2", "bdver3")


@dataclass(frozen=True)
class Target:
    """What code is generated for: `triple`, `cpu`, LLVM `features` ('+avx2,...'),
    and facts derived from them for the scheduler."""

    triple: str
    cpu: str
    features: str
    vector_bits: int
    vector_registers: int
    has_fma: bool

    @property
    def machine(self) -> Machine:
        """What the scheduler needs to know of this target."""
        return Machine(self.vector_bits, self.vector_registers, self.has_fma,
                       fma_by_element=self.arch in ("aarch64", "arm64"), arch=self.arch,
                       isa=_isa(self.triple, self.cpu, self.features),
                       streamed_strip_kc=256 if self.intel_avx512 else 512)

    @property
    def intel_avx512(self) -> bool:
        """An Intel core with AVX-512 (any x86 AVX-512 cpu but AMD's Zen):
        its packed 6 x 64 f32 tile runs faster with K panels of 256 than of
        512 (Zen 4's best; see contract.py), and its shared L3 feeds one core
        more slowly than Zen 4's (dsl.ops.dense's dot products)."""
        return self.arch == "x86_64" and self.vector_bits >= 512 and not self.cpu.startswith("znver")

    @property
    def arch(self) -> str:
        """The architecture part of the triple ('x86_64', 'aarch64')."""
        return self.triple.split("-", 1)[0]

    def key(self) -> str:
        """A short string naming this target in cache keys and file names.

        >>> make_target("aarch64-unknown-linux-gnu").key()   # doctest: +SKIP
        'aarch64-unknown-linux-gnu-neoverse-n1-3f5a...'
        """
        digest = hashlib.sha1(self.features.encode()).hexdigest()[:12]
        return f"{self.triple}-{self.cpu}-{digest}"


def _enabled(features: str) -> set[str]:
    return {f[1:] for f in features.split(",") if f.startswith("+")}


def _isa(triple: str, cpu: str, features: str) -> frozenset[str]:
    """The extensions target intrinsics ask for ('avx2', 'dotprod'): the cpu's
    own, plus the features turned on, minus those turned off."""
    if triple.startswith(("aarch64", "arm64")):
        implied = {"dotprod"} if cpu in _DOTPROD_CPUS else set()
    else:
        implied = {"avx2"} if cpu in _AVX2_CPUS + _AVX512_CPUS else set()
    off = {f[1:] for f in features.split(",") if f.startswith("-")}
    return frozenset((implied | _enabled(features)) - off)


def _derive(triple: str, cpu: str, features: str) -> tuple[int, int, bool]:
    """(vector_bits, vector_registers, has_fma) from the triple, cpu and features."""
    if triple.startswith(("aarch64", "arm64")):
        return 128, 32, True
    feats = _enabled(features)
    if not features:
        if cpu in _AVX512_CPUS:
            feats = {"avx512f", "avx2", "fma"}
        elif cpu in _AVX2_CPUS:
            feats = {"avx2", "fma"}
        elif cpu in _FMA_AVX_CPUS:
            feats = {"avx", "fma"}
        elif cpu in _AVX_NO_FMA_CPUS:
            feats = {"avx"}
    if "avx512f" in feats:
        return 512, 32, True
    bits = 256 if feats & {"avx", "avx2"} else 128
    return bits, 16, "fma" in feats or "fma4" in feats


def _make(triple: str, cpu: str, features: str) -> Target:
    bits, regs, fma = _derive(triple, cpu, features)
    return Target(triple, cpu, features, bits, regs, fma)


@functools.cache
def host_target() -> Target:
    """The machine this process runs on (e.g. x86_64, znver3, +avx2,+fma,...)."""
    _init_llvm(cross=False)
    features = llvm.get_host_cpu_features().flatten()
    return _make(llvm.get_process_triple(), llvm.get_host_cpu_name(), features)


def normalize_triple(triple: str) -> str:
    """The full LLVM triple for a short one a user types.

    >>> normalize_triple("aarch64-linux-gnu"), normalize_triple("x86_64")
    ('aarch64-unknown-linux-gnu', 'x86_64-unknown-linux-gnu')
    """
    parts = triple.split("-")
    if len(parts) == 1:
        return f"{triple}-unknown-linux-gnu"
    if len(parts) == 3 and parts[1] == "linux":  # arch-os-env: the vendor is missing
        return f"{parts[0]}-unknown-{parts[1]}-{parts[2]}"
    return triple


def make_target(triple: str | None = None, cpu: str | None = None,
                features: str | None = None) -> Target:
    """A target from optional triple/cpu/features; missing parts default sensibly.

    No triple: the host (its cpu and features unless `cpu` is given). A short
    triple ('aarch64-linux-gnu', 'x86_64') is completed (`normalize_triple`). aarch64:
    cpu 'neoverse-n1', features '+neon'. Other triples: cpu 'generic' (x86:
    'x86-64'), no extra features, unless given.

    >>> make_target("aarch64-unknown-linux-gnu").vector_bits
    128
    """
    host = host_target()
    triple = None if triple is None else normalize_triple(triple)
    if triple is None or triple == host.triple:
        if cpu is None and features is None:
            return host
        return _make(host.triple, cpu or host.cpu, features if features is not None else "")
    if triple.startswith(("aarch64", "arm64")):
        return _make(triple, cpu or "neoverse-n1", "+neon" if features is None else features)
    default_cpu = "x86-64" if triple.startswith("x86_64") else "generic"
    return _make(triple, cpu or default_cpu, features or "")


_init_lock = threading.Lock()
_initialized: set[str] = set()


def _init_llvm(cross: bool) -> None:
    """Register LLVM's targets once (llvm.initialize() is gone in llvmlite 0.50)."""
    want = "all" if cross else "native"
    with _init_lock:
        if "native" not in _initialized:
            llvm.initialize_native_target()
            llvm.initialize_native_asmprinter()
            llvm.initialize_native_asmparser()
            _initialized.add("native")
        if want == "all" and "all" not in _initialized:
            llvm.initialize_all_targets()
            llvm.initialize_all_asmprinters()
            _initialized.add("all")


def new_target_machine(target: Target, opt_level: int, *, jit: bool = False) -> llvm.TargetMachine:
    """A fresh TargetMachine (an MCJIT engine takes ownership of the one it gets).

    PIC and the *small* code model: llvmlite's default ('jitdefault') is the large
    model, which makes every global access a `movabsq` through the GOT.
    """
    _init_llvm(cross=target.arch != host_target().arch)
    llvm_target = llvm.Target.from_triple(target.triple)
    return llvm_target.create_target_machine(
        cpu=target.cpu, features=target.features, opt=opt_level,
        reloc="pic", codemodel="small", jit=jit)


@functools.cache
def target_machine(target: Target, opt_level: int) -> llvm.TargetMachine:
    """The shared TargetMachine for (target, opt_level): created once, then reused.

    >>> tm = target_machine(host_target(), 2)
    >>> tm is target_machine(host_target(), 2)
    True
    """
    return new_target_machine(target, opt_level)
