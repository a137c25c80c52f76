"""Fit the polynomial of `exp_poly3_f32` (stdlib/mathfn.tk: softmax's, sigmoid's and SiLU's exp) and print its coefficients.

e**r = 1 + r + r^2 q(r) on |r| <= ln2/2 (a hair more: the reduction's
roundings), q of degree 3; an error of q is an absolute error r^2 dq of e**r,
so the fit weights it by r^2 / e**r (the relative error of the result):
least squares on Chebyshev nodes, then Lawson's reweighting toward equal ripple.

    python tools/fit_exp.py     # prints the coefficients, highest first
"""

from __future__ import annotations

import math

import numpy as np

R_MAX = math.log(2) / 2 * 1.0005
DEGREE = 3


def fit(degree: int = DEGREE, r_max: float = R_MAX, nodes: int = 4000) -> tuple[np.ndarray, float]:
    """Coefficients of r**0 .. r**degree of q (lowest first) and the largest
    relative error of 1 + r + r^2 q(r) on the nodes, in float64."""
    r = r_max * np.cos(math.pi * (np.arange(nodes) + 0.5) / nodes)
    target = (np.expm1(r) - r) / r**2
    scale = r**2 / np.exp(r)  # turns an error of q into a relative error of e**r
    basis = np.stack([r**j for j in range(degree + 1)], 1)
    weights = scale**2
    for _ in range(40):
        root = np.sqrt(weights)
        coef, *_ = np.linalg.lstsq(basis * root[:, None], target * root, rcond=None)
        error = np.abs((basis @ coef - target) * scale)
        weights = weights * error / np.sum(weights * error)
    return coef, float(np.max(np.abs((basis @ coef - target) * scale)))


def main() -> None:
    coef, error = fit()
    print(f"# max relative error of e**r in float64: {error:.2e}")
    print(", ".join(repr(float(np.float32(v))) for v in coef[::-1]))


if __name__ == "__main__":
    main()
