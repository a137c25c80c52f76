"""numpy references for the examples: inputs to make and the expected outputs.

`run_examples.py` compiles every `examples/*.tk`, and for each kernel listed here
calls it on these inputs and compares with the reference.
"""

import numpy as np

rng = np.random.default_rng(0)


def _f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def saxpy():
    x, y = _f32(100_000), _f32(100_000)
    return (np.float32(2.5), x, y, np.empty_like(x)), lambda a, x, y, out: (out, a * x + y)


def _matmul(m=200, k=150, n=170):
    a, b = _f32(m, k), _f32(k, n)
    return (a, b, np.empty((m, n), np.float32)), lambda a, b, c: (c, a @ b)


def row_sums():
    x = _f32(300, 777)
    return (x, np.empty(300, np.float32)), lambda x, out: (out, x.sum(axis=1))


def row_sums_f64():
    x = _f32(300, 777)
    return (x, np.empty(300, np.float64)), lambda x, out: (out, x.astype(np.float64).sum(axis=1))


def jacobi_step():
    a = _f32(257, 129)

    def ref(a, b):
        want = a.copy()
        want[1:-1, 1:-1] = 0.2 * (a[1:-1, 1:-1] + a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
        return b, want

    return (a, np.empty_like(a)), ref


def _bmm(n=8, i=64, k=48, j=80):
    a, b = _f32(n, i, k), _f32(1, k, j)
    b = np.broadcast_to(b, (n, k, j))  # one B for the whole batch: a stride-0 view
    return (a, b, np.empty((n, i, j), np.float32)), lambda a, b, out: (out, a @ b)


def conv2d_nhwc(b=2, h=34, w=30, c=16, r=3, s=3, f=32):
    x, filters = _f32(b, h, w, c), _f32(r, s, c, f)

    def ref(x, filters, out):
        windows = np.lib.stride_tricks.sliding_window_view(x, (r, s), axis=(1, 2))  # b p q c r s
        return out, np.einsum("bpqcrs,rscf->bpqf", windows, filters, optimize=True)

    return (x, filters, np.empty((b, h - r + 1, w - s + 1, f), np.float32)), ref


def softmax_rows():
    x = _f32(300, 777) * 4

    def ref(x, out):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return out, e / e.sum(axis=1, keepdims=True)

    return (x, np.empty_like(x)), ref


def layer_norm_rows():
    x, gamma, beta = _f32(300, 777) + 3, _f32(777), _f32(777)

    def ref(x, gamma, beta, eps, out):
        mean, var = x.mean(axis=1, keepdims=True), x.var(axis=1, keepdims=True)
        return out, (x - mean) / np.sqrt(var + eps) * gamma + beta

    return (x, gamma, beta, np.float32(1e-5), np.empty_like(x)), ref


def q4k_matvec_silu(n=512, k=2048):
    import dsl

    blocks = dsl.ops.quantize(_f32(n, k), "q4_k")  # uint8 [n, k / 256 * 144], as the kernel takes it
    x = _f32(k)

    def ref(w, x, y):
        z = dsl.ops.dequantize(w, "q4_k", (n, k)).astype(np.float64) @ x.astype(np.float64)
        return y, z / (1 + np.exp(-z))

    return (blocks, x, np.empty(n, np.float32)), ref


CASES = {
    "saxpy": saxpy,
    "matmul_loops": _matmul,
    "matmul_index": _matmul,
    "row_sums": row_sums,
    "row_sums_f64": row_sums_f64,
    "jacobi_step": jacobi_step,
    "matmul_naive": _matmul,
    "matmul_scheduled": _matmul,
    "bmm_seed": _bmm,
    "bmm_seed_scheduled": _bmm,
    "conv2d_nhwc": conv2d_nhwc,
    "softmax_rows": softmax_rows,
    "layer_norm_rows": layer_norm_rows,
    "q4k_matvec_silu": q4k_matvec_silu,
}
