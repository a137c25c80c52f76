"""Kernels the autotuning tests time: one quick, one that as good as hangs."""

# A kernel that runs n * n iterations a compiler cannot fold (no fast-math):
# with n = 10**6 about a quarter of an hour, a hang as far as a test knows.
SPIN = """\
def k(n: i64, x: f32[N]):
    for i in range(n):
        for j in range(n):
            x[0] = x[0] * 0.5 + 1.0
"""
QUICK = """\
def k(n: i64, x: f32[N]):
    x[0] = 1.0
"""
# What the worker needs to call `k` above: n, and a 16-float x.
K_ARGS = [{"kind": "scalar", "value": 10**6},
          {"kind": "tensor", "dtype": "<f4", "shape": [16], "strides": [1], "output": True}]
