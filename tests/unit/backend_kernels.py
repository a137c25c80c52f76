"""Loop-IR kernels built by hand for the back-end tests, and the helpers that
compile them and call them (directly and through the packed entry)."""


import ctypes

import numpy as np

from dsl.backends.jit import JitLibrary
from dsl.backends.llvm import build_module, c_args, slot_value
from dsl.backends.optimize import emit_object, optimize, verify_llvm
from dsl.backends.target import host_target
from dsl.lowering.ir import (Assign, Binary, Check, CheckInfo, Const, For, Kernel,
                             KernelOptions, Load, ScalarParam, Shape, Store, Sym,
                             TensorParam, Var)
from dsl.lowering.types import (BOOL, F32, F64, I8, I16, I32, I64, U8, U32, U64, value_type)

OPTS = [0, 3]

# ------------------------------------------------------------------ building kernels


def i64(v: int) -> Const:
    return Const(v, I64)


def elementwise(name, inputs, out_type, fn, options=KernelOptions()):
    """`out[i] = fn(in0[i], in1[i], ...)` over N = shape(in0, 0)."""
    n, i = Sym("N", I64, "dim"), Sym("i", I64, "loop")
    ins = [TensorParam(pname, t, (n,), False) for pname, t in inputs]
    out = TensorParam("out", out_type, (n,), True)
    loads = [Load(p, (Var(i),), value_type(p.dtype)) for p in ins]
    loop = For(i, i64(0), Var(n), 1, (Store(out, (Var(i),), fn(*loads)),), "i")
    return Kernel(name, (*ins, out), (n,), (Assign(n, Shape(ins[0], 0)), loop), options)


def saxpy_kernel(options=KernelOptions()):
    """saxpy(a, x: f32[N], y: f32[N] out): y = a * x + y, with a shape check."""
    n, i, a = Sym("N", I64, "dim"), Sym("i", I64, "loop"), Sym("a", F32, "scalar")
    x = TensorParam("x", F32, (n,), False)
    y = TensorParam("y", F32, (n,), True)
    ax = Binary("*", Var(a), Load(x, (Var(i),), F32), F32)
    update = Store(y, (Var(i),), Binary("+", ax, Load(y, (Var(i),), F32), F32))
    body = (
        Assign(n, Shape(x, 0)),
        Check(Binary("==", Shape(y, 0), Var(n), BOOL), 0),
        For(i, i64(0), Var(n), 1, (update,), "i"),
    )
    checks = (CheckInfo("shape", "y.shape[0] must equal x.shape[0] (N)"),)
    return Kernel("saxpy", (ScalarParam(a), x, y), (n,), body, options, checks, doc="y = a * x + y")


def rowsum_kernel(dtype):
    """out[i] = sum_j x[i, j], with a local accumulator."""
    m, n = Sym("M", I64, "dim"), Sym("N", I64, "dim")
    i, j, acc = Sym("i", I64, "loop"), Sym("j", I64, "loop"), Sym("acc", dtype, "local")
    x = TensorParam("x", dtype, (m, n), False)
    out = TensorParam("out", dtype, (m,), True)
    add = Binary("+", Var(acc), Load(x, (Var(i), Var(j)), dtype), dtype)
    inner = For(j, i64(0), Var(n), 1, (Assign(acc, add),), "j")
    outer = For(i, i64(0), Var(m), 1,
                (Assign(acc, Const(0.0, dtype)), inner, Store(out, (Var(i),), Var(acc))), "i")
    body = (Assign(m, Shape(x, 0)), Assign(n, Shape(x, 1)), outer)
    return Kernel(f"rowsum_{dtype}", (x, out), (m, n), body)


# ------------------------------------------------------------------ compiling and calling


def compile_lib(kernels, opt, metadata="{}"):
    t = host_target()
    ref = verify_llvm(build_module(kernels, t, metadata, module_name="test"))
    optimize(ref, t, opt)
    ref.verify()
    return JitLibrary.from_object(emit_object(ref, t, opt), t)


_CTYPES = {F32: ctypes.c_float, F64: ctypes.c_double, I8: ctypes.c_int8, I16: ctypes.c_int16,
           I32: ctypes.c_int32, I64: ctypes.c_int64, U8: ctypes.c_uint8, U32: ctypes.c_uint32,
           U64: ctypes.c_uint64, BOOL: ctypes.c_uint8}


def arg_values(kernel, values):
    """C argument values for `values` (numpy arrays for tensors, Python scalars)."""
    out = []
    for arg in c_args(kernel):
        v = values[arg.param.name]
        if arg.kind == "data":
            out.append(v.ctypes.data)
        elif arg.kind == "size":
            out.append(v.shape[arg.axis])
        elif arg.kind == "stride":
            out.append(v.strides[arg.axis] // v.itemsize)
        else:
            out.append(v)
    return out


def call(lib, kernel, values, packed=False):
    """Run `kernel` on `values`; returns the status."""
    args = arg_values(kernel, values)
    if packed:
        slots = (ctypes.c_int64 * max(1, len(args)))(
            *[slot_value(a, v) for a, v in zip(c_args(kernel), args)])
        fn = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)(lib.address(kernel.name + "__packed"))
        return fn(ctypes.addressof(slots))
    types = [ctypes.c_void_p if a.kind == "data" else ctypes.c_int64 if a.kind != "scalar"
             else _CTYPES[a.dtype] for a in c_args(kernel)]
    return ctypes.CFUNCTYPE(ctypes.c_int32, *types)(lib.address(kernel.name))(*args)


def run_both(lib, kernel, make):
    """Call directly and packed on fresh `make()` values; both must agree. Returns
    (status, values) of the direct call."""
    direct, packed = make(), make()
    status = call(lib, kernel, direct)
    assert call(lib, kernel, packed, packed=True) == status
    for name, value in direct.items():
        if isinstance(value, np.ndarray):
            np.testing.assert_array_equal(value, packed[name], err_msg=f"packed differs: {name}")
    return status, direct


