"""Type checking of expressions: AST expression -> typed IR expression.

A failed sub-expression yields None (the poison value): the checker reports it
once and keeps going, so one run shows every mistake.
"""

from __future__ import annotations

import math

from dsl.grammar import ast
from dsl.grammar.diagnostics import did_you_mean

from .. import ir
from ..types import BOOL, BY_NAME, F16, I64, value_type
from .coerce import TExpr, coerce, concrete, unify, weak_const
from .context import Frame, FunctionContext, Locals
from .fold import fold_binary, fold_unary
from .quant_access import load as quant_load
from .quant_access import split_target

ARITH = {"+", "-", "*", "/", "//", "%", "**"}
BITWISE = {"&", "|", "^", "<<", ">>"}


def strip_qualifier(name: str) -> str:
    """`dsl.f32` -> `f32`: a Python module may spell types through the package."""
    return name.rsplit(".", 1)[-1]


class ExprChecker:
    """Checks expressions of one function body; `calls.py` and `stmts.py` extend it."""

    def __init__(self, ctx: FunctionContext, frame: Frame, locals_: Locals, fn_name: str):
        self.ctx = ctx
        self.bag = ctx.bag
        self.frame = frame
        self.locals = locals_
        self.fn_name = fn_name

    # ------------------------------------------------------------ entry points

    def expr(self, node: ast.Expr) -> TExpr | None:
        match node:
            case ast.IntLit(value, span) | ast.FloatLit(value, span):
                return weak_const(value, span)
            case ast.BoolLit(value, span):
                return TExpr(ir.Const(value, BOOL, span))
            case ast.Name():
                return self.name(node)
            case ast.Subscript():
                return self.load(node)
            case ast.BinOp():
                return self.binop(node)
            case ast.UnaryOp():
                return self.unary(node)
            case ast.Compare():
                return self.compare(node)
            case ast.BoolOp():
                return self.boolop(node)
            case ast.IfExp():
                return self.ifexp(node)
            case ast.Call():
                return self.call(node)
        self.bag.error(getattr(node, "span", None), "unsupported expression")
        return None

    def typed(self, node: ast.Expr) -> ir.Expr | None:
        """Check `node` and give a literal its default type."""
        return concrete(self.expr(node), self.bag, node.span)

    def index(self, node: ast.Expr, what: str) -> ir.Expr | None:
        te = self.expr(node)
        if te is None:
            return None
        if not te.weak and not te.type.is_int:
            self.bag.error(node.span, f"{what} must be an integer, not {te.type}")
            return None
        return coerce(te, I64, self.bag, node.span, what)

    def condition(self, node: ast.Expr, what: str) -> ir.Expr | None:
        te = self.expr(node)
        if te is None:
            return None
        if te.weak or not te.type.is_bool:
            shown = "a number" if te.weak else te.type.name
            self.bag.error(node.span, f"{what} must be a bool, not {shown}", "compare explicitly, e.g. x != 0")
            return None
        return te.expr

    # ----------------------------------------------------------------- leaves

    def name(self, node: ast.Name) -> TExpr | None:
        if "." in node.id and not node.id.startswith("dsl."):
            self.bag.error(node.span, f"attribute access is not supported: '{node.id}'")
            return None
        ident = strip_qualifier(node.id) if "." in node.id else node.id
        value = self.frame.lookup_value(ident)
        if value is not None:
            return TExpr(_at(value, node.span))
        constant = self.locals.constants.get(ident)
        if constant is not None:
            return TExpr(_at(constant.expr, node.span), constant.weak)
        sym = self.locals.syms.get(ident)
        if sym is not None:
            if ident in self.locals.pending:
                return TExpr(ir.Var(sym, node.span), self.locals.pending[ident])
            return TExpr(ir.Var(sym, node.span))
        if self.frame.lookup_tensor(ident) is not None:
            self.bag.error(node.span, f"'{ident}' is a tensor; index it to get an element, e.g. {ident}[i]")
            return None
        self.unknown_name(node.span, ident)
        return None

    def unknown_name(self, span, ident: str) -> None:
        known = self.frame.visible_names() | set(self.locals.syms) | set(self.locals.constants)
        self.bag.error(span, f"name '{ident}' is not defined", *did_you_mean(ident, known))

    def tensor(self, name: ast.Name) -> ir.TensorParam | None:
        """The tensor `name` names, for a store or a helper's argument."""
        quantized = split_target(self.frame, name.id)
        if quantized is not None:
            self.bag.error(name.span, f"'{name.id}' belongs to a quantized tensor ({quantized[0].quant.fmt.name}): "
                           "kernels read its elements and fields; it cannot be stored into, or passed "
                           "where a plain tensor is expected")
            return None
        if "." in name.id and not name.id.startswith("dsl."):
            self.bag.error(name.span, f"attribute access is not supported: '{name.id}' cannot be indexed",
                           "only quantized tensors have fields (w.q, w.scale, w.d, ...)")
            return None
        ident = strip_qualifier(name.id)
        tensor = self.frame.lookup_tensor(ident)
        if tensor is None:
            if self.frame.lookup_value(ident) is not None or self.locals.is_local(ident):
                self.bag.error(name.span, f"'{ident}' is a scalar and cannot be indexed")
            else:
                self.unknown_name(name.span, ident)
        return tensor

    def indices(self, node: ast.Subscript, tensor: ir.TensorParam) -> tuple | None:
        if len(node.indices) != tensor.rank:
            self.bag.error(node.span, f"'{tensor.name}' has rank {tensor.rank} but is indexed with "
                           f"{len(node.indices)} {'index' if len(node.indices) == 1 else 'indices'}")
            return None
        out = [self.index(i, f"index {k} of '{node.value.id}'") for k, i in enumerate(node.indices)]
        return None if any(i is None for i in out) else tuple(out)

    def load(self, node: ast.Subscript) -> TExpr | None:
        quantized = split_target(self.frame, node.value.id)
        if quantized is not None:
            return quant_load(self, node, *quantized)
        tensor = self.tensor(node.value)
        if tensor is None:
            for i in node.indices:
                self.expr(i)
            return None
        idx = self.indices(node, tensor)
        if idx is None:
            return None
        return TExpr(ir.Load(tensor, idx, value_type(tensor.dtype), node.span))

    # -------------------------------------------------------------- operators

    def binop(self, node: ast.BinOp) -> TExpr | None:
        left, right = self.expr(node.left), self.expr(node.right)
        if left is None or right is None:
            return None
        op = node.op
        if left.weak and right.weak and isinstance(left.expr, ir.Const) and isinstance(right.expr, ir.Const):
            return fold_binary(op, left, right, self.bag, node.span)
        if op == "**":
            return self.power(node, left, right)
        if op in ("<<", ">>"):
            return self.shift(node, left, right)
        target, a, b = unify(left, right, self.bag, node.span, op)
        if target is None or a is None or b is None:
            return None
        if op == "/" and not target.is_float:
            self.bag.error(node.span, f"'/' needs float operands, got {target}",
                           "use '//' for integer (floor) division, or cast to a float type")
            return None
        if op in BITWISE and not (target.is_int or (target.is_bool and op in "&|^")):
            self.bag.error(node.span, f"'{op}' needs integer operands, got {target}")
            return None
        if target.is_bool and op in ARITH:
            self.bag.error(node.span, f"arithmetic '{op}' on bool values; convert with i32(...) first")
            return None
        return TExpr(ir.Binary(op, a, b, target, node.span))

    def shift(self, node: ast.BinOp, left: TExpr, right: TExpr) -> TExpr | None:
        value = concrete(left, self.bag, node.left.span)
        if value is None:
            return None
        if not value.type.is_int or (not right.weak and not right.type.is_int):
            self.bag.error(node.span, f"'{node.op}' needs integer operands")
            return None
        amount = right.expr if right.weak is None else None
        if right.weak:
            if right.expr.value < 0:
                self.bag.error(node.right.span, "negative shift count")
                return None
            amount = ir.Const(min(int(right.expr.value), 255), value.type, right.expr.span)
        elif amount.type != value.type:
            amount = ir.Cast(amount, value.type, node.right.span)
        return TExpr(ir.Binary(node.op, value, amount, value.type, node.span))

    def power(self, node: ast.BinOp, left: TExpr, right: TExpr) -> TExpr | None:
        """`x ** n` for a small constant integer n: repeated multiplication."""
        if not (right.weak == "int" and isinstance(right.expr, ir.Const) and 0 <= right.expr.value <= 16):
            self.bag.error(node.span, "'**' needs a constant integer exponent from 0 to 16",
                           "use exp(y * log(x)) for other powers")
            return None
        base = concrete(left, self.bag, node.left.span)
        if base is None:
            return None
        result: ir.Expr = ir.Const(1, base.type, node.span) if not base.type.is_float else ir.Const(1.0, base.type, node.span)
        for _ in range(int(right.expr.value)):
            result = base if isinstance(result, ir.Const) else ir.Binary("*", result, base, base.type, node.span)
        return TExpr(result)

    def unary(self, node: ast.UnaryOp) -> TExpr | None:
        operand = self.expr(node.operand)
        if operand is None:
            return None
        if operand.weak and isinstance(operand.expr, ir.Const):
            return fold_unary(node.op, operand, self.bag, node.span)
        if node.op == "+":
            return operand
        if node.op == "not":
            cond = self.condition(node.operand, "operand of 'not'")
            return None if cond is None else TExpr(ir.Unary("not", cond, BOOL, node.span))
        value = concrete(operand, self.bag, node.span)
        if value is None:
            return None
        if node.op == "~" and not value.type.is_int:
            self.bag.error(node.span, f"'~' needs an integer operand, not {value.type}")
            return None
        if node.op == "-" and value.type.is_bool:
            self.bag.error(node.span, "cannot negate a bool")
            return None
        op = "neg" if node.op == "-" else "invert"
        return TExpr(ir.Unary(op, value, value.type, node.span))

    def compare(self, node: ast.Compare) -> TExpr | None:
        left, right = self.expr(node.left), self.expr(node.right)
        if left is None or right is None:
            return None
        if left.weak and right.weak:
            left = TExpr(concrete(left, self.bag, node.span))
        _, a, b = unify(left, right, self.bag, node.span, node.op)
        if a is None or b is None:
            return None
        if a.type.is_bool and node.op not in ("==", "!="):
            self.bag.error(node.span, f"'{node.op}' is not defined on bool values")
            return None
        return TExpr(ir.Binary(node.op, a, b, BOOL, node.span))

    def boolop(self, node: ast.BoolOp) -> TExpr | None:
        a = self.condition(node.left, f"left operand of '{node.op}'")
        b, b_pre = self.apart(lambda: self.condition(node.right, f"right operand of '{node.op}'"))
        if a is None or b is None:
            return None
        if not b_pre:
            return TExpr(ir.Binary(node.op, a, b, BOOL, node.span))
        # A call on the right runs only when the left does not decide (short circuit).
        tmp = ir.Sym(node.op, BOOL, "local")
        undecided = ir.Var(tmp) if node.op == "and" else ir.Unary("not", ir.Var(tmp), BOOL, node.span)
        self.ctx.prelude += [ir.Assign(tmp, a, node.span),
                             ir.If(undecided, (*b_pre, ir.Assign(tmp, b, node.span)), (), node.span)]
        return TExpr(ir.Var(tmp, node.span))

    def ifexp(self, node: ast.IfExp) -> TExpr | None:
        cond = self.condition(node.cond, "condition of 'if'")
        body, a_pre = self.apart(lambda: self.expr(node.body))
        orelse, b_pre = self.apart(lambda: self.expr(node.orelse))
        if cond is None or body is None or orelse is None:
            return None
        target, a, b = unify(body, orelse, self.bag, node.span, "if-else")
        if a is None or b is None:
            return None
        if not a_pre and not b_pre:
            return TExpr(ir.Select(cond, a, b, target, node.span))
        # A call in a branch runs only when that branch is chosen.
        tmp = ir.Sym("sel", target, "local")
        self.ctx.prelude.append(ir.If(cond, (*a_pre, ir.Assign(tmp, a, node.span)),
                                      (*b_pre, ir.Assign(tmp, b, node.span)), node.span))
        return TExpr(ir.Var(tmp, node.span))

    def apart(self, check):
        """Run `check()`; return its result and the statements that calls inlined
        in it emitted, kept apart from the current prelude (so they can be made
        conditional, or put inside a loop)."""
        saved = self.ctx.take_prelude()
        try:
            result = check()
            return result, self.ctx.take_prelude()
        finally:
            self.ctx.prelude = saved

    def call(self, node: ast.Call) -> TExpr | None:
        from .calls import check_call  # calls.py needs this class; import late

        return check_call(self, node)

    def cast(self, node: ast.Call, type_name: str) -> TExpr | None:
        target = BY_NAME[type_name]
        if target == F16:
            self.bag.error(node.span, "f16 is a storage type; compute in f32 (stores to f16 tensors convert)")
            return None
        if len(node.args) != 1 or node.keywords:
            self.bag.error(node.span, f"{type_name}(...) takes exactly one argument")
            return None
        te = self.expr(node.args[0])
        if te is None:
            return None
        if te.weak and isinstance(te.expr, ir.Const):
            value = te.expr.value
            if target.is_bool:
                return TExpr(ir.Const(bool(value), BOOL, node.span))
            if target.is_int and te.weak == "float":
                if not math.isfinite(value):
                    self.bag.error(node.span, f"float literal {value} has no {type_name} value")
                    return None
                value = int(value)
            done = coerce(TExpr(ir.Const(value, te.expr.type, node.span), "int" if target.is_int else "float"),
                          target, self.bag, node.span, "cast")
            return None if done is None else TExpr(done)  # None: the literal does not fit (reported)
        value = concrete(te, self.bag, node.span)
        if value is None:
            return None
        return TExpr(value if value.type == target else ir.Cast(value, target, node.span))


def _at(expr: ir.Expr, span) -> ir.Expr:
    """The same value, located at the use site (for messages)."""
    match expr:
        case ir.Var(sym):
            return ir.Var(sym, span)
        case ir.Const(value, t):
            return ir.Const(value, t, span)
    return expr
