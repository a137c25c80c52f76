"""Local arrays: `name: dtype[d0, d1, ...]` declares a zeroed array of constant shape.

A local array is a tensor of the function body from its declaration to the end
of the block it stands in (a loop body declares a fresh, zeroed one on every
iteration). Its dims are integer literals or named constants, so the backend can
keep it on the stack, and LLVM can keep a small one in registers.
"""

from __future__ import annotations

from dsl.grammar import ast
from dsl.grammar.diagnostics import did_you_mean

from .. import ir
from ..types import BY_NAME
from .exprs import strip_qualifier

MAX_BYTES = 64 << 10  # on the stack of each thread that runs the declaration


def check_local_array(ck, node: ast.LocalDecl) -> list[ir.Stmt]:
    """The `LocalArray` statement for `node`, its tensor bound in the current frame."""
    ann = node.annotation
    type_name = strip_qualifier(ann.name)
    dtype = BY_NAME.get(type_name)
    taken = _name_taken(ck, node.name)
    if taken:
        ck.bag.error(node.span, f"cannot declare local array '{node.name}': the name is {taken}")
        return []
    if dtype is None:
        ck.bag.error(ann.span, f"unknown element type '{type_name}' for a local array",
                     *did_you_mean(type_name, BY_NAME))
        return []
    if dtype.is_bool:
        ck.bag.error(ann.span, "local arrays of bool are not supported; use u8")
        return []
    if ann.dims is None:
        ck.bag.error(ann.span, f"'{node.name}: {type_name}' declares a scalar; locals need no declaration "
                     f"(assign it: {node.name} = {type_name}(0)), and a local array needs a shape, "
                     f"e.g. {node.name}: {type_name}[8]")
        return []
    dims = [_dim(ck, d) for d in ann.dims]
    if any(d is None for d in dims):
        return []
    count = 1
    for d in dims:
        count *= d
    if count * dtype.itemsize > MAX_BYTES:
        ck.bag.error(ann.span, f"local array '{node.name}' takes {count * dtype.itemsize} bytes, more than "
                     f"the {MAX_BYTES} a local array may take",
                     "pass a larger buffer as a tensor parameter")
        return []
    buffer = ir.TensorParam(node.name, dtype, tuple(dims), True, node.span, scratch=True, local=True)
    ck.frame.tensors[node.name] = buffer
    return [ir.LocalArray(buffer, node.span)]


def _name_taken(ck, ident: str) -> str | None:
    if ck.frame.lookup_tensor(ident) is not None:
        return "already a tensor"
    if ck.frame.lookup_value(ident) is not None or ck.locals.is_local(ident):
        return "already a scalar"
    if ident in BY_NAME:
        return "a type"
    return None


def _dim(ck, dim) -> int | None:
    """An axis length: a positive integer literal or a named integer constant."""
    if isinstance(dim, ast.IntLit):
        value = dim.value
    else:
        ident = strip_qualifier(dim.id)
        te = ck.locals.constants.get(ident)
        expr = te.expr if te is not None else None
        if not (isinstance(expr, ir.Const) and isinstance(expr.value, int) and not isinstance(expr.value, bool)):
            ck.bag.error(dim.span, f"the shape of a local array must be constant, and '{ident}' is not",
                         "use an integer literal or a local assigned one integer literal; "
                         "for a size known only at run time, pass a scratch tensor")
            return None
        value = expr.value
    if value <= 0:
        ck.bag.error(dim.span, f"a local array's dims must be positive, not {value}")
        return None
    return int(value)
