"""One library, several x86-64 ISA levels, chosen once when it is loaded.

Each level's module is compiled on its own (its own TargetMachine, so AVX2
code never leaks into the baseline copy); `rename_variant` then suffixes the
symbols it exports (`saxpy` -> `saxpy.avx2`) and hides them. The dispatch
module built here exports the original names as two-instruction trampolines,

    saxpy:  jmp *__dsl_impl.saxpy(%rip)

which leave every argument register untouched, so one trampoline serves any
signature (the C kernels, their `__packed` and `__numpy` entries, the
metadata). An ELF constructor fills the `__dsl_impl.*` pointers before any
call: the first level in the list the CPU can run (CPUID and XGETBV through
inline asm), unless the environment variable `DSL_ISA` names another level
the CPU can run. `const char* __dsl_isa(void)` says which one was chosen.

    >>> names = rename_variant(avx2_ref, "avx2")                     # doctest: +SKIP
    >>> module = dispatch_module(names, parse_isas("avx2,baseline"))  # doctest: +SKIP
"""

from __future__ import annotations

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .errors import BackendError
from .isa import Isa
from .llvm.fastcall_entry import TABLE_SYMBOL
from .llvm.ltypes import I32, I64, PTR, int_const
from .llvm.runtime import _cstring, extern
from .optimize import verify_llvm

ENV_VAR = "DSL_ISA"
ISA_SYMBOL = "__dsl_isa"
IMPL_PREFIX = "__dsl_impl."
WARNING = f"dslc: {ENV_VAR} names no ISA level of this library that this CPU runs; choosing by CPU\n"
VOID = ir.VoidType()
_REGS = ("eax", "ebx", "ecx", "edx")
# Data every level's code reads, the same for all of them (filled by the loader).
SHARED_DATA = (TABLE_SYMBOL,)


def rename_variant(ref: llvm.ModuleRef, isa: str) -> list[str]:
    """Suffix each function `ref` exports with `.isa` and hide it; return the
    original names. Exported data would bypass the trampolines: refused, but
    for SHARED_DATA, which all levels share."""
    names = []
    for fn in ref.functions:
        if fn.is_declaration or fn.linkage != llvm.Linkage.external:
            continue
        names.append(fn.name)
        fn.name = f"{fn.name}.{isa}"
        fn.visibility = "hidden"
    for var in ref.global_variables:
        if var.is_declaration or var.linkage != llvm.Linkage.external:
            continue
        if var.name in SHARED_DATA:  # one copy for all levels: the linker keeps one of the weak ones
            var.linkage = llvm.Linkage.weak_any
            continue
        raise BackendError(f"multi-ISA library: {var.name!r} is exported data, which cannot be dispatched")
    return sorted(names)


def dispatch_module(symbols: list[str], isas: list[Isa], triple: str, data_layout: str) -> llvm.ModuleRef:
    """The trampolines, pointers and constructor for `symbols` over `isas`
    (in order of preference; the last is the fallback when none runs), verified."""
    ref = verify_llvm(_build(symbols, isas, triple, data_layout))
    # Hidden (llvmlite.ir does not print visibility): the pointers are reached
    # PC-relative from the trampolines, the copies are not exported.
    for symbol in symbols:
        ref.get_global_variable(IMPL_PREFIX + symbol).visibility = "hidden"
        for isa in isas:
            ref.get_function(f"{symbol}.{isa.name}").visibility = "hidden"
    return ref


def _build(symbols: list[str], isas: list[Isa], triple: str, data_layout: str) -> ir.Module:
    module = ir.Module(name="dsl_dispatch")
    module.triple, module.data_layout = triple, data_layout
    pointers = {}
    for symbol in symbols:
        variants = [_hidden_function(module, f"{symbol}.{isa.name}") for isa in isas]
        pointer = ir.GlobalVariable(module, PTR, name=IMPL_PREFIX + symbol)
        pointer.initializer = variants[-1]
        pointers[symbol] = (pointer, variants)
        _trampoline(module, symbol, pointer.name)
    choice = ir.GlobalVariable(module, I32, name=ISA_SYMBOL + ".choice")
    choice.linkage, choice.initializer = "internal", int_const(I32, len(isas) - 1)
    _define_isa_name(module, isas, choice)
    _register_constructor(module, _define_selector(module, isas, choice, pointers))
    return module


def _hidden_function(module: ir.Module, name: str) -> ir.Function:
    return ir.Function(module, ir.FunctionType(VOID, []), name=name)


def _trampoline(module: ir.Module, symbol: str, pointer: str) -> None:
    """`symbol`: an indirect jump through `pointer`, with no frame of its own."""
    fn = ir.Function(module, ir.FunctionType(VOID, []), name=symbol)
    fn.attributes.add("naked")
    fn.attributes.add("nounwind")
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    bld.asm(ir.FunctionType(VOID, []), f"jmpq *{pointer}(%rip)", "", [], side_effect=True)
    bld.unreachable()


def _define_isa_name(module: ir.Module, isas: list[Isa], choice: ir.GlobalVariable) -> None:
    """Exported `const char* __dsl_isa(void)`: the chosen level's name."""
    fn = ir.Function(module, ir.FunctionType(PTR, []), name=ISA_SYMBOL)
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    k = bld.load(choice, typ=I32)
    names = [_cstring(module, f"{ISA_SYMBOL}.{isa.name}", isa.name) for isa in isas]
    bld.ret(_pick(bld, k, names))


def _pick(bld: ir.IRBuilder, k: ir.Value, values: list[ir.Value]) -> ir.Value:
    """values[k] (the last when k is out of range), by a chain of selects."""
    result = values[-1]
    for index in reversed(range(len(values) - 1)):
        result = bld.select(bld.icmp_signed("==", k, int_const(I32, index)), values[index], result)
    return result


def _define_selector(module: ir.Module, isas: list[Isa], choice: ir.GlobalVariable,
                     pointers: dict) -> ir.Function:
    """The constructor: pick a level, store its functions in the pointers."""
    fn = ir.Function(module, ir.FunctionType(VOID, []), name="__dsl_select_isa")
    fn.linkage = "internal"
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    runs = _runnable(fn, bld, isas)
    automatic = int_const(I32, len(isas) - 1)  # none runs: the last, the fallback
    for index in reversed(range(len(isas))):
        automatic = bld.select(runs[index], int_const(I32, index), automatic)
    picked = _from_environment(module, fn, bld, isas, runs, automatic)
    bld.store(picked, choice)
    for pointer, variants in pointers.values():
        bld.store(_pick(bld, picked, variants), pointer)
    bld.ret_void()
    return fn


def _from_environment(module, fn, bld: ir.IRBuilder, isas: list[Isa], runs: list[ir.Value],
                      automatic: ir.Value) -> ir.Value:
    """The level DSL_ISA names when the CPU runs it; else `automatic` (with a
    warning when DSL_ISA is set but unusable)."""
    getenv = extern(module, "getenv", PTR, [PTR])
    strcmp = extern(module, "strcmp", I32, [PTR, PTR])
    text = bld.call(getenv, [_cstring(module, f"{ISA_SYMBOL}.env", ENV_VAR)])
    has_text, bad, done = (fn.append_basic_block(n) for n in ("env.set", "env.bad", "env.done"))
    not_null = fn.append_basic_block("env.nonnull")
    start = bld.block
    bld.cbranch(bld.icmp_unsigned("!=", text, ir.Constant(PTR, None)), not_null, done)
    bld.position_at_end(not_null)  # DSL_ISA= (empty) counts as unset
    first = bld.load(text, typ=ir.IntType(8))
    bld.cbranch(bld.icmp_unsigned("!=", first, ir.Constant(ir.IntType(8), 0)), has_text, done)
    bld.position_at_end(has_text)
    wanted = int_const(I32, -1)
    for index, isa in enumerate(isas):
        same = bld.icmp_signed("==", bld.call(strcmp, [text, _cstring(module, f"{ISA_SYMBOL}.want.{isa.name}",
                                                                       isa.name)]), int_const(I32, 0))
        wanted = bld.select(bld.and_(same, runs[index]), int_const(I32, index), wanted)
    found = bld.block
    bld.cbranch(bld.icmp_signed(">=", wanted, int_const(I32, 0)), done, bad)
    bld.position_at_end(bad)
    write = extern(module, "write", I64, [I32, PTR, I64])
    bld.call(write, [int_const(I32, 2), _cstring(module, f"{ISA_SYMBOL}.warning", WARNING),
                     int_const(I64, len(WARNING.encode()))])
    bld.branch(done)
    bld.position_at_end(done)
    phi = bld.phi(I32)
    phi.add_incoming(automatic, start)
    phi.add_incoming(automatic, not_null)
    phi.add_incoming(wanted, found)
    phi.add_incoming(automatic, bad)
    return phi


def _runnable(fn: ir.Function, bld: ir.IRBuilder, isas: list[Isa]) -> list[ir.Value]:
    """One i1 per level: does this CPU (and OS) run it?"""
    leaves = {0: _cpuid(bld, 0), 0x80000000: _cpuid(bld, 0x80000000)}
    max_leaf, max_ext = leaves[0]["eax"], leaves[0x80000000]["eax"]
    for leaf in sorted({bit.leaf for isa in isas for bit in isa.requires}):
        regs = _cpuid(bld, leaf)
        limit = max_ext if leaf >= 0x80000000 else max_leaf
        present = bld.icmp_unsigned(">=", limit, int_const(I32, leaf))  # unknown leaves read as 0
        leaves[leaf] = {r: bld.select(present, v, int_const(I32, 0)) for r, v in regs.items()}
    xcr0 = _xcr0(fn, bld, leaves.get(1)) if any(isa.xcr0 for isa in isas) else None
    runs = []
    for isa in isas:
        ok = ir.Constant(ir.IntType(1), 1)
        for bit in isa.requires:
            value = bld.and_(leaves[bit.leaf][bit.reg], int_const(I32, 1 << bit.bit))
            ok = bld.and_(ok, bld.icmp_unsigned("!=", value, int_const(I32, 0)))
        if isa.xcr0:
            mask = int_const(I32, isa.xcr0)
            ok = bld.and_(ok, bld.icmp_unsigned("==", bld.and_(xcr0, mask), mask))
        runs.append(ok)
    return runs


def _cpuid(bld: ir.IRBuilder, leaf: int) -> dict[str, ir.Value]:
    regs = ir.LiteralStructType([I32] * 4)
    out = bld.asm(ir.FunctionType(regs, [I32, I32]), "cpuid", "={ax},={bx},={cx},={dx},{ax},{cx}",
                  [int_const(I32, leaf), int_const(I32, 0)], side_effect=False)
    return {reg: bld.extract_value(out, k) for k, reg in enumerate(_REGS)}


def _xcr0(fn: ir.Function, bld: ir.IRBuilder, leaf1: dict | None) -> ir.Value:
    """XCR0's low word, or 0 when the OS has not enabled XSAVE (xgetbv would fault)."""
    osxsave = bld.icmp_unsigned("!=", bld.and_(leaf1["ecx"], int_const(I32, 1 << 27)), int_const(I32, 0))
    start, read, done = bld.block, fn.append_basic_block("xgetbv"), fn.append_basic_block("xgetbv.done")
    bld.cbranch(osxsave, read, done)
    bld.position_at_end(read)
    pair = bld.asm(ir.FunctionType(ir.LiteralStructType([I32, I32]), [I32]), "xgetbv", "={ax},={dx},{cx}",
                   [int_const(I32, 0)], side_effect=True)
    low = bld.extract_value(pair, 0)
    bld.branch(done)
    bld.position_at_end(done)
    phi = bld.phi(I32)
    phi.add_incoming(int_const(I32, 0), start)
    phi.add_incoming(low, read)
    return phi


def _register_constructor(module: ir.Module, fn: ir.Function) -> None:
    entry = ir.LiteralStructType([I32, PTR, PTR])
    ctors = ir.GlobalVariable(module, ir.ArrayType(entry, 1), name="llvm.global_ctors")
    ctors.linkage = "appending"
    ctors.initializer = ir.Constant(ir.ArrayType(entry, 1),
                                    [ir.Constant(entry, [int_const(I32, 65535), fn, ir.Constant(PTR, None)])])
