"""`--remarks` after code generation: which innermost loops LLVM vectorized.

    examples/saxpy.tk:5:5: remark: loop 'i': vectorized by LLVM, 8 x float per vector

The loop-IR passes report their own decisions (contraction, threads) while
they run; this one reads the optimized module (`backends.vector_remarks`) and
says, for each innermost loop of the source, what LLVM made of it — with the
likely reason when it stayed scalar.
"""

from __future__ import annotations

from dsl.grammar.diagnostics import Diagnostic
from dsl.lowering import ir
from dsl.lowering.rewrite import walk_expr, walk_stmts, stmt_exprs


def vectorization_remarks(program: ir.Program, llvm_text: str) -> list[Diagnostic]:
    from dsl.backends.vector_remarks import vectorized_loops

    found = vectorized_loops(llvm_text)
    out = []
    seen = set()
    for kernel in program.kernels:
        for loop in _innermost_loops(kernel.body):
            if loop.span is None or loop.kind == "vector" or _has_vector_code(loop):
                continue  # vector code from the schedule (a micro-kernel's k loop), not LLVM's
            key = (loop.name, loop.span.line, loop.span.col)
            if key not in found or key in seen:
                # unrolled away or folded into another loop; or another loop of the same tag
                # (a contraction packs in two places): LLVM's answer is per tag, said once
                continue
            seen.add(key)
            lanes, element = found[key]
            if lanes > 1:
                text = f"loop '{loop.name}': vectorized by LLVM, {lanes} x {element} per vector"
            else:
                text = f"loop '{loop.name}': not vectorized by LLVM{_likely_reason(kernel, loop)}"
            out.append(Diagnostic(loop.span, text, severity="remark"))
    return out


def _innermost_loops(body):
    for s in walk_stmts(body):
        if isinstance(s, ir.For) and not any(isinstance(t, ir.For) for t in walk_stmts(s.body)):
            yield s


def _has_vector_code(loop: ir.For) -> bool:
    return any(isinstance(n, (ir.Ramp, ir.Broadcast))
               for s in walk_stmts(loop.body) for e in stmt_exprs(s) for n in walk_expr(e))


def _likely_reason(kernel: ir.Kernel, loop: ir.For) -> str:
    updates = [s for s in walk_stmts(loop.body) if isinstance(s, ir.Assign) and _reads(s.value, s.sym)]
    if any(s.sym.type.is_float for s in updates) and not kernel.options.reassociate:
        return (": it sums floats in order; @options(reassociate=True) lets the sum be reordered "
                "(or schedule vectorize() yourself)")
    if any(isinstance(s, (ir.If, ir.Check)) for s in walk_stmts(loop.body)):
        return ": its body branches (a bounds check or an if); prove the accesses in bounds or use a select"
    if any(isinstance(n, ir.Load) and not _affine_last(n, loop.var)
           for s in walk_stmts(loop.body) for e in stmt_exprs(s) for n in walk_expr(e)):
        return ": an access along it is not contiguous (gathers cost more than they save here)"
    return ""


def _reads(e: ir.Expr, sym: ir.Sym) -> bool:
    return any(isinstance(n, ir.Var) and n.sym is sym for n in walk_expr(e))


def _affine_last(load: ir.Load, var: ir.Sym) -> bool:
    """Does `var` appear only in the last index, if anywhere?"""
    return not any(_reads(i, var) for i in load.indices[:-1])
