"""Which tensor parameters a function writes, directly or through its callees."""

from __future__ import annotations

from dsl.grammar import ast


def written_params(fn: ast.FunctionDef, functions: dict, scopes: dict | None = None,
                   _active: frozenset = frozenset()) -> set[str]:
    """Names of `fn`'s parameters that it (or a function it calls) stores into.

    A call inside `fn` is resolved in `scopes[id(fn)]` (the functions `fn`'s
    module sees) when given, else in `functions`."""
    if id(fn) in _active:
        return set()  # recursion is reported by the checker
    active = _active | {id(fn)}
    visible = (scopes or {}).get(id(fn), functions)
    params = {p.name for p in fn.params}
    out: set[str] = set()
    for node in _walk(fn.body):
        match node:
            case ast.Assign(target=ast.Subscript(value=name)) | ast.AugAssign(target=ast.Subscript(value=name)):
                out.add(name.id.rsplit(".", 1)[-1])
            case ast.Call(func=func, args=args, keywords=keywords):
                callee = visible.get(func.rsplit(".", 1)[-1])
                if callee is None:
                    continue
                inner = written_params(callee, functions, scopes, active)
                bound = dict(zip((p.name for p in callee.params), args))
                bound.update({k.name: k.value for k in keywords})
                for pname in inner:
                    arg = bound.get(pname)
                    if isinstance(arg, ast.Name):
                        out.add(arg.id)
    return out & params


def _walk(stmts):
    """Statements and the expressions in them, iteratively."""
    stack = list(stmts)
    while stack:
        node = stack.pop()
        yield node
        match node:
            case ast.For(iter=it, body=body):
                stack.extend(body)
                stack.append(it)
            case ast.If(cond=cond, body=body, orelse=orelse):
                stack.extend(body)
                stack.extend(orelse)
                stack.append(cond)
            case ast.Assign(target=t, value=v) | ast.AugAssign(target=t, value=v):
                stack.extend((t, v))
            case ast.Return(value=v) | ast.ExprStmt(value=v) if v is not None:
                stack.append(v)
            case ast.Call(args=args, keywords=kws):
                stack.extend(args)
                stack.extend(k.value for k in kws)
            case ast.BinOp(left=a, right=b) | ast.Compare(left=a, right=b) | ast.BoolOp(left=a, right=b):
                stack.extend((a, b))
            case ast.UnaryOp(operand=a):
                stack.append(a)
            case ast.IfExp(cond=c, body=a, orelse=b):
                stack.extend((c, a, b))
            case ast.Subscript(indices=idx):
                stack.extend(idx)
