"""Builds of a `@dsl.kernel` chosen by the shapes of a call.

`specialize=True` compiles one build per set of exact sizes it sees (the dims
become constants: `lowering.specialize`); `autotune=True` picks, once per
shape class, the fastest candidate of an open schedule (`dsl.autotune`) and
remembers it on disk. Each build is cached like any other compile.
"""

from __future__ import annotations

import threading

from . import options as options_mod
from .autotune import TuningRecords, arg_specs, search, shape_class, terminal_progress
from .metadata import kernel_spec
from .quant_args import blocks_of


class ShapedBuilds:
    def __init__(self, kernel, specialize, autotune: bool, budget: float):
        self.kernel = kernel
        self.specialize = specialize
        self.autotune = autotune
        self.budget = budget
        self._callers: dict = {}
        self._lock = threading.Lock()
        self._ir = None  # (spec, schedule) of the loop IR, made once
        self._interpreted: bool | None = None

    def caller(self, args: tuple, kwargs: dict):
        """The build for these arguments (compiled on first sight of their shapes)."""
        if self._interpreted is None:  # the environment is read once, at the first call
            self._interpreted = self.kernel.options.interpret
        if self._interpreted:
            return self.kernel.compile()  # the interpreter takes any shape as it is
        spec, _ = self._kernel_ir()
        values = _bind(spec, args, kwargs)
        sizes = _sizes(spec, values) if values is not None else None
        if sizes is None:
            return self.kernel.compile()  # the plain build reports what is wrong with the call
        unit = tuple(getattr(v, "strides", (0,))[-1:] == (getattr(v, "itemsize", 0),) or not getattr(v, "ndim", 0)
                     for p, v in zip(spec.params, values) if p.kind == "tensor")
        fixed = self._fixed_sizes(sizes)
        key = (fixed, shape_class(sizes, unit) if self.autotune else None)
        found = self._callers.get(key)
        if found is not None:
            return found
        with self._lock:
            if key not in self._callers:
                self._callers[key] = self._build(fixed, sizes, unit, values)
            return self._callers[key]

    def _fixed_sizes(self, sizes: dict[str, int]) -> tuple:
        if not self.specialize:
            return ()
        names = sizes if self.specialize is True else self.specialize
        return tuple(sorted((n, sizes[n]) for n in names if n in sizes))

    def _build(self, fixed: tuple, sizes: dict, unit: tuple, values: list):
        opts = self.kernel.options.with_(specialize=fixed)
        _, schedule = self._kernel_ir()
        if self.autotune:
            pick = self._tuned_pick(opts, schedule, sizes, unit, values)
            opts = opts.with_(schedule_picks=((self.kernel.name, pick),))
        return self.kernel._native(opts)

    def _tuned_pick(self, opts, schedule, sizes, unit, values) -> int:
        from dsl.lowering.schedule_space import candidates, describe

        options = candidates(schedule)
        if len(options) <= 1:
            return 0
        klass = shape_class(sizes, unit)
        records = TuningRecords(options_mod.default_cache_dir(opts))
        record_key = self.kernel._cache_key(opts)
        known = records.get(record_key, klass)
        if known is not None and known < len(options):
            return known
        name = self.kernel.name
        builds = [(i, lambda i=i: self.kernel.library_path(opts.with_(schedule_picks=((name, i),))))
                  for i in range(len(options))]
        spec, _ = self._kernel_ir()
        outcome = search(name, builds, arg_specs(spec.params, values), self.budget, terminal_progress(name))
        records.put(record_key, klass, outcome, describe(options[outcome.pick]))
        return outcome.pick

    def _kernel_ir(self):
        if self._ir is None:
            job = self.kernel.job("loops")
            k = next(k for k in job.program.kernels if k.name == self.kernel.name)
            self._ir = (kernel_spec(k), k.schedule)
        return self._ir


def _bind(spec, args: tuple, kwargs: dict) -> list | None:
    """The arguments in parameter order, or None when they do not fit."""
    names = [p.name for p in spec.params]
    if len(args) > len(names) or set(kwargs) - set(names[len(args):]):
        return None
    values = list(args) + [kwargs.get(n) for n in names[len(args):]]
    return None if any(v is None for v in values[len(args):]) else values


def _sizes(spec, values) -> dict[str, int] | None:
    sizes: dict[str, int] = {}
    for p, v in zip(spec.params, values):
        if p.kind != "tensor":
            continue
        shape = getattr(v, "shape", None)
        if p.quant:  # sizes in values, not in bytes
            try:
                shape = blocks_of(spec.name, p, v, spec.params, values)[1]
            except (TypeError, ValueError):
                return None
        if shape is None or len(shape) != len(p.dims):
            return None
        for dim, n in zip(p.dims, shape):
            if isinstance(dim, str):
                sizes.setdefault(dim, int(n))
    return sizes
