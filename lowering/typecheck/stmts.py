"""Type checking of statements: AST statements -> kernel IR statements."""

from __future__ import annotations

from dsl.grammar import ast

from .. import ir
from ..rewrite import map_stmts
from ..types import BY_NAME, I64, value_type
from .calls import INTRINSICS, LOOP_ONLY, PREFETCH
from .coerce import TExpr, coerce, default_type, retype
from .exprs import ExprChecker, strip_qualifier
from .index_notation import STATEMENT, scan
from .local_arrays import check_local_array
from .locals_remap import apply_remap


class StmtChecker(ExprChecker):
    """Checks one function body (a kernel's, or an inlined callee's)."""

    def __init__(self, ctx, frame, locals_, fn_name: str, ret_sym: ir.Sym | None = None):
        super().__init__(ctx, frame, locals_, fn_name)
        self.ret_sym = ret_sym
        self.plan = None
        self.extents: dict = {}
        self.assigned: set[str] = set()

    def function_body(self, fn: ast.FunctionDef) -> tuple[ir.Stmt, ...]:
        self.check_returns(fn)
        self.frame = self.frame.child()  # the body's local arrays; each pass of infer.py starts afresh
        body = self.block(fn.body)
        return apply_remap(tuple(body), self.locals.remap)

    def block(self, stmts) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in stmts:
            out += self.stmt(s)
        return out

    def scoped_block(self, stmts) -> list[ir.Stmt]:
        """`block` in a scope of its own: local arrays declared in it end with it."""
        outer, self.frame = self.frame, self.frame.child()
        try:
            return self.block(stmts)
        finally:
            self.frame = outer

    def stmt(self, node: ast.Stmt) -> list[ir.Stmt]:
        match node:
            case ast.Assign(target=ast.Name() as name, value=value):
                return self.assign_local(name, value, node.span)
            case ast.Assign(target=ast.Subscript() as target, value=value):
                return self.assign_element(target, value, node.span)
            case ast.AugAssign(target=target, op=op, value=value):
                combined = ast.BinOp(op, target, value, node.span)
                return self.stmt(ast.Assign(target, combined, node.span))
            case ast.For():
                return self.for_loop(node)
            case ast.If():
                return self.if_stmt(node)
            case ast.Return():
                return self.return_stmt(node)
            case ast.Pass():
                return []
            case ast.LocalDecl():
                return check_local_array(self, node)
            case ast.ExprStmt(value=value):
                return self.expr_stmt(value, node.span)
        self.bag.error(node.span, "unsupported statement")
        return []

    # ---------------------------------------------------------------- locals

    def assign_local(self, name: ast.Name, value: ast.Expr, span) -> list[ir.Stmt]:
        ident = name.id
        reason = self._not_assignable(ident)
        te = self.with_free_indices(value, lambda: self.expr(value))
        pre = self.ctx.take_prelude()
        if reason:
            self.bag.error(name.span, f"cannot assign to '{ident}': it is {reason}")
            return pre
        self.assigned.add(ident)
        if te is None:
            self.locals.syms.setdefault(ident, ir.Sym(ident, default_type("float"), "local"))
            return pre
        if self._is_constant(ident, te):
            self.locals.constants[ident] = te
            return pre
        sym, expr = self._local_value(ident, te, span)
        return pre if expr is None else pre + [ir.Assign(sym, expr, span)]

    def with_free_indices(self, node: ast.Expr, check):
        """Run `check()` with the free indices of expression `node` bound, so a
        reduction such as `sum(x[k])` may stand in it."""
        plan = scan(None, node, self.is_bound)
        saved = self.plan, self.extents, self.frame
        self.frame = self.frame.child()
        self._report_stray(plan)
        self.plan, self.extents = plan, self._extents(plan)
        try:
            return check()
        finally:
            self.plan, self.extents, self.frame = saved

    def _is_constant(self, ident: str, te: TExpr) -> bool:
        """A local assigned once, with a literal, is that literal where it is read."""
        first = ident not in self.locals.syms and ident not in self.locals.constants
        once = self.locals.assign_counts.get(ident, 0) == 1
        return first and once and te.weak is not None and isinstance(te.expr, ir.Const)

    def _local_value(self, ident: str, te: TExpr, span):
        """The symbol of local `ident` and the value to assign to it (None on error)."""
        locals_ = self.locals
        sym = locals_.syms.get(ident)
        if sym is None:
            return self._first_value(ident, te, span)
        if ident in locals_.literal_kind and ident not in locals_.resolved and not te.weak:
            return self._resolve(ident, sym, te, span)
        return sym, coerce(te, sym.type, self.bag, span, f"assignment to '{ident}'")

    def _first_value(self, ident: str, te: TExpr, span):
        locals_ = self.locals
        if not te.weak:
            sym = locals_.syms[ident] = ir.Sym(ident, te.type, "local")
            return sym, te.expr
        locals_.literal_kind[ident] = te.weak
        locals_.found[ident] = default_type(te.weak)
        known = locals_.known_types.get(ident)
        if known is None and locals_.settled:
            known = default_type(te.weak)
        if known is None:  # provisional: read as a weak value until a real one comes
            locals_.pending[ident] = te.weak
            known = default_type(te.weak)
        sym = locals_.syms[ident] = ir.Sym(ident, known, "local")
        return sym, retype(te, known, self.bag, span)

    def _resolve(self, ident: str, sym: ir.Sym, te: TExpr, span):
        """The first real value assigned to a local first given a literal."""
        locals_ = self.locals
        locals_.resolved.add(ident)
        kind = locals_.literal_kind[ident]
        if kind == "float" and not te.type.is_float or te.type.is_bool:
            self.bag.error(span, f"local '{ident}' was first given a {kind} literal, "
                           f"now a value of type {te.type}", f"initialise it with {te.type}(...)")
            return sym, None
        locals_.found[ident] = te.type
        if ident in locals_.pending:
            new = ir.Sym(ident, te.type, "local")
            locals_.remap[sym] = new
            locals_.syms[ident] = new
            del locals_.pending[ident]
            return new, te.expr
        return sym, coerce(te, sym.type, self.bag, span, f"assignment to '{ident}'")

    def _not_assignable(self, ident: str) -> str | None:
        reason = self.frame.readonly_reason(ident)
        if reason:
            return reason
        if self.frame.lookup_value(ident) is not None:
            return "a loop variable" if self._is_loop_var(ident) else "not a variable"
        if self.frame.lookup_tensor(ident) is not None:
            return f"a tensor (assign its elements, e.g. {ident}[i] = ...)"
        return None

    def _is_loop_var(self, ident: str) -> bool:
        frame = self.frame
        while frame is not None:
            if ident in frame.loop_vars:
                return True
            frame = None if frame.barrier else frame.parent
        return False

    def is_bound(self, ident: str) -> bool:
        ident = strip_qualifier(ident)
        return (self.frame.lookup_value(ident) is not None or self.locals.is_local(ident)
                or self.frame.lookup_tensor(ident) is not None)

    def name(self, node: ast.Name):
        ident = node.id
        if (self.locals.is_local(ident) and ident not in self.assigned
                and self.frame.lookup_value(ident) is None):
            self.bag.error(node.span, f"local '{ident}' may be used before it is assigned",
                           "assign it before any loop or branch that uses it")
            return None
        return super().name(node)

    # ----------------------------------------------------- tensor elements

    def assign_element(self, target: ast.Subscript, value: ast.Expr, span) -> list[ir.Stmt]:
        tensor = self.tensor(target.value)
        plan = scan(target, value, self.is_bound)
        extents = self._extents(plan)
        frame = self.frame.child()
        outer, self.frame = self.frame, frame
        self._report_stray(plan)
        self.frame = outer
        free = []
        for index in plan.lhs:
            sym = ir.Sym(index, I64, "index")
            frame.values[index] = ir.Var(sym)
            free.append((sym, extents.get((STATEMENT, index))))
        saved = self.frame, self.plan, self.extents
        self.frame, self.plan, self.extents = frame, plan, extents
        try:
            idx = self.indices(target, tensor) if tensor is not None else None
            te = self.expr(value)
        finally:
            self.frame, self.plan, self.extents = saved
        pre = self.ctx.take_prelude()
        if tensor is None or idx is None or te is None or any(x is None for _, x in free):
            return pre
        stored = coerce(te, value_type(tensor.dtype), self.bag, value.span, f"store to '{tensor.name}'")
        if stored is None:
            return pre
        store = ir.Store(tensor, idx, stored, span)
        if free and pre:
            return _explicit_loops(free, pre, store, span)
        if free:
            return [ir.IndexStore(tuple(free), store, span)]
        return pre + [store]

    def _report_stray(self, plan) -> None:
        """Report free indices that nothing ranges over; bind them to a stand-in so
        the rest of the statement is still checked without a second error."""
        for ident, span in plan.stray:
            self.frame.values.setdefault(ident, ir.Var(ir.Sym(ident, I64, "index")))
            self.bag.error(span, f"index '{ident}' is not defined",
                           "a free index must appear on the left-hand side, or inside sum(...), "
                           "max(...) or min(...) to be reduced over")

    def _extents(self, plan) -> dict:
        from .extents import index_extents

        return index_extents(self, plan)

    # ---------------------------------------------------------- control flow

    def for_loop(self, node: ast.For) -> list[ir.Stmt]:
        from .loops import check_for

        return check_for(self, node)

    def if_stmt(self, node: ast.If) -> list[ir.Stmt]:
        cond = self.with_free_indices(node.cond, lambda: self.condition(node.cond, "condition of 'if'"))
        pre = self.ctx.take_prelude()
        before = set(self.assigned)
        then = self.scoped_block(node.body)
        after_then, self.assigned = self.assigned, set(before)
        orelse = self.scoped_block(node.orelse)
        self.assigned = before | (after_then & self.assigned)
        if cond is None:
            return pre
        return pre + [ir.If(cond, tuple(then), tuple(orelse), node.span)]

    def return_stmt(self, node: ast.Return) -> list[ir.Stmt]:
        if node.value is None:
            if self.ret_sym is not None:
                self.bag.error(node.span, "this function must return a value")
            return []
        if self.ret_sym is None:
            self.bag.error(node.span, "a kernel returns no value; write results into an output tensor")
            self.with_free_indices(node.value, lambda: self.expr(node.value))
            self.ctx.take_prelude()
            return []
        te = self.with_free_indices(node.value, lambda: self.expr(node.value))
        value = coerce(te, self.ret_sym.type, self.bag, node.value.span, "return value")
        pre = self.ctx.take_prelude()
        return pre if value is None else pre + [ir.Assign(self.ret_sym, value, node.span)]

    def expr_stmt(self, value: ast.Expr, span) -> list[ir.Stmt]:
        fn = self.ctx.functions.get(strip_qualifier(value.func)) if isinstance(value, ast.Call) else None
        if fn is None and isinstance(value, ast.Call) and strip_qualifier(value.func) == PREFETCH:
            return self.prefetch(value, span)
        if fn is None and isinstance(value, ast.Call) and not self.is_builtin(value.func):
            self.with_free_indices(value, lambda: self.call(value))  # reports the unknown function
            self.ctx.take_prelude()
            return []
        if fn is None:
            self.bag.error(span, "this expression has no effect; only calls to kernels may stand alone")
            return []
        from .inline import inline_call

        self.with_free_indices(value, lambda: inline_call(self, value, fn, want_value=False))
        return self.ctx.take_prelude()

    def prefetch(self, call: ast.Call, span) -> list[ir.Stmt]:
        """`prefetch(x[i, j])`: a hint that x[i, j] will be read soon, so that its
        cache line is on its way (x86's prefetcht0, AArch64's prfm). It changes
        no result, and the element may lie outside x: nothing is read.
        `level=2` (or 3) asks for the line in the second (third) level cache
        only, as x86's prefetcht1 (prefetcht2) do."""
        target = call.args[0] if len(call.args) == 1 else None
        if not isinstance(target, ast.Subscript):
            self.bag.error(call.span, "prefetch(...) takes one tensor element, as in prefetch(x[i + 64])")
            return []
        level = 1
        for kw in call.keywords:
            if kw.name != "level":
                self.bag.error(kw.span, f"prefetch() takes one keyword, level=1, 2 or 3, not '{kw.name}'")
            elif not isinstance(kw.value, ast.IntLit) or kw.value.value not in (1, 2, 3):
                self.bag.error(kw.value.span, "prefetch's level is the cache level the line goes to: 1, 2 or 3")
            else:
                level = kw.value.value
        tensor = self.tensor(target.value)
        if tensor is None:
            return []
        indices = self.indices(target, tensor)
        pre = self.ctx.take_prelude()
        return [] if indices is None else pre + [ir.Prefetch(tensor, indices, level=level, span=span)]

    def is_builtin(self, func: str) -> bool:
        """An intrinsic, a cast or a loop iterable: a call that cannot be a statement."""
        name = strip_qualifier(func)
        return name in INTRINSICS or name in LOOP_ONLY or name in BY_NAME

    def check_returns(self, fn: ast.FunctionDef) -> None:
        from .returns import check_return_placement

        check_return_placement(self.bag, fn, needs_value=self.ret_sym is not None)


def _explicit_loops(free, pre: list[ir.Stmt], store: ir.Store, span) -> list[ir.Stmt]:
    """Index notation whose value needs statements first (an inlined call, a
    reduction over one): the loop nest itself, with the statements inside.

        y[i] = f(x[i])   ->   for i in range(N): <f's body>; y[i] = f.result
    """
    loop_syms = {sym: ir.Sym(sym.name, I64, "loop") for sym, _ in free}

    def rename(e: ir.Expr) -> ir.Expr:
        if isinstance(e, ir.Var) and e.sym in loop_syms:
            return ir.Var(loop_syms[e.sym], e.span)
        return e

    body = map_stmts((*pre, store), rename)
    for sym, extent in reversed(free):
        loop = loop_syms[sym]
        body = (ir.For(loop, ir.Const(0, I64, span), extent, 1, body, loop.name, span=span),)
    return list(body)
