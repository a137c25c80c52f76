"""Non-temporal stores: output that bypasses the cache on its way to memory.

A plain store of a line that is not cached first reads the line (a
read-for-ownership), so a kernel that writes a large output moves it across
the memory bus twice; a non-temporal store writes whole lines without that
read. For `add` on 16M floats on Zen 4 that is 27.6 -> 31.6 GB/s on one
thread (C with `_mm256_stream_ps`). Output that would still be in the cache
for whoever reads it next must not bypass it, so a store the IR marks
`nontemporal` (vectorize's `nontemporal=`) is one at run time only when

  - its tensor holds at least `__dsl_stream_bytes()` bytes: DSL_STREAM_BYTES
    from the environment, else STREAM_BYTES (half of a 32 MiB last-level
    cache: smaller outputs are likely read back from the cache), and
  - its address is aligned to the vector's size (x86's `vmovntps` faults on
    anything else; vectorize's head aligns the stores, this makes any
    address safe);

otherwise it is the plain store. The stream's head and tail, the lanes
below a count, are stored as plain pieces of 2^k lanes, largest first
(`store_prefix`), not by a masked store: on Zen 4 a masked store to a line
that is not in the cache is slow (64 MiB copied in 2 KiB rows 32 bytes past
a line, C, 1 thread: 27 GB/s with masked edges, 44 with the pieces; all
lines aligned: 44). x86 orders non-temporal stores only by
`sfence`, so a function that made any ends with one (`finish_streaming`)
before its results are seen by another thread or returned.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import AlignGap
from dsl.lowering.transforms.nontemporal import alignment

from .context import FunctionContext, TensorArgs
from .ltypes import I8, I32, I64, PTR, int_const
from .memory import element_pointer
from .runtime import VOID, _cstring, define_cached, extern

STREAM_BYTES = 16 << 20
STREAM_BYTES_FN = "__dsl_stream_bytes"
ENV_VAR = "DSL_STREAM_BYTES"


def align_gap(cx: FunctionContext, e: AlignGap, indices: list[ir.Value]) -> ir.Value:
    """The i64 value of `AlignGap`: (-address mod bytes) / itemsize, 0 when unaligned to items."""
    bld = cx.builder
    t = cx.tensor(e.tensor)
    address = bld.ptrtoint(element_pointer(cx, t, indices, inbounds=False), I64)
    size = t.param.dtype.itemsize
    gap = bld.and_(bld.neg(address), int_const(I64, e.bytes - 1))
    whole = bld.icmp_unsigned("==", bld.and_(address, int_const(I64, size - 1)), int_const(I64, 0))
    return bld.select(whole, bld.lshr(gap, int_const(I64, size.bit_length() - 1)), int_const(I64, 0))


def nontemporal_store(cx: FunctionContext, t: TensorArgs, value: ir.Value, ptr: ir.Value, lanes: int) -> None:
    """Store `value` at `ptr` bypassing the cache when `t` is large and `ptr` aligned; else plainly."""
    bld = cx.builder
    size = t.param.dtype.itemsize
    align = alignment(lanes, size)
    misaligned = bld.and_(bld.ptrtoint(ptr, I64), int_const(I64, align - 1))
    aligned = bld.icmp_unsigned("==", misaligned, int_const(I64, 0))
    stream = bld.and_(aligned, bld.icmp_signed(">=", _tensor_bytes(cx, t), _threshold(cx)))
    fast, plain = cx.new_block("store.stream"), cx.new_block("store.plain")
    done = cx.new_block("store.done")
    bld.cbranch(stream, fast, plain)
    bld.position_at_end(fast)
    instr = bld.store(value, ptr, align=align)
    instr.set_metadata("nontemporal", cx.module.add_metadata([int_const(ir.IntType(32), 1)]))
    bld.branch(done)
    bld.position_at_end(plain)
    bld.store(value, ptr, align=size)
    bld.branch(done)
    bld.position_at_end(done)
    cx.streamed = True


def store_prefix(cx: FunctionContext, value: ir.Value, ptr: ir.Value, count: ir.Value, lanes: int,
                 size: int) -> None:
    """Lanes [0, count) of `value` stored from `ptr` on (count clamped to
    [0, lanes]; `lanes` a power of two): all of them when count is lanes, else
    the pieces of count's binary digits, each the next lanes in order."""
    bld = cx.builder
    n = _clamp(bld, count, lanes)
    with bld.if_then(bld.icmp_signed("==", n, int_const(I64, lanes))):
        bld.store(value, ptr, align=size)
    rest, at, c = value, ptr, lanes // 2
    while c >= 1:
        has = bld.icmp_unsigned("!=", bld.and_(n, int_const(I64, c)), int_const(I64, 0))
        low = _lanes(bld, rest, 0, c)
        with bld.if_then(has):
            bld.store(low, at, align=size)
        if c > 1:
            rest = bld.select(has, _lanes(bld, rest, c, c), low)
            at = bld.gep(at, [bld.select(has, int_const(I64, c), int_const(I64, 0))], source_etype=value.type.element)
        c //= 2


def _lanes(bld: ir.IRBuilder, v: ir.Value, first: int, count: int) -> ir.Value:
    """Lanes [first, first + count) of vector `v`: a vector, or a scalar for one lane."""
    if count == 1:
        return bld.extract_element(v, int_const(I32, first))
    pick = ir.Constant(ir.VectorType(I32, count), [int_const(I32, first + k) for k in range(count)])
    return bld.shuffle_vector(v, ir.Constant(v.type, None), pick)


def _clamp(bld: ir.IRBuilder, n: ir.Value, high: int) -> ir.Value:
    """The i64 `n` within [0, high]."""
    n = bld.select(bld.icmp_signed("<", n, int_const(I64, 0)), int_const(I64, 0), n)
    return bld.select(bld.icmp_signed(">", n, int_const(I64, high)), int_const(I64, high), n)


def finish_streaming(cx: FunctionContext, bld: ir.IRBuilder) -> None:
    """At the function's exit: make its non-temporal stores visible (x86 `sfence`)."""
    if cx.module.triple.startswith(("x86_64", "i686", "i386")):
        bld.call(extern(cx.module, "llvm.x86.sse.sfence", VOID, []), [])
    # AArch64's STNP is ordered by the barriers that publish results anyway.


def _tensor_bytes(cx: FunctionContext, t: TensorArgs) -> ir.Value:
    total: ir.Value = int_const(I64, t.param.dtype.itemsize)
    for n in t.sizes:
        total = cx.builder.mul(total, n)
    return total


def _threshold(cx: FunctionContext) -> ir.Value:
    """`__dsl_stream_bytes()`, called once per function, in its entry block."""
    if cx.stream_threshold is None:
        cx.stream_threshold = cx.alloca_builder.call(stream_bytes(cx.module), [])
    return cx.stream_threshold


def stream_bytes(module: ir.Module) -> ir.Function:
    """The module's `i64 __dsl_stream_bytes()`: atoll(DSL_STREAM_BYTES) when the
    variable starts with a digit, else STREAM_BYTES; read once, then cached."""
    existing = module.globals.get(STREAM_BYTES_FN)
    if existing is not None:
        return existing
    cache = ir.GlobalVariable(module, I64, name=STREAM_BYTES_FN + ".cached")
    cache.linkage = "internal"
    cache.initializer = int_const(I64, -1)
    cache.type = PTR
    return define_cached(module, STREAM_BYTES_FN, cache, 0, lambda fn, bld: _from_env(module, fn, bld))


def _from_env(module: ir.Module, fn: ir.Function, bld: ir.IRBuilder) -> ir.Value:
    """atoll(DSL_STREAM_BYTES) when it starts with a digit, else STREAM_BYTES."""
    text = bld.call(extern(module, "getenv", PTR, [PTR]), [_cstring(module, STREAM_BYTES_FN + ".env", ENV_VAR)])
    has_text, parse, done = (fn.append_basic_block(n) for n in ("has_text", "parse", "done"))
    entry = bld.block
    bld.cbranch(bld.icmp_unsigned("!=", text, ir.Constant(PTR, None)), has_text, done)
    bld.position_at_end(has_text)
    digit = bld.sub(bld.load(text, typ=I8), int_const(I8, ord("0")))
    bld.cbranch(bld.icmp_unsigned("<", digit, int_const(I8, 10)), parse, done)
    bld.position_at_end(parse)
    parsed = bld.call(extern(module, "atoll", I64, [PTR]), [text])
    bld.branch(done)
    bld.position_at_end(done)
    value = bld.phi(I64)
    value.add_incoming(int_const(I64, STREAM_BYTES), entry)
    value.add_incoming(int_const(I64, STREAM_BYTES), has_text)
    value.add_incoming(parsed, parse)
    return value
