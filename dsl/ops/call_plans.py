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

A wrapper that also makes arrays of its own (a weight matrix reordered, a
padded copy, the result) runs under a `Trace`, which does the work as it
notes it: each array made (by what function, from which views) becomes an
operand of the steps after it. `Trace.plan()` then replays all of it, the
arrays made anew (`conv2d` on the ResNet layer (8, 56, 56, 64), 1 thread of
Zen 4: 120 us of Python per call -> 42; a (1, 14, 14, 16) 3x3 layer: 31 ->
23 us in all, torch 28-30).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .arrays import address

Spec = tuple[int, int, tuple, tuple, np.dtype]  # operand, byte offset, shape, strides, dtype
Plan = list[tuple[str, tuple[Spec, ...]]]


def _span(a) -> tuple[int, int]:
    """The bytes of a C-contiguous array, or an empty span for anything else."""
    if isinstance(a, np.ndarray) and a.flags.c_contiguous and a.size:
        start = address(a)
        return start, start + a.nbytes
    return 0, 0


def _find(spans: list, view: np.ndarray) -> Spec | None:
    """Where `view` starts among the operands' spans, or None."""
    at = address(view)
    for k, (start, stop) in enumerate(spans):
        if start <= at < stop:
            return k, at - start, view.shape, view.strides, view.dtype
    return None


class _Recorder:
    """Stands in for a kernel library: each call is noted, none is made."""

    def __init__(self, operands: tuple[np.ndarray, ...]):
        self.spans = [_span(a) for a in operands]
        self.calls: Plan = []

    def __getattr__(self, name: str) -> Callable:
        def call(*args: np.ndarray) -> None:
            self.calls.append((name, tuple(self._spec(a) for a in args)))
        return call

    def _spec(self, view: np.ndarray) -> Spec:
        found = _find(self.spans, view)
        if found is None:
            raise ValueError("internal: a recorded kernel argument views none of the operands")
        return found


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


Step = tuple[Any, tuple, bool]  # kernel name or function, argument specs, makes an array


class Trace:
    """Runs a wrapper's steps on `operands` (arrays or None) and notes them.

    `make(fn, *args)` returns `fn(*args)`, a new array that later steps may
    view (`fn` must depend on its arguments alone: a replay calls it on new
    ones); `call(fn, *args)` runs `fn(*args)` for its effect, `fn` a kernel's
    name in the library `kernels()` returns, or a function. An argument is a
    view of an operand or of an array made before, or a value of no array
    type (kept as it is). When one is neither, or an array made is not
    C-contiguous, `plan()` is None: the steps are done all the same, as they
    are with `record` false."""

    def __init__(self, kernels: Callable[[], Any], operands: tuple, record: bool = True):
        self.kernels = kernels  # the library, loaded at the first kernel call (after the wrapper's checks)
        self.spans = [_span(a) for a in operands]
        self.made: list[np.ndarray] = []
        self.steps: list[Step] = []
        # An operand that is not C-contiguous cannot be replaced by its layout: nothing to note.
        self.complete = record and all(a is None or (isinstance(a, np.ndarray) and a.flags.c_contiguous)
                                       for a in operands)

    def make(self, fn: Callable, *args) -> np.ndarray:
        out = fn(*args)
        self._note(fn, args, True)
        self.made.append(out)
        self.spans.append(_span(out))
        self.complete = self.complete and self.spans[-1] != (0, 0)
        return out

    def call(self, fn, *args) -> None:
        (getattr(self.kernels(), fn) if isinstance(fn, str) else fn)(*args)
        self._note(fn, args, False)

    def _note(self, fn, args: tuple, makes: bool) -> None:
        if self.complete:
            specs = tuple(self._spec(a) for a in args)
            self.complete = None not in specs
            self.steps.append((fn, specs, makes))

    def _spec(self, a):
        if isinstance(a, np.ndarray):
            return _find(self.spans, a) if a.size else ("empty", a.shape, a.dtype)
        return ("value", a)

    def plan(self, result: np.ndarray) -> TracedPlan | None:
        """The steps as a plan returning the made array `result`, or None."""
        at = next((k for k, a in enumerate(self.made) if a is result), None)
        if not self.complete or at is None:
            return None
        return TracedPlan(tuple(self.steps), len(self.spans) - len(self.made) + at)


class TracedPlan:
    """A `Trace`'s steps, to run on new operands of the same layout."""

    def __init__(self, steps: tuple[Step, ...], result: int):
        self.steps, self.result = steps, result

    def run(self, lib, operands: tuple) -> np.ndarray:
        arrays = list(operands)
        for fn, specs, makes in self.steps:
            args = [_view(arrays, spec) for spec in specs]
            if makes:
                arrays.append(fn(*args))
            else:
                (getattr(lib, fn) if isinstance(fn, str) else fn)(*args)
        return arrays[self.result]


def _view(arrays: list, spec):
    if spec[0] == "value":
        return spec[1]
    if spec[0] == "empty":
        return np.empty(spec[1], spec[2])
    k, offset, shape, strides, dtype = spec
    return np.ndarray(shape, dtype, arrays[k], offset, strides)
