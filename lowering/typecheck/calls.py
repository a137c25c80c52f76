"""Calls in expressions: casts, math intrinsics, reductions, and user functions."""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import did_you_mean

from .. import ir
from ..types import BY_NAME, I64, ScalarType
from .coerce import TExpr, concrete, unify
from .exprs import ExprChecker, strip_qualifier
from .fold import fold_intrinsic

PREFETCH = "prefetch"  # a statement: `prefetch(x[i + 64])` (typecheck/stmts.py)
FLOAT_INTRINSICS = {"exp", "log", "sqrt", "rsqrt", "tanh", "erf", "floor", "ceil", "rint"}
INTRINSICS = FLOAT_INTRINSICS | {"abs", "min", "max", "fma", "sum"}
INTRINSICS |= {"bits", "from_bits"}  # bit reinterpretation: f32 <-> i32, f64 <-> i64
LOOP_ONLY = {"range", "grid", "pgrid"}


def check_call(ck: ExprChecker, node: ast.Call) -> TExpr | None:
    from .target_calls import check_target_call, is_target_call

    if is_target_call(ck, node.func):
        return check_target_call(ck, node)
    name = strip_qualifier(node.func)
    if name in BY_NAME:
        return ck.cast(node, name)
    if name in LOOP_ONLY:
        ck.bag.error(node.func_span, f"{name}(...) can only be used as the iterable of a 'for' loop")
        return None
    if name in INTRINSICS:
        if node.keywords:
            ck.bag.error(node.keywords[0].span, f"{name}() takes no keyword arguments")
            return None
        return _intrinsic(ck, node, name)
    fn = ck.ctx.functions.get(name)
    if fn is not None:
        from .inline import inline_call

        return inline_call(ck, node, fn, want_value=True)
    if name == PREFETCH:
        ck.bag.error(node.func_span, "prefetch(...) is a statement of its own; it has no value")
        return None
    known = INTRINSICS | set(ck.ctx.functions) | set(BY_NAME)
    ck.bag.error(node.func_span, f"unknown function '{name}'", *did_you_mean(name, known))
    for arg in node.args:  # their own mistakes; a tensor passed whole is not one
        if not (isinstance(arg, ast.Name) and ck.frame.lookup_tensor(strip_qualifier(arg.id))):
            ck.expr(arg)
    return None


def _intrinsic(ck: ExprChecker, node: ast.Call, name: str) -> TExpr | None:
    from .index_notation import is_reduction

    if is_reduction(node):
        return _reduction(ck, node, name)
    if name in ("min", "max"):
        return _minmax(ck, node, name)
    if name == "fma":
        return _fma(ck, node)
    if name in ("bits", "from_bits"):
        return _bitcast(ck, node, name)
    te = _one_argument(ck, node, name)
    if te is None:
        return None
    if _literals([te]):
        return fold_intrinsic(name, [te], node.span)
    value = concrete(te, ck.bag, node.span) if name == "abs" else _as_float(ck, te, node, name)
    if value is None:
        return None
    if name == "abs" and value.type.is_bool:
        ck.bag.error(node.span, "abs() of a bool")
        return None
    if name == "abs" and not value.type.is_signed and value.type.is_int:
        return TExpr(value)
    return TExpr(ir.Unary(name, value, value.type, node.span))


def _literals(args: list[TExpr]) -> bool:
    return all(a.weak and isinstance(a.expr, ir.Const) for a in args)


def _as_float(ck: ExprChecker, te: TExpr, node: ast.Call, name: str) -> ir.Expr | None:
    value = concrete(te, ck.bag, node.span)
    if value is not None and not value.type.is_float:
        ck.bag.error(node.span, f"{name}() needs a float argument, not {value.type}",
                     f"convert first, e.g. {name}(f32(x))")
        return None
    return value


def _minmax(ck: ExprChecker, node: ast.Call, name: str) -> TExpr | None:
    if len(node.args) < 2:
        ck.bag.error(node.span, f"{name}() of one argument is a reduction and needs an index to reduce over",
                     f"write {name}(a, b) for the {name}imum of two values")
        return None
    args = [ck.expr(a) for a in node.args]
    if any(a is None for a in args):
        return None
    if _literals(args):
        return fold_intrinsic(name, args, node.span)
    acc = args[0]
    for arg in args[1:]:
        target, a, b = unify(acc, arg, ck.bag, node.span, name)
        if a is None or b is None:
            return None
        if target.is_bool:
            ck.bag.error(node.span, f"{name}() of bool values")
            return None
        acc = TExpr(ir.Binary(name, a, b, target, node.span))
    return acc


def _fma(ck: ExprChecker, node: ast.Call) -> TExpr | None:
    if len(node.args) != 3:
        ck.bag.error(node.span, f"fma() takes exactly three arguments ({len(node.args)} given)")
        return None
    args = [ck.expr(a) for a in node.args]
    if any(a is None for a in args):
        return None
    target: ScalarType | None = None
    for arg in args:
        if not arg.weak:
            target = arg.type if target is None else _join(target, arg.type)
    target = target or args[0].type
    if target is None or not target.is_float:
        ck.bag.error(node.span, "fma() needs float arguments of one type")
        return None
    from .coerce import coerce

    a, b, c = (coerce(x, target, ck.bag, node.span, "fma argument") for x in args)
    if a is None or b is None or c is None:
        return None
    return TExpr(ir.Fma(a, b, c, target, node.span))


def _one_argument(ck: ExprChecker, node: ast.Call, name: str) -> TExpr | None:
    """The checked single argument of `name(...)`, or None (reported)."""
    if len(node.args) != 1:
        ck.bag.error(node.span, f"{name}() takes exactly one argument ({len(node.args)} given)")
        return None
    return ck.expr(node.args[0])


def _bitcast(ck: ExprChecker, node: ast.Call, name: str) -> TExpr | None:
    """`bits(x)`: the IEEE bits of float `x` as the signed int of its width;
    `from_bits(i)`: the float whose bits are int `i` (i32/u32 -> f32, i64/u64 -> f64)."""
    te = _one_argument(ck, node, name)
    if te is None:
        return None
    if te.weak:
        hint = "bits(f32(x))" if name == "bits" else "from_bits(i32(x))"
        ck.bag.error(node.span, f"{name}() of a literal has no width", f"give it a type, e.g. {hint}")
        return None
    value = te.expr
    t = value.type
    wants_float = name == "bits"
    if (t.is_float if wants_float else t.is_int) and t.bits in (32, 64):
        result = BY_NAME[f"i{t.bits}" if wants_float else f"f{t.bits}"]
        return TExpr(ir.Unary(name, value, result, node.span))
    need = "an f32 or f64" if wants_float else "a 32- or 64-bit int"
    ck.bag.error(node.span, f"{name}() needs {need} argument, not {t}")
    return None


def _join(a: ScalarType, b: ScalarType) -> ScalarType | None:
    from ..types import common_type

    return common_type(a, b)


def _reduction(ck: ExprChecker, node: ast.Call, name: str) -> TExpr | None:
    if len(node.args) != 1:
        ck.bag.error(node.span, f"{name}() takes exactly one argument when it reduces")
        return None
    plan = getattr(ck, "plan", None)
    names = plan.owned.get(id(node), []) if plan is not None else []
    if not names:
        ck.bag.error(node.span, f"{name}(...) has no index to reduce over",
                     "a reduction index is a name used as a subscript that is not a loop variable "
                     "and not on the left-hand side")
        ck.expr(node.args[0])
        return None
    frame = ck.frame.child()
    indices = []
    for index in names:
        sym = ir.Sym(index, I64, "index")
        frame.values[index] = ir.Var(sym)
        indices.append((sym, ck.extents[(id(node), index)]))
    outer, ck.frame = ck.frame, frame
    try:
        te, body_pre = ck.apart(lambda: ck.expr(node.args[0]))
    finally:
        ck.frame = outer
    body = concrete(te, ck.bag, node.span)
    if body is None or any(x is None for _, x in indices):
        return None
    if body.type.is_bool:
        ck.bag.error(node.span, f"{name}() over bool values; convert with i32(...) first")
        return None
    if body_pre:
        return _reduction_loops(ck, name, indices, body_pre, body, node.span)
    return TExpr(ir.Reduce(name, tuple(indices), body, body.type, node.span))


def _reduction_loops(ck: ExprChecker, name: str, indices, body_pre, body: ir.Expr, span) -> TExpr:
    """A reduction whose body needs statements (an inlined call) as explicit loops:

        acc = 0; for k in range(K): <statements>; acc = acc + body
    """
    from ..loops import identity
    from ..rewrite import map_stmts

    acc = ir.Sym(name, body.type, "local")
    loop_syms = {sym: ir.Sym(sym.name, I64, "loop") for sym, _ in indices}

    def rename(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in loop_syms:
            return ir.Var(loop_syms[e.sym], e.span)
        return e

    op = "+" if name == "sum" else name
    update = ir.Assign(acc, ir.Binary(op, ir.Var(acc, span), body, body.type, span), span)
    nest = map_stmts((*body_pre, update), rename)
    for sym, extent in reversed(indices):
        loop = loop_syms[sym]
        nest = (ir.For(loop, ir.Const(0, I64, span), extent, 1, nest, loop.name, span=span),)
    start = ir.Assign(acc, ir.Const(identity(name, body.type), body.type, span), span)
    ck.ctx.prelude += [start, *nest]
    return TExpr(ir.Var(acc, span))
