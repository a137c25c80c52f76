"""The threading runtime a module with parallel loops links against.

libgomp does the threading: `GOMP_parallel(fn, data, num_threads, flags)` runs
`fn(data)` on a team and returns when all are done. Its symbols are declared
`extern_weak`, so a library linked without libgomp still loads; the generated
code then sees a null `GOMP_parallel`, runs serially and says so once.

Each module also gets two small internal helpers (each `.so` has its own copy,
and its own cached thread count):

    i32 __dsl_num_threads()   DSL_NUM_THREADS, else OMP_NUM_THREADS, else the
                              online cores; read once, then cached
    void __dsl_warn_serial()  the one-time "no libgomp" warning on stderr

and one exported one, `void __dsl_set_num_threads(int)`, to change that count.
"""

from __future__ import annotations

from collections.abc import Callable

import llvmlite.ir as ir

from .ltypes import I32, I64, PTR, int_const

GOMP_PARALLEL = "GOMP_parallel"
NUM_THREADS_FN = "__dsl_num_threads"
SET_THREADS_FN = "__dsl_set_num_threads"
WARN_FN = "__dsl_warn_serial"
WARNING = "dslc: libgomp not found; parallel loops run on one thread\n"
ENV_VARS = ("DSL_NUM_THREADS", "OMP_NUM_THREADS")
# sysconf(_SC_NPROCESSORS_ONLN): the constant differs between C libraries.
_SC_NPROCESSORS_ONLN = {"linux": 84, "darwin": 58, "apple": 58, "freebsd": 58}
VOID = ir.VoidType()


def extern(module: ir.Module, name: str, ret: ir.Type, args: list[ir.Type],
            weak: bool = False) -> ir.Function:
    """Get or declare the C function `name` (weak: may be missing at run time)."""
    existing = module.globals.get(name)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
    fn.attributes.add("nounwind")
    if weak:
        fn.linkage = "extern_weak"
    return fn


def gomp_parallel(module: ir.Module) -> ir.Function:
    """`void GOMP_parallel(void (*fn)(void*), void* data, unsigned n, unsigned flags)`, weak."""
    return extern(module, GOMP_PARALLEL, VOID, [PTR, PTR, I32, I32], weak=True)


def omp_thread_num(module: ir.Module) -> ir.Function:
    """`int omp_get_thread_num(void)`, weak (only called inside a team)."""
    return extern(module, "omp_get_thread_num", I32, [], weak=True)


def omp_num_threads(module: ir.Module) -> ir.Function:
    """`int omp_get_num_threads(void)`, weak (only called inside a team)."""
    return extern(module, "omp_get_num_threads", I32, [], weak=True)


def omp_in_parallel(module: ir.Module) -> ir.Function:
    """`int omp_in_parallel(void)`, weak (only called once GOMP_parallel is known present)."""
    return extern(module, "omp_in_parallel", I32, [], weak=True)


def _cstring(module: ir.Module, name: str, text: str) -> ir.GlobalVariable:
    data = bytearray(text.encode() + b"\0")
    typ = ir.ArrayType(ir.IntType(8), len(data))
    var = ir.GlobalVariable(module, typ, name=name)
    var.global_constant = True
    var.linkage = "private"
    var.initializer = ir.Constant(typ, data)
    var.type = PTR  # print as an opaque pointer
    return var


def _internal_global(module: ir.Module, name: str) -> ir.GlobalVariable:
    var = ir.GlobalVariable(module, I32, name=name)
    var.linkage = "internal"
    var.initializer = ir.Constant(I32, 0)
    var.type = PTR
    return var


def _thread_cache(module: ir.Module) -> ir.GlobalVariable:
    """The module's cached thread count (0: not read from the environment yet)."""
    name = NUM_THREADS_FN + ".cached"
    existing = module.globals.get(name)
    return existing if existing is not None else _internal_global(module, name)


def define_thread_setter(module: ir.Module) -> ir.Function:
    """Exported `void __dsl_set_num_threads(int n)`: use n threads from now on;
    n <= 0 goes back to the environment (`dsl.set_num_threads` calls it)."""
    fn = ir.Function(module, ir.FunctionType(VOID, [I32]), name=SET_THREADS_FN)
    fn.attributes.add("nounwind")
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    n = fn.args[0]
    value = bld.select(bld.icmp_signed(">", n, int_const(I32, 0)), n, int_const(I32, 0))
    bld.atomic_rmw("xchg", _thread_cache(module), value, "monotonic")
    bld.ret_void()
    return fn


def num_threads(module: ir.Module, triple: str) -> ir.Function:
    """The module's `i32 __dsl_num_threads()` (defined on first request).

    The first call reads the environment (`define_cached`).
    """
    existing = module.globals.get(NUM_THREADS_FN)
    if existing is not None:
        return existing
    return define_cached(module, NUM_THREADS_FN, _thread_cache(module), 1,
                         lambda fn, bld: _threads_from_env(module, fn, bld, triple))


def define_cached(module: ir.Module, name: str, cache: ir.GlobalVariable, least: int,
                  compute: Callable[[ir.Function, ir.IRBuilder], ir.Value]) -> ir.Function:
    """An internal `T name()` (T: the type of the global `cache`) that returns
    `cache` once it holds a value >= `least`, else the value `compute(fn, bld)`
    emits, stored in `cache` for the next call. Racing first calls compute the
    same value, so a relaxed atomic store is enough to publish it."""
    typ = cache.value_type
    fn = ir.Function(module, ir.FunctionType(typ, []), name=name)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    cached = bld.load_atomic(cache, "monotonic", typ.width // 8, typ=typ)
    known, first = fn.append_basic_block("known"), fn.append_basic_block("compute")
    bld.cbranch(bld.icmp_signed(">=", cached, int_const(typ, least)), known, first)
    bld.position_at_end(known)
    bld.ret(cached)
    bld.position_at_end(first)
    value = compute(fn, bld)
    # (llvmlite's store_atomic wants a typed pointer; an exchange does the same.)
    bld.atomic_rmw("xchg", cache, value, "monotonic")
    bld.ret(value)
    return fn


def _threads_from_env(module: ir.Module, fn: ir.Function, bld: ir.IRBuilder,
                      triple: str) -> ir.Value:
    """The first positive of atoi(getenv(var)) for ENV_VARS, else the online cores (>= 1)."""
    getenv = extern(module, "getenv", PTR, [PTR])
    atoi = extern(module, "atoi", I32, [PTR])
    done = fn.append_basic_block("done")
    incoming: list[tuple[ir.Value, ir.Block]] = []
    for var in ENV_VARS:
        text = bld.call(getenv, [_cstring(module, f"{NUM_THREADS_FN}.{var}", var)])
        has_text, nxt = fn.append_basic_block(f"{var}.set"), fn.append_basic_block(f"{var}.next")
        bld.cbranch(bld.icmp_unsigned("!=", text, ir.Constant(PTR, None)), has_text, nxt)
        bld.position_at_end(has_text)
        value = bld.call(atoi, [text])
        incoming.append((value, bld.block))
        bld.cbranch(bld.icmp_signed(">", value, int_const(I32, 0)), done, nxt)
        bld.position_at_end(nxt)
    sysconf = extern(module, "sysconf", I64, [I32])
    code = next((c for os_name, c in _SC_NPROCESSORS_ONLN.items() if os_name in triple), 84)
    cores = bld.trunc(bld.call(sysconf, [int_const(I32, code)]), I32)
    # sysconf may fail (-1): one thread is always safe.
    cores = bld.select(bld.icmp_signed(">", cores, int_const(I32, 0)), cores, int_const(I32, 1))
    incoming.append((cores, bld.block))
    bld.branch(done)
    bld.position_at_end(done)
    phi = bld.phi(I32)
    for value, block in incoming:
        phi.add_incoming(value, block)
    return phi


def warn_serial(module: ir.Module) -> ir.Function:
    """The module's `void __dsl_warn_serial()`: writes WARNING to fd 2 on its first call."""
    existing = module.globals.get(WARN_FN)
    if existing is not None:
        return existing
    fn = ir.Function(module, ir.FunctionType(VOID, []), name=WARN_FN)
    fn.linkage = "internal"
    fn.attributes.add("nounwind")
    fn.attributes.add("cold")
    warned = _internal_global(module, WARN_FN + ".done")
    # write(2) rather than stdio: no FILE* to find, and one call is atomic enough.
    write = extern(module, "write", I64, [I32, PTR, I64])
    bld = ir.IRBuilder(fn.append_basic_block("entry"))
    before = bld.atomic_rmw("xchg", warned, int_const(I32, 1), "monotonic")
    first, done = fn.append_basic_block("first"), fn.append_basic_block("done")
    bld.cbranch(bld.icmp_signed("==", before, int_const(I32, 0)), first, done)
    bld.position_at_end(first)
    message = _cstring(module, WARN_FN + ".text", WARNING)
    bld.call(write, [int_const(I32, 2), message, int_const(I64, len(WARNING.encode()))])
    bld.branch(done)
    bld.position_at_end(done)
    bld.ret_void()
    return fn
