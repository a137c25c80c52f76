"""Kernels over quantized tensor types, for tests/numerical/test_quant_types.py
(a module of its own: @dsl.kernel needs the source in a file)."""

import dsl
from dsl import K, N, f32, i32, q4_k, q5_k, q6_k, q8_0

G, S = dsl.dims("G S")


@dsl.kernel(interpret=True)
def deq_q6_k_interpreted(w: q6_k[N, K], y: f32[N, K]):
    for n in range(N):
        for k in range(K):
            y[n, k] = w[n, k]


@dsl.kernel
def groups_q6_k(w: q6_k[N, K], q: i32[N, S, G], scale: f32[N, S]):
    """The levels and scales of every group (q6_k: 16 values a group)."""
    for n in range(N):
        for s in range(K // 16):
            scale[n, s] = w.scale[n, s]
            for g in range(16):
                q[n, s, g] = i32(w.q[n, s, g])


@dsl.kernel
def groups_q5_k(w: q5_k[N, K], q: i32[N, S, G], scale: f32[N, S], least: f32[N, S]):
    for n in range(N):
        for s in range(K // 32):
            scale[n, s] = w.scale[n, s]
            least[n, s] = w.min[n, s]
            for g in range(32):
                q[n, s, g] = i32(w.q[n, s, g])


@dsl.kernel
def raw_q4_k(w: q4_k[N, K], d: f32[N, S], qs: i32[N, S, G]):
    """The raw fields: block scales and level bytes."""
    for n in range(N):
        for b in range(K // 256):
            d[n, b] = w.d[n, b]
            for i in range(128):
                qs[n, b, i] = i32(w.qs[n, b, i])


@dsl.kernel(reassociate=True)
def matvec_q4_k(w: q4_k[N, K], x: f32[K], y: f32[N]):
    """A user's matvec over dequantized elements, in index notation."""
    y[n] = sum(w[n, k] * x[k])  # noqa: F821  (free indices)


@dsl.kernel(reassociate=True, schedule="vectorize(k, 8, tail=mask), parallel(n)")
def matvec_loops_q8_0(w: q8_0[N, K], x: f32[K], y: f32[N]):
    for n in range(N):
        acc = 0.0
        for k in range(K):
            acc += w[n, k] * x[k]
        y[n] = acc


@dsl.kernel
def first_value(w: q4_k[K], at: i32, y: f32[N]):
    y[0] = w[at]


@dsl.kernel
def row_dot(w: q8_0[N, K], n: i32, x: f32[K]) -> f32:
    """A helper taking a quantized tensor (inlined where it is called)."""
    acc = 0.0
    for k in range(K):
        acc += w[n, k] * x[k]
    return acc


@dsl.kernel
def via_helper(w: q8_0[N, K], x: f32[K], y: f32[N]):
    for n in range(N):
        y[n] = row_dot(w, i32(n), x)


@dsl.kernel(specialize=True)
def matvec_specialized_q6_k(w: q6_k[N, K], x: f32[K], y: f32[N]):
    """One build per (N, K): K // 16 groups become a constant trip count."""
    for n in range(N):
        acc = 0.0
        for s in range(K // 16):
            dot = 0.0
            for l in range(16):
                dot += w.q[n, s, l] * x[16 * s + l]
            acc += w.scale[n, s] * dot
        y[n] = acc
