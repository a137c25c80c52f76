"""Kernel calls recorded once and replayed, for wrappers whose Python work
(choosing kernels, merging axes, slicing views) costs more than a small
call's kernel.

A wrapper that decides only from its contiguous operands' shapes, dtypes and
addresses modulo a cache line makes the same kernel calls on the same views
of them every time. `record` runs it once against a stand-in library that
notes each call: the kernel's name and, per argument, which operand it views,
at what byte offset, with what shape, strides and dtype. `replay` makes
those calls again on new operands of the same layout, each view one
`np.ndarray(...)` on the operand's buffer (`permute` of 16 x 16 floats on
Zen 4: 7.7 us in all, where choosing and building its views took 15).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from .arrays import address

Spec = tuple[int, int, tuple, tuple, np.dtype]  # operand, byte offset, shape, strides, dtype
Plan = list[tuple[str, tuple[Spec, ...]]]


class _Recorder:
    """Stands in for a kernel library: each call is noted, none is made."""

    def __init__(self, operands: tuple[np.ndarray, ...]):
        self.spans = [(address(a), address(a) + a.nbytes) for a in operands]
        self.calls: Plan = []

    def __getattr__(self, name: str) -> Callable:
        def call(*args: np.ndarray) -> None:
            self.calls.append((name, tuple(self._spec(a) for a in args)))
        return call

    def _spec(self, view: np.ndarray) -> Spec:
        at = address(view)
        for k, (start, stop) in enumerate(self.spans):
            if start <= at < stop:
                return k, at - start, view.shape, view.strides, view.dtype
        raise ValueError("internal: a recorded kernel argument views none of the operands")


def record(run: Callable[[object], None], operands: tuple[np.ndarray, ...]) -> Plan:
    """The calls `run(lib)` makes on views of `operands` (C-contiguous arrays)."""
    recorder = _Recorder(operands)
    run(recorder)
    return recorder.calls


MAX_REMEMBERED = 256  # layouts per cache: beyond, a cache starts again (a program uses a few)


def remember(cache: dict, key, value) -> None:
    """cache[key] = value, in a cache of at most MAX_REMEMBERED entries."""
    if len(cache) >= MAX_REMEMBERED:
        cache.clear()
    cache[key] = value


def replay(lib, plan: Plan, operands: tuple[np.ndarray, ...]) -> None:
    """Make the recorded calls on the same views of new `operands` (C-contiguous,
    of the recorded shapes and dtypes)."""
    for name, specs in plan:
        getattr(lib, name)(*[np.ndarray(shape, dtype, operands[k], offset, strides)
                             for k, offset, shape, strides, dtype in specs])
