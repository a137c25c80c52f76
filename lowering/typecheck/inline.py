"""Calls to user functions (helpers and other kernels) are inlined.

The callee's body is type checked again at each call, in its own scope, with its
parameters bound to the caller's arguments: a tensor parameter becomes the
caller's tensor (its dims unify with the caller's), a scalar parameter a fresh
local holding the argument's value (so it is evaluated once). The inlined
statements run just before the statement that made the call, with two exceptions
that keep Python's meaning: a call on the right of `and`/`or` or in a branch of
`a if c else b` runs only when that side is evaluated (exprs.py), and a call in
index notation or inside a reduction runs once per element, inside the loops
(stmts.py, calls.py). A callee sees only the functions of its own module.
Recursion is reported, since inlining could not end.
"""

from __future__ import annotations

from dsl.grammar import ast

from .. import ir
from ..types import BY_NAME, F16
from .coerce import TExpr, coerce
from ..quant import FORMATS
from .exprs import ExprChecker, strip_qualifier
from .infer import check_body

MAX_INLINE_DEPTH = 64


def inline_call(ck: ExprChecker, node: ast.Call, fn: ast.FunctionDef, want_value: bool) -> TExpr | None:
    ctx = ck.ctx
    if any(active is fn for active in ctx.call_stack):
        names = [f.name for f in ctx.call_stack]
        start = next(k for k, f in enumerate(ctx.call_stack) if f is fn)
        chain = " -> ".join([*names[start:], fn.name])
        ck.bag.error(node.func_span, f"recursive call to '{fn.name}' ({chain}); calls are inlined, "
                     "so recursion is not supported")
        return None
    if len(ctx.call_stack) >= MAX_INLINE_DEPTH:
        ck.bag.error(node.func_span, f"calls nested more than {MAX_INLINE_DEPTH} deep")
        return None
    returns = _return_type(ck, fn)
    if want_value and returns is None:
        ck.bag.error(node.func_span, f"'{fn.name}' returns no value (it is a kernel); call it as a statement")
        return None
    args = _match_args(ck, node, fn)
    if args is None:
        return None
    saved = ctx.take_prelude()
    frame = ck.frame.child(barrier=True)
    bound = [_bind(ck, frame, param, arg, saved) for param, arg in zip(fn.params, args)]
    if not all(bound):  # checking the body now would only report names left unbound
        ctx.prelude = saved
        return None
    ret = ir.Sym(f"{fn.name}.result", returns, "local") if returns is not None else None
    caller_functions = ctx.functions
    ctx.functions = ctx.namespace(fn)
    ctx.call_stack.append(fn)
    try:
        body = check_body(ctx, frame, fn, ret)
    finally:
        ctx.call_stack.pop()
        ctx.functions = caller_functions
    ctx.prelude = saved + list(body)
    if ret is None:
        return TExpr(ir.Const(0, BY_NAME["i32"], node.span))
    return TExpr(ir.Var(ret, node.span))


def _return_type(ck: ExprChecker, fn: ast.FunctionDef):
    if fn.returns is None or fn.returns.name == "None":
        return None
    name = strip_qualifier(fn.returns.name)
    if fn.returns.dims is not None or name not in BY_NAME or BY_NAME[name] == F16:
        ck.bag.error(fn.returns.span, "a function can return only a scalar (f32, f64, i32, ...)")
        return BY_NAME["f32"]
    return BY_NAME[name]


def _match_args(ck: ExprChecker, node: ast.Call, fn: ast.FunctionDef) -> list | None:
    names = [p.name for p in fn.params]
    args: list = list(node.args)
    if len(args) > len(names):
        plural = "argument" if len(names) == 1 else "arguments"
        ck.bag.error(node.span, f"'{fn.name}' takes {len(names)} {plural} but {len(args)} were given")
        return None
    args += [None] * (len(names) - len(args))
    for kw in node.keywords:
        if kw.name not in names:
            ck.bag.error(kw.span, f"'{fn.name}' has no parameter named '{kw.name}'")
            return None
        slot = names.index(kw.name)
        if args[slot] is not None:
            ck.bag.error(kw.span, f"parameter '{kw.name}' of '{fn.name}' given twice")
            return None
        args[slot] = kw.value
    missing = [n for n, a in zip(names, args) if a is None]
    if missing:
        ck.bag.error(node.span, f"'{fn.name}' is missing argument '{missing[0]}'")
        return None
    return args


def _bind(ck: ExprChecker, frame, param: ast.Param, arg: ast.Expr, prelude: list) -> bool:
    """Bind `param` to `arg` in the callee's `frame`; False after reporting why not."""
    ann = param.annotation
    type_name = strip_qualifier(ann.name)
    dtype = BY_NAME.get(type_name)
    quant = type_name if type_name in FORMATS and ann.dims is not None else None
    if quant:
        dtype = BY_NAME["u8"]  # a quantized tensor's storage; its format is checked below
    if dtype is None:
        ck.bag.error(ann.span, f"unknown type '{type_name}'")
        return False
    if ann.dims is None:
        te = ck.expr(arg)
        prelude.extend(ck.ctx.take_prelude())  # what a call inside the argument computes first
        value = coerce(te, dtype, ck.bag, arg.span, f"argument '{param.name}'")
        if value is None:
            return False
        sym = ir.Sym(param.name, dtype, "local")
        prelude.append(ir.Assign(sym, value, arg.span))
        frame.values[param.name] = ir.Var(sym)
        frame.readonly[param.name] = "a parameter"
        return True
    if not isinstance(arg, ast.Name):
        ck.bag.error(arg.span, f"argument '{param.name}' must be a tensor name (a tensor parameter expects a whole tensor)")
        return False
    tensor = ck.frame.lookup_tensor(arg.id) if quant else ck.tensor(arg)
    if tensor is None:
        ck.tensor(arg)  # says why
        return False
    have = tensor.quant.fmt.name if tensor.quant is not None else None
    if have != quant:
        shown = f"a {have} tensor" if have else f"{tensor.dtype} elements"
        ck.bag.error(arg.span, f"argument '{param.name}' expects {f'a {quant} tensor' if quant else f'{dtype} elements'}, "
                     f"but '{arg.id}' is {shown}")
        return False
    if tensor.dtype != dtype:
        ck.bag.error(arg.span, f"argument '{param.name}' expects {dtype} elements, but '{arg.id}' holds {tensor.dtype}")
        return False
    dims = ck.frame.dims_of(strip_qualifier(arg.id)) or tuple(_dim_expr(d) for d in tensor.dims)
    if len(dims) != len(ann.dims):
        ck.bag.error(arg.span, f"argument '{param.name}' expects rank {len(ann.dims)}, but '{arg.id}' has rank {len(dims)}")
        return False
    unified = [_unify_dim(ck, frame, param.name, axis, want, have, arg)
               for axis, (want, have) in enumerate(zip(ann.dims, dims))]
    frame.tensors[param.name] = tensor
    frame.tensor_dims[param.name] = dims
    return all(unified)


def _dim_expr(dim) -> ir.Expr:
    return ir.Const(dim, BY_NAME["i64"]) if isinstance(dim, int) else ir.Var(dim)


def _unify_dim(ck, frame, pname: str, axis: int, want, have: ir.Expr, arg) -> bool:
    if isinstance(want, ast.IntLit):
        if not (isinstance(have, ir.Const) and have.value == want.value):
            ck.bag.error(arg.span, f"argument '{pname}' needs axis {axis} of size {want.value}, "
                         f"but '{arg.id}' axis {axis} is not known to be {want.value}")
            return False
        return True
    name = strip_qualifier(want.id)
    bound = frame.values.get(name)
    if bound is None:
        frame.values[name] = have
        frame.readonly[name] = "a dimension"
        frame.dim_origins[name] = f"'{arg.id}' axis {axis}"
    elif not same_dim(bound, have):
        ck.bag.error(arg.span, f"'{arg.id}' axis {axis} has size {_dim_text(have)}, but parameter '{pname}' "
                     f"needs dim '{name}', which is {_dim_text(bound)} here "
                     f"(from {frame.dim_origins.get(name, 'an earlier argument')})",
                     "sizes are matched by name when the program is compiled: "
                     "declare both axes with the same dim name")
        return False
    return True


def _dim_text(dim: ir.Expr) -> str:
    match dim:
        case ir.Var(sym):
            return sym.name
        case ir.Const(value):
            return str(value)
    return "?"


def same_dim(a: ir.Expr, b: ir.Expr) -> bool:
    if isinstance(a, ir.Var) and isinstance(b, ir.Var):
        return a.sym is b.sym
    if isinstance(a, ir.Const) and isinstance(b, ir.Const):
        return a.value == b.value
    return False
