"""Calling a kernel through the reference interpreter (`interpret=True`)."""

from __future__ import annotations

from dsl.lowering import ir
from dsl.lowering.interpret import CheckFailed, run_kernel

from .call import NUMPY_CHAR, Caller, as_array, pack_scalar
from .metadata import KernelSpec
from .quant_args import blocks_of


class InterpretedCaller(Caller):
    """Same argument checks and errors as a compiled kernel; runs the loop IR."""

    def __init__(self, kernel: ir.Kernel, spec: KernelSpec, trace=None):
        self.spec = spec
        self.name = spec.name
        self.kernel = kernel
        self.trace = trace
        self._params = spec.params
        self._chars = tuple(NUMPY_CHAR[p.dtype] for p in spec.params)

    def __call__(self, *args, **kwargs):
        if kwargs or len(args) != len(self._params):
            args = self._bind(args, kwargs)
        values = {}
        for value, p, char in zip(args, self._params, self._chars):
            if p.kind == "scalar":
                pack_scalar(self.name, p, value)  # the same type checks as compiled calls
                values[p.name] = value
                continue
            if p.quant:
                values[p.name] = blocks_of(self.name, p, value, self._params, args)[0]
                continue
            a = as_array(self.name, p, value)
            if a.dtype.char != char or not a.dtype.isnative or a.ndim != len(p.dims) or (p.output and not a.flags.writeable) \
                    or not a.flags.aligned:  # rejected like a compiled call, though numpy would cope
                self._reject(p, a)
            if not a.dtype.isnative:
                raise TypeError(f"{self.name}(): parameter '{p.name}' expects an array of {a.dtype.newbyteorder('=')} "
                                f"in native byte order, got {a.dtype.str}")
            values[p.name] = a
        try:
            run_kernel(self.kernel, values, trace=self.trace)
        except CheckFailed as failed:
            raise self._failure(failed.code + 1, args) from None
