"""The exported symbols of a module: kernel entry points, packed wrappers, metadata.

See `abi.py` for the argument layout these functions implement.
"""

from __future__ import annotations

import llvmlite.ir as ir

from dsl.lowering.ir import Kernel, ScalarParam

from ..errors import BackendError
from .abi import METADATA_SYMBOL, PACKED_SUFFIX, CArg, c_args
from .context import FunctionContext, TensorArgs
from .quant_views import bind_views
from .reserved import RESERVED_NAMES
from .ltypes import I8, I32, I64, PTR, abi_type, int_const


def arg_type(arg: CArg) -> ir.Type:
    """The LLVM type of one C argument."""
    if arg.kind == "data":
        return PTR
    if arg.kind in ("size", "stride"):
        return I64
    return abi_type(arg.dtype)


def declare_kernel(module: ir.Module, kernel: Kernel) -> ir.Function:
    """`int32_t name(...)`: nounwind, tensor pointers noalias unless in-place."""
    check_symbol_name(kernel.name)
    args = c_args(kernel)
    func = new_function(module, ir.FunctionType(I32, [arg_type(a) for a in args]), kernel.name)
    # Exported but not interposable: name__packed calls this copy directly, not
    # another library's `name` through the PLT. (llvmlite has no visibility
    # field; the word lands where LLVM expects it, after the linkage.)
    func.linkage = "protected"
    func.attributes.add("nounwind")
    # One copy of the body: inlining it into name__packed would double the
    # code-generation time for a call that costs nanoseconds.
    func.attributes.add("noinline")
    for arg, value in zip(args, func.args, strict=True):
        value.name = arg.name
        # The entry checks prove outputs overlap nothing before any access.
        if arg.kind == "data" and not kernel.options.inplace:
            value.add_attribute("noalias")
    return func


def bind_arguments(cx: FunctionContext) -> None:
    """Record tensor arguments and copy scalar arguments into their slots."""
    values = iter(zip(c_args(cx.kernel), cx.func.args, strict=True))
    bld = cx.builder
    for param in cx.kernel.params:
        if isinstance(param, ScalarParam):
            _, value = next(values)
            if param.dtype.is_bool:
                value = bld.icmp_unsigned("!=", value, int_const(I8, 0))
            cx.store_var(param.sym, value)
            continue
        data = next(values)[1]
        sizes = [next(values)[1] for _ in range(param.rank)]
        strides = [next(values)[1] for _ in range(param.rank)]
        cx.tensors[param] = TensorArgs(param, data, sizes, strides)
    bind_views(cx)


def check_symbol_name(name: str) -> None:
    """Reject kernel names that would shadow a C library function.

    LLVM lowers `llvm.tanh` and friends to calls of `tanh`, `erff`, `memset`...;
    a kernel exporting that name would capture those calls (in the JIT, and for
    anyone loading the library with RTLD_GLOBAL).
    """
    if name in RESERVED_NAMES or name.startswith(("__", "llvm.")):
        raise BackendError(f"kernel name {name!r} is reserved: it names a C library function")


def new_function(module: ir.Module, fnty: ir.FunctionType, name: str) -> ir.Function:
    """A function definition named `name`, which must not exist yet."""
    if name in module.globals:
        raise BackendError(f"symbol {name!r} is defined twice in one module")
    return ir.Function(module, fnty, name=name)


def define_packed(module: ir.Module, kernel: Kernel, func: ir.Function) -> ir.Function:
    """`int32_t name__packed(const int64_t* args)`: unpack one 8-byte slot per
    argument and call the kernel (one ctypes argument instead of dozens)."""
    wrapper = new_function(module, ir.FunctionType(I32, [PTR]), kernel.name + PACKED_SUFFIX)
    wrapper.attributes.add("nounwind")
    slots = wrapper.args[0]
    slots.name = "args"
    bld = ir.IRBuilder(wrapper.append_basic_block("entry"))
    values = []
    for k, arg in enumerate(c_args(kernel)):
        ptr = bld.gep(slots, [int_const(I64, k)], inbounds=True, source_etype=I64)
        raw = bld.load(ptr, typ=I64, align=8)
        values.append(_from_slot(bld, raw, arg_type(arg)))
    bld.ret(bld.call(func, values))
    return wrapper


def _from_slot(bld: ir.IRBuilder, raw: ir.Value, typ: ir.Type) -> ir.Value:
    """Convert a slot's int64 to the argument type (f32 lives in the low half)."""
    if isinstance(typ, ir.PointerType):
        return bld.inttoptr(raw, typ)
    if isinstance(typ, ir.DoubleType):
        return bld.bitcast(raw, typ)
    if isinstance(typ, ir.FloatType):
        return bld.bitcast(bld.trunc(raw, I32), typ)
    if typ.width < 64:
        return bld.trunc(raw, typ)
    return raw


def define_metadata(module: ir.Module, metadata: str) -> ir.Function:
    """`const char* __dsl_metadata(void)` returning `metadata` (NUL-terminated)."""
    data = bytearray(metadata.encode("utf-8") + b"\0")
    array_type = ir.ArrayType(I8, len(data))
    text = ir.GlobalVariable(module, array_type, name=METADATA_SYMBOL + ".text")
    text.global_constant = True
    text.linkage = "private"
    text.unnamed_addr = True
    text.initializer = ir.Constant(array_type, data)
    text.type = PTR  # print as an opaque pointer, not `[n x i8]*`
    func = new_function(module, ir.FunctionType(PTR, []), METADATA_SYMBOL)
    func.attributes.add("nounwind")
    ir.IRBuilder(func.append_basic_block("entry")).ret(text)
    return func

