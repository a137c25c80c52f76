"""`...` in contraction specs, as numpy.einsum reads it.

Each operand's `...` stands for the axes its letters do not name; those
axes broadcast together (aligned from the right, a 1 repeats). The spec is
rewritten with a letter it does not use for each broadcast axis, and each
operand becomes a view of the broadcast shape (stride 0 where it repeats),
so the rest of `contract` sees an ordinary spec. Nothing is copied.
"""

from __future__ import annotations

import string

import numpy as np
from numpy.lib.stride_tricks import as_strided

ELLIPSIS = "..."


def expand_ellipsis(spec, arrays: list[np.ndarray]) -> tuple[str, list[np.ndarray]]:
    """(spec without `...`, the operands as views of the broadcast shape).

    >>> expand_ellipsis("...mk,kn->...mn", [np.ones((2, 3, 4)), np.ones((4, 5))])[0]
    'Amk,kn->Amn'
    """
    if not isinstance(spec, str) or "." not in spec:
        return spec, arrays
    text = spec.replace(" ", "")
    lhs, arrow, rhs = text.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(arrays):
        raise ValueError(f"contract: the spec has {len(terms)} operand terms, {len(arrays)} operands were given")
    for term in [*terms, rhs]:
        if term.replace(ELLIPSIS, "", 1).count("."):
            raise ValueError(f"contract: invalid ellipsis in subscripts '{term}': use '...' at most once per term")
    spans = [_ellipsis_axes(i, term, a) for i, (term, a) in enumerate(zip(terms, arrays))]
    try:
        shape = np.broadcast_shapes(*(a.shape[lo:hi] for a, (lo, hi) in zip(arrays, spans)))
    except ValueError:
        found = ", ".join(str(a.shape) for a in arrays)
        raise ValueError(f"contract: operands could not be broadcast together along '...' (shapes {found})") from None
    spare = [x for x in string.ascii_uppercase + string.ascii_lowercase if x not in text]
    if len(shape) > len(spare):
        raise ValueError(f"contract: '...' stands for {len(shape)} axes, more than the letters the spec leaves free")
    letters = "".join(spare[:len(shape)])
    if arrow and shape and ELLIPSIS not in rhs:
        raise ValueError("contract: output has more dimensions than subscripts given in einstein sum, but no "
                         "'...' ellipsis provided to broadcast the extra dimensions.")
    if not arrow:  # numpy's implicit output: the broadcast axes, then the letters used once
        named = lhs.replace(ELLIPSIS, "").replace(",", "")
        rhs = ELLIPSIS + "".join(sorted(x for x in set(named) if named.count(x) == 1))
    views = [_broadcast(a, span, shape) if ELLIPSIS in term else a for a, term, span in zip(arrays, terms, spans)]
    new_terms = [term.replace(ELLIPSIS, letters) for term in terms]
    return ",".join(new_terms) + "->" + rhs.replace(ELLIPSIS, letters), views


def _ellipsis_axes(index: int, term: str, a: np.ndarray) -> tuple[int, int]:
    """[lo, hi): the axes of `a` that the term's `...` stands for (empty without one)."""
    named = len(term.replace(ELLIPSIS, ""))
    if ELLIPSIS not in term:
        return 0, 0
    if a.ndim < named:
        raise ValueError(f"contract: operand {index} has {a.ndim} dimensions, its subscripts '{term}' name {named}")
    lo = term.index(ELLIPSIS)
    return lo, lo + a.ndim - named


def _broadcast(a: np.ndarray, span: tuple[int, int], shape: tuple[int, ...]) -> np.ndarray:
    """`a` with its axes span[0]..span[1] (its `...`) broadcast to `shape`."""
    lo, hi = span
    own = a.shape[lo:hi]
    missing = len(shape) - len(own)
    strides = [0] * missing + [s if n == size else 0 for n, s, size in zip(own, a.strides[lo:hi], shape[missing:])]
    return as_strided(a, a.shape[:lo] + tuple(shape) + a.shape[hi:], a.strides[:lo] + tuple(strides) + a.strides[hi:],
                      writeable=False)
