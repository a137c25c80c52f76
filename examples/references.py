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


CASES = {
    "saxpy": saxpy,
    "matmul_loops": _matmul,
    "matmul_index": _matmul,
    "row_sums": row_sums,
    "row_sums_f64": row_sums_f64,
    "jacobi_step": jacobi_step,
}
