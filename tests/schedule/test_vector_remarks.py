"""--remarks says which innermost loops LLVM vectorized, and why not."""

import pytest

from dsl.grammar.diagnostics import Source
from dsl.options import CompileOptions
from dsl.pipeline import compile_source

SAXPY = """
def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
    for i in range(N):
        out[i] = alpha * x[i] + y[i]
"""

ROW_SUMS = """
{options}
def row_sums(X: f32[R, C], out: f32[R]):
    out[r] = sum(X[r, c])
"""


def remarks(text, capsys, **target):
    compile_source(Source("t.tk", text), CompileOptions(remarks=True, **target), stop_after="llvm")
    return capsys.readouterr().err


@pytest.mark.parametrize("target, lanes", [({"cpu": "znver3"}, 8), ({"cpu": "x86-64"}, 4),
                                           ({"triple": "aarch64-unknown-linux-gnu"}, 4)])
def test_vectorized_loop_with_its_width(capsys, target, lanes):
    text = remarks(SAXPY, capsys, **target)
    assert f"t.tk:3:5: remark: loop 'i': vectorized by LLVM, {lanes} x float per vector" in text


def test_ordered_float_sum_is_explained(capsys):
    text = remarks(ROW_SUMS.format(options=""), capsys, cpu="znver3")
    assert "loop 'c': not vectorized by LLVM: it sums floats in order; @options(reassociate=True)" in text
    allowed = remarks(ROW_SUMS.format(options="@options(reassociate=True)"), capsys, cpu="znver3")
    assert "loop 'c': vectorized by LLVM, 8 x float" in allowed


def test_no_remarks_unless_asked(capsys):
    compile_source(Source("t.tk", SAXPY), CompileOptions(cpu="znver3"), stop_after="llvm")
    assert "vectorized" not in capsys.readouterr().err


def test_micro_kernel_loop_is_not_called_llvm_vectorized(capsys):
    """The micro-kernel's k loop computes on vectors the schedule made; its
    shuffle masks (vectors of i32) once made it look LLVM-vectorized."""
    text = remarks("def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):\n    C[m, n] = sum(A[m, k] * B[k, n])\n",
                   capsys, cpu="znver3")
    assert "6x16 f32 micro-kernel" in text
    assert "k.micro" not in text and "x i32" not in text


@pytest.mark.parametrize("tail, rest", [("peel", ", the rest in the scalar loop 'i.tail'"),
                                        ("mask", ", the last partial vector masked")])
def test_scheduled_vectorize_says_its_width_and_type(capsys, tail, rest):
    text = remarks(f"@schedule(vectorize(i, 8, tail={tail}))" + SAXPY, capsys, cpu="znver3")
    assert f"t.tk:3:5: remark: loop 'i': vectorized by the schedule, 8 x f32 per vector{rest}\n" in text


def test_every_copy_unroll_made_is_reported(capsys):
    text = remarks("""
@schedule(split(r, 2), unroll(r.inner), vectorize(c, 4))
def scale_rows(X: f32[R, C], out: f32[R, C]):
    for r in range(R):
        for c in range(C):
            out[r, c] = 2.0 * X[r, c]
""", capsys, cpu="znver3")
    for copy in ("c.u0", "c.u1"):
        assert f"t.tk:5:9: remark: loop '{copy}': vectorized by the schedule, 4 x f32 per vector" in text


def test_each_loop_is_reported_once(capsys):
    """A contraction packs B in two places (both tagged `pack.B.n`)."""
    text = remarks("def mm(A: f32[M, K], B: f32[K, N], C: f32[M, N]):\n    C[m, n] = sum(A[m, k] * B[k, n])\n",
                   capsys, cpu="znver3")
    assert text.count("loop 'pack.B.n'") == 1 and text.count("loop 'pack.A.k'") == 1
