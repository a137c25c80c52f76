"""Checking a function body while inferring the types of its locals.

A local first given a literal takes the type of the first real value assigned
to it, and has that type from the start:

    acc = 0.0              # acc: f64, because of the next line
    for i in range(N):
        acc += x[i]        # x: f64[N]

A single pass cannot know that at `acc = 0.0`, and reads of `acc` before the
`+=` would be typed wrongly (an f32 `acc * 0.5` silently rounding an f64 sum).
So the body is checked again with the types the previous pass found, until a
pass finds the types it was given: that pass's IR and diagnostics are kept.
A helper's locals have the same types at every call (its parameters are typed),
so the answer is cached per function.
"""

from __future__ import annotations

from dsl.grammar import ast

from .. import ir
from .context import Frame, FunctionContext, Locals

MAX_PASSES = 6


def check_body(ctx: FunctionContext, frame: Frame, fn: ast.FunctionDef,
               ret_sym: ir.Sym | None) -> tuple[ir.Stmt, ...]:
    """The kernel IR of `fn`'s body, with its parameters bound in `frame`."""
    from .stmts import StmtChecker

    counts = assignment_counts(fn)
    guesses = ctx.local_types.get(id(fn), {})
    for _ in range(MAX_PASSES):
        trial = ctx.scratch()
        locals_ = Locals(known_types=dict(guesses), assign_counts=counts)
        body = StmtChecker(trial, frame, locals_, fn.name, ret_sym=ret_sym).function_body(fn)
        if locals_.found == guesses:
            ctx.local_types[id(fn)] = guesses
            ctx.adopt(trial)
            return body
        guesses = locals_.found
    locals_ = Locals(known_types=guesses, assign_counts=counts, settled=True)
    return StmtChecker(ctx, frame, locals_, fn.name, ret_sym=ret_sym).function_body(fn)


def assignment_counts(fn: ast.FunctionDef) -> dict[str, int]:
    """How many statements of `fn` assign each plain name (`x = ...`, `x += ...`)."""
    counts: dict[str, int] = {}
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        match node:
            case ast.Assign(target=ast.Name(id=name)) | ast.AugAssign(target=ast.Name(id=name)):
                counts[name] = counts.get(name, 0) + 1
            case ast.For(body=body):
                stack.extend(body)
            case ast.If(body=body, orelse=orelse):
                stack.extend(body)
                stack.extend(orelse)
    return counts
