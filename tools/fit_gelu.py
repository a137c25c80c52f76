"""Fit the polynomial of `gelu_f32` (stdlib/mathfn.tk) and print its coefficients.

Phi(-a) = t e**(P(s) - a^2/2) / 2 with t = 1/(1 + 0.3 a), s = 1 - t, so
P(s) = log(erfc(a/sqrt 2) / t) + a^2/2, fitted on [0, 13.2] (where x Phi(x) is
below the smallest normal float32 past that) with P(0) = 0. An error of P is a
relative error of the result, so the fit is minimax in absolute terms: least
squares on Chebyshev nodes in s, then Lawson's reweighting toward equal ripple.

    python tools/fit_gelu.py     # prints the degree-9 coefficients, highest first
"""

from __future__ import annotations

import math

import numpy as np

C = 0.3  # t = 1 / (1 + C a)
A_MAX = 13.2
DEGREE = 9


def fit(c: float = C, a_max: float = A_MAX, degree: int = DEGREE, nodes: int = 4000) -> tuple[np.ndarray, float]:
    """Coefficients of s**1 .. s**degree (lowest first) and the largest error of P on the nodes."""
    t_min = 1 / (1 + c * a_max)
    k = np.arange(nodes)
    t = (t_min + 1) / 2 + (1 - t_min) / 2 * np.cos(math.pi * (k + 0.5) / nodes)
    a = (1 / t - 1) / c
    target = np.array([math.log(math.erfc(v / math.sqrt(2))) + v * v / 2 for v in a]) - np.log(t)
    basis = np.stack([(1 - t) ** j for j in range(1, degree + 1)], 1)
    weights = np.ones_like(target)
    for _ in range(30):
        root = np.sqrt(weights)
        coef, *_ = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)
        error = np.abs(basis @ coef - target)
        weights = weights * error / np.sum(weights * error)
    return coef, float(np.max(np.abs(basis @ coef - target)))


def main() -> None:
    coef, error = fit()
    print(f"# max |error| of P in float64: {error:.2e}")
    print(", ".join(repr(float(np.float32(v))) for v in coef[::-1]))


if __name__ == "__main__":
    main()
