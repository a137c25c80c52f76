"""Kernel calls recorded once and replayed, for wrappers whose Python work
(choosing kernels, merging axes, slicing views) costs more than a small
call's kernel.

A wrapper that decides only from its contiguous operands' shapes, dtypes and
addresses modulo a cache line makes the same kernel calls on the same views
of them every time. `record` runs it once under a `Trace` that notes each
call without making it: the kernel's name and, per argument, which operand it
views, at what byte offset, with what shape, strides and dtype. Its plan's
`run` makes those calls again on new operands of the same layout, each view one
`np.ndarray(...)` on the operand's buffer (`permute` of 16 x 16 floats on
Zen 4: 7.7 us in all, where choosing and building its views took 15).

A wrapper that also makes arrays of its own (a weight matrix reordered, a
padded copy, the result) runs under a `Trace` that does the work as it
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


class _Noting:
    """Stands in for a kernel library under a `Trace` that only notes: each
    call `name(*views)` becomes a step, none is made."""

    def __init__(self, trace: Trace):
        self.trace = trace

    def __getattr__(self, name: str) -> Callable:
        return lambda *args: self.trace.call(name, *args)


def record(run: Callable[[object], None], operands: tuple[np.ndarray, ...]) -> TracedPlan:
    """The kernel calls `run(lib)` makes on views of `operands` (C-contiguous
    arrays), noted and not made: `lib` only stands in for a library."""
    trace = Trace(None, operands, perform=False)
    run(_Noting(trace))
    plan = trace.plan(None)
    if plan is None:
        raise ValueError("internal: a recorded kernel argument views none of the operands")
    return plan


MAX_REMEMBERED = 256  # layouts per cache: beyond, a cache starts again (a program uses a few)


def remember(cache: dict, key, value) -> None:
    """cache[key] = value, in a cache of at most MAX_REMEMBERED entries."""
    if len(cache) >= MAX_REMEMBERED:
        cache.clear()
    cache[key] = value


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
    are with `record` false. With `perform` false, kernel calls are noted and
    not made (`record`)."""

    def __init__(self, kernels: Callable[[], Any] | None, operands: tuple, record: bool = True,
                 perform: bool = True):
        self.kernels = kernels  # the library, loaded at the first kernel call (after the wrapper's checks)
        self.perform = perform
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
        if self.perform:
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

    def plan(self, result: np.ndarray | None) -> TracedPlan | None:
        """The steps as a plan returning the made array `result` (or nothing,
        for None), or None when they cannot be replayed."""
        at = next((k for k, a in enumerate(self.made) if a is result), None)
        if not self.complete or (result is not None and at is None):
            return None
        return TracedPlan(tuple(self.steps), None if at is None else len(self.spans) - len(self.made) + at)


class TracedPlan:
    """A `Trace`'s steps, to run on new operands of the same layout."""

    def __init__(self, steps: tuple[Step, ...], result: int | None):
        self.steps, self.result = steps, result
        # Steps whose arguments are all views take the quick way (permute of 32 x 32 floats: 4 us in all).
        self.plain = tuple(all(isinstance(spec[0], int) for spec in specs) for _, specs, _ in steps)

    def run(self, lib, operands: tuple) -> np.ndarray | None:
        arrays = list(operands)
        for (fn, specs, makes), plain in zip(self.steps, self.plain):
            if plain:
                args = [np.ndarray(shape, dtype, arrays[k], offset, strides)
                        for k, offset, shape, strides, dtype in specs]
            else:
                args = [_view(arrays, spec) for spec in specs]
            if makes:
                arrays.append(fn(*args))
            else:
                (getattr(lib, fn) if isinstance(fn, str) else fn)(*args)
        return None if self.result is None else arrays[self.result]


def _view(arrays: list, spec):
    if spec[0] == "value":
        return spec[1]
    if spec[0] == "empty":
        return np.empty(spec[1], spec[2])
    k, offset, shape, strides, dtype = spec
    return np.ndarray(shape, dtype, arrays[k], offset, strides)


NOTHING = TracedPlan((), None)  # the plan of a call with nothing to do (an empty result)
