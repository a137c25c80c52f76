"""The type checker's entry point: a parsed module -> typed kernel IR.

A `def` without a return type is a *kernel* (exported); one with `-> type` is a
*helper* (inlined where it is called). A tensor parameter is an output exactly
when the kernel (or a function it calls) stores into it; all other tensors are
read-only inputs.
"""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import DiagnosticBag, did_you_mean

from .. import ir
from ..machine import Machine
from ..quant import FORMATS
from ..schedule import read_schedule
from ..types import BY_NAME, F16
from .context import Frame, FunctionContext, Locals
from .exprs import strip_qualifier
from .infer import check_body
from .quant_access import quant_param
from .stmts import StmtChecker
from .writes import written_params

KNOWN_DECORATORS = ("options", "schedule")
OPTION_NAMES = ("reassociate", "inplace", "contract")


def is_kernel(fn: ast.FunctionDef) -> bool:
    return fn.returns is None or fn.returns.name == "None"


def check_module(module: ast.Module, imported: dict[str, ast.FunctionDef] | None = None,
                 scopes: dict[int, dict[str, ast.FunctionDef]] | None = None,
                 machine: Machine | None = None) -> ir.Program:
    """Type check every function; return the kernels of `module` as kernel IR.

    `imported` maps names brought in by `from x import name` to their definitions;
    `scopes` maps each imported function (by id) to the functions its own module
    sees, so it calls its module's helpers, not same-named ones elsewhere.
    `machine` is the target that target intrinsics (`x86.maddubs`) are checked against.
    Raises `CompileError` with every diagnostic found.
    """
    bag = DiagnosticBag()
    functions = dict(imported or {})
    for fn in module.functions:
        if fn.name in (imported or {}):
            bag.error(fn.name_span, f"'{fn.name}' is defined here and also imported",
                      "rename one of them")
        elif fn.name in functions:
            bag.error(fn.name_span, f"'{fn.name}' is defined more than once")
        functions[fn.name] = fn
    kernels = []
    for fn in module.functions:
        kernel = check_function(fn, functions, bag, scopes or {}, machine)
        if kernel is not None and is_kernel(fn):
            kernels.append(kernel)
    bag.raise_if_errors()
    return ir.Program(tuple(kernels))


def check_function(fn: ast.FunctionDef, functions, bag: DiagnosticBag, scopes=None,
                   machine: Machine | None = None) -> ir.Kernel | None:
    ctx = FunctionContext(bag, functions, call_stack=[fn], scopes=dict(scopes or {}), machine=machine)
    writes = written_params(fn, functions, ctx.scopes)
    frame = Frame()
    params, dims = _params(fn, frame, writes, bag)
    ret = None
    if not is_kernel(fn):
        from .inline import _return_type

        ret_type = _return_type(StmtChecker(ctx, frame, Locals(), fn.name), fn)
        ret = ir.Sym(f"{fn.name}.result", ret_type or BY_NAME["f32"], "local")
    body = check_body(ctx, frame, fn, ret)
    options = _options(fn, bag)
    schedule = read_schedule(fn.decorators, bag)
    if params is None:
        return None
    return ir.Kernel(fn.name, tuple(params), tuple(dims.values()), body, options,
                     doc=fn.docstring, span=fn.name_span, schedule=schedule,
                     auto_schedule=not any(d.name.rsplit(".", 1)[-1] == "schedule" for d in fn.decorators))


def _params(fn: ast.FunctionDef, frame: Frame, writes: set[str], bag: DiagnosticBag):
    params: list[ir.Param] = []
    dims: dict[str, ir.Sym] = {}
    names = {p.name for p in fn.params}
    ok = True
    seen: set[str] = set()
    for p in fn.params:
        if p.name in seen:
            bag.error(p.span, f"parameter '{p.name}' is declared twice")
            ok = False
            continue
        seen.add(p.name)
        param = _param(p, writes, dims, names, bag)
        if param is None:
            ok = False
            continue
        params.append(param)
        if isinstance(param, ir.TensorParam):
            frame.tensors[p.name] = param
        else:
            frame.values[p.name] = ir.Var(param.sym)
            frame.readonly[p.name] = "a parameter (parameters are read-only)"
    for name, sym in dims.items():
        frame.values[name] = ir.Var(sym)
        frame.readonly[name] = "a dimension"
    return (params if ok else None), dims


def _param(p: ast.Param, writes, dims: dict, names: set, bag: DiagnosticBag):
    ann = p.annotation
    type_name = strip_qualifier(ann.name)
    dtype = BY_NAME.get(type_name)
    if dtype is None and type_name not in FORMATS:
        bag.error(ann.span, f"unknown type '{type_name}'", *did_you_mean(type_name, [*BY_NAME, *FORMATS]))
        return None
    if ann.dims is None:
        if dtype is None:
            bag.error(ann.span, f"{type_name} is a tensor type (blocks of quantized values), e.g. {type_name}[N, K]")
            return None
        if dtype == F16:
            bag.error(ann.span, "f16 is a storage type for tensors; pass scalars as f32")
            return None
        return ir.ScalarParam(ir.Sym(p.name, dtype, "scalar"), p.span)
    shape: list = []
    for dim in ann.dims:
        if isinstance(dim, ast.IntLit):
            if dim.value < 0 or dim.value >= 1 << 62:
                bag.error(dim.span, f"dimension {dim.value} is out of range")
                return None
            shape.append(int(dim.value))
            continue
        dim_name = strip_qualifier(dim.id)
        if dim_name in names:
            bag.error(dim.span, f"dim '{dim_name}' has the name of a parameter")
            return None
        if dim_name in BY_NAME:
            bag.error(dim.span, f"'{dim_name}' is a type name and cannot be a dim")
            return None
        shape.append(dims.setdefault(dim_name, ir.Sym(dim_name, BY_NAME["i64"], "dim")))
    if dtype is None:
        return quant_param(p, type_name, shape, writes, dims, bag)
    return ir.TensorParam(p.name, dtype, tuple(shape), p.name in writes, p.span)


def _options(fn: ast.FunctionDef, bag: DiagnosticBag) -> ir.KernelOptions:
    values = {}
    for dec in fn.decorators:
        name = strip_qualifier(dec.name)
        if name not in KNOWN_DECORATORS:
            bag.error(dec.span, f"unknown decorator '@{name}'", *did_you_mean(name, KNOWN_DECORATORS))
            continue
        if name != "options":
            continue
        for kw in dec.keywords:
            if kw.name not in OPTION_NAMES:
                bag.error(kw.span, f"unknown option '{kw.name}'", *did_you_mean(kw.name, OPTION_NAMES))
            elif not isinstance(kw.value, ast.BoolLit):
                bag.error(kw.value.span, f"option '{kw.name}' takes True or False")
            else:
                values[kw.name] = kw.value.value
        if dec.args:
            bag.error(dec.args[0].span, "@options takes keyword arguments only, e.g. @options(reassociate=True)")
    return ir.KernelOptions(**values)
