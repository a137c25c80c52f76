"""Index notation and reductions in the type checker: which free index ranges
over what, which reduction owns it, and the numbers the lowered loops compute
(reference interpreter against numpy)."""

from __future__ import annotations

import numpy as np


from tk_program import errors, run, typed

RNG = np.random.default_rng(7)






def matrix(*shape) -> np.ndarray:
    return RNG.integers(-4, 5, size=shape).astype(np.float32)


def test_broadcasting_over_the_output_indices():
    text = """
def k(x: f32[M, N], b: f32[N], out: f32[M, N]):
    out[i, j] = x[i, j] + b[j]
"""
    assert "out[i, j] = x[i, j] + b[j] for i < M, j < N" in typed(text)
    x, b, out = matrix(3, 4), matrix(4), np.zeros((3, 4), np.float32)
    run(text, x=x, b=b, out=out)
    np.testing.assert_array_equal(out, x + b)


def test_augmented_assignment_in_index_notation():
    text = """
def k(x: f32[M, N], out: f32[M, N]):
    out[i, j] += 2 * x[i, j]
"""
    assert "out[i, j] = out[i, j] + 2.0 * x[i, j] for i < M, j < N" in typed(text)
    x, out = matrix(2, 3), matrix(2, 3)
    expected = out + 2 * x
    run(text, x=x, out=out)
    np.testing.assert_array_equal(out, expected)


def test_nested_reduction_owns_the_index_used_only_inside_it():
    text = """
def k(A: f32[M, K], B: f32[K, N], y: f32[M]):
    y[i] = sum(A[i, k] * sum(B[k, j]))
"""
    assert "y[i] = sum[k < K](A[i, k] * sum[j < N](B[k, j])) for i < M" in typed(text)
    a, b, y = matrix(3, 4), matrix(4, 5), np.zeros(3, np.float32)
    run(text, A=a, B=b, y=y)
    np.testing.assert_array_equal(y, a @ b.sum(axis=1))


def test_nesting_order_does_not_change_ownership():
    first = typed("def k(A: f32[M, K], B: f32[K, N], y: f32[M]):\n    y[i] = sum(A[i, k] * sum(B[k, j]))\n")
    second = typed("def k(A: f32[M, K], B: f32[K, N], y: f32[M]):\n    y[i] = sum(sum(B[k, j]) * A[i, k])\n")
    assert "sum[k < K](sum[j < N](B[k, j]) * A[i, k])" in second
    assert first.count("sum[") == second.count("sum[") == 2


def test_sibling_reductions_reduce_the_same_name_independently():
    text = """
def k(A: f32[M, K], y: f32[M]):
    y[i] = sum(A[i, k]) - max(A[i, k]) + min(A[i, k])
"""
    assert "sum[k < K](A[i, k]) - max[k.1 < K](A[i, k.1]) + min[k.2 < K](A[i, k.2])" in typed(text)
    a, y = matrix(4, 3), np.zeros(4, np.float32)
    run(text, A=a, y=y)
    np.testing.assert_array_equal(y, a.sum(axis=1) - a.max(axis=1) + a.min(axis=1))


def test_inner_reduction_with_nothing_to_reduce_is_an_error():
    message = errors("""
def k(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[i, j] = sum(A[i, k] * sum(B[k, j]))
""")
    assert "t.tk:3:29: error: sum(...) has no index to reduce over" in message


def test_matmul_in_index_notation():
    text = """
def k(A: f32[M, K], B: f32[K, N], C: f32[M, N]):
    C[m, n] = sum(A[m, k] * B[k, n])
"""
    a, b, c = matrix(3, 5), matrix(5, 2), np.zeros((3, 2), np.float32)
    run(text, A=a, B=b, C=c)
    np.testing.assert_array_equal(c, a @ b)


def test_reductions_assigned_to_locals():
    text = """
def k(x: f32[N], y: f32[3]):
    total = sum(x[i])
    biggest = max(x[i])
    y[0] = total
    y[1] = biggest
    y[2] = min(x[j]) + total
"""
    assert "total: f32 = sum[i < N](x[i])" in typed(text)
    x, y = matrix(7), np.zeros(3, np.float32)
    run(text, x=x, y=y)
    np.testing.assert_array_equal(y, [x.sum(), x.max(), x.min() + x.sum()])


def test_reductions_in_conditions_returns_and_loop_bounds():
    text = """
def dot(a: f32[K], b: f32[K]) -> f32:
    return sum(a[k] * b[k])

def k(x: f32[N], counts: i64[R], y: f32[N]):
    if sum(x[k]) > 0.0:
        y[0] = dot(x, x)
    for i in range(max(counts[r])):
        y[i] = y[i] + 1.0
"""
    x, counts, y = matrix(4), np.array([2, 3], np.int64), np.zeros(4, np.float32)
    x[0] = 10.0
    run(text, x=x, counts=counts, y=y)
    np.testing.assert_array_equal(y, [np.dot(x, x) + 1, 1, 1, 0])


def test_max_reduction_of_integers_starts_at_the_smallest_value():
    text = """
def k(x: i8[N], y: i8[1]):
    y[0] = max(x[i])
"""
    x, y = np.array([-128, -100, -128], np.int8), np.zeros(1, np.int8)
    run(text, x=x, y=y)
    assert y[0] == -100


def test_free_index_errors():
    message = errors("""
def k(A: f32[M, K], B: f32[L, N], x: f32[N], y: f32[M], C: f32[M, N]):
    y[m] = A[m, k]
    C[m, n] = sum(A[m, k] * B[k, n])
    y[0] = sum(x[p + 1])
""")
    assert "t.tk:3:17: error: index 'k' is not defined" in message
    assert "index 'k' ranges over K ('A' axis 1) and over L ('B' axis 0)" in message
    assert "note: give both axes the same dim name" in message
    assert "cannot infer the range of index 'p'" in message


def test_grid_loops():
    text = """
def k(x: f32[M, N], y: f32[M]):
    for a, b in grid(M, N):
        y[a] += x[a, b]
"""
    assert "for a in range(0, M):\n    for b in range(0, N):" in typed(text)
    x, y = matrix(3, 4), np.zeros(3, np.float32)
    run(text, x=x, y=y)
    np.testing.assert_array_equal(y, x.sum(axis=1))
    message = errors("def k(x: f32[M, N]):\n    for a, b in grid(M):\n        x[a, b] = 0.0\n")
    assert "grid() has 1 extent for 2 loop variables" in message


def test_helper_call_inside_index_notation_and_reduction():
    text = """
def sq(v: f32) -> f32:
    return v * v

def k(x: f32[M, K], r: f32[M], s: f32[M, K]):
    s[i, j] = sq(x[i, j]) + 1.0
    r[i] = sum(sq(x[i, k]))
"""
    lowered = typed(text)
    assert "for i in range(0, M):" in lowered and "sum = sum + sq.result" in lowered
    x = matrix(3, 4)
    r, s = np.zeros(3, np.float32), np.zeros((3, 4), np.float32)
    run(text, x=x, r=r, s=s)
    np.testing.assert_array_equal(s, x * x + 1)
    np.testing.assert_array_equal(r, (x * x).sum(axis=1))


def test_helper_call_in_nested_reduction():
    text = """
def half(v: f32) -> f32:
    return v * 0.5

def k(A: f32[M, K], B: f32[K, N], y: f32[M]):
    y[i] = sum(A[i, k] * sum(half(B[k, j])))
"""
    a, b, y = matrix(2, 3), matrix(3, 4), np.zeros(2, np.float32)
    run(text, A=a, B=b, y=y)
    np.testing.assert_array_equal(y, a @ (0.5 * b).sum(axis=1))
