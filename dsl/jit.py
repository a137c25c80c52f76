"""`@dsl.kernel`: a Python function compiled on first call, cached after.

    @dsl.kernel
    def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = alpha * x[i] + y[i]

    saxpy(2.0, x, y, out)

The body is parsed by the same grammar as `.tk` files. Other `@dsl.kernel`
functions it calls (found by name in the function's globals) are inlined.
`@dsl.kernel(interpret=True)` (or `DSL_INTERPRET=1`) runs the loop IR in the
reference interpreter instead: slow, but debuggable from Python.
"""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

from dsl.grammar.parser import parse
from dsl.lowering import ir

from . import options as options_mod
from .cache import DiskCache, make_key
from .load import Library
from .frontend import Frontend
from .metadata import kernel_spec
from .pysource import function_source, referenced_names

_memory_cache: dict[str, object] = {}
_memory_lock = threading.Lock()


class Kernel:
    """A kernel defined in Python; call it like the function it decorates."""

    def __init__(self, fn, *, interpret: bool | None = None, reassociate: bool = False,
                 inplace: bool = False, options: options_mod.CompileOptions | None = None):
        self.fn = fn
        self.name = fn.__name__
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self.source = function_source(fn)
        self.kernel_options = ir.KernelOptions(reassociate=reassociate, inplace=inplace)
        self.options = options_mod.from_env(options)
        if interpret is not None:
            self.options = self.options.with_(interpret=interpret)
        self._caller = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<dsl.Kernel {self.name} from {self.source.name}:{self.source.first_line}>"

    def __call__(self, *args, **kwargs):
        caller = self._caller or self.compile()
        return caller(*args, **kwargs)

    # ------------------------------------------------------------ compiling

    def dependencies(self) -> list["Kernel"]:
        """`@dsl.kernel` functions this one may call, found by name, transitively."""
        found: dict[str, Kernel] = {}
        stack = [self]
        while stack:
            k = stack.pop()
            for name in referenced_names(k.source):
                value = k.fn.__globals__.get(name)
                if isinstance(value, Kernel) and value is not self and name not in found:
                    found[name] = value
                    stack.append(value)
        return list(found.values())

    def frontend(self) -> Frontend:
        module = parse(self.source)
        deps = self.dependencies()
        imported = {}
        sources = [self.source]
        for dep in deps:
            for fn in parse(dep.source).functions:
                imported[fn.name] = fn
            sources.append(dep.source)
        return Frontend(module, imported, sources)

    def job(self, stop_after: str = "obj"):
        """Run the pipeline on this kernel up to `stop_after`; returns the `Job`."""
        from .pipeline import Job, run

        job = Job(self.source, self.options, front=self.frontend(), kernel_options=self.kernel_options)
        return run(job, stop_after)

    def ir(self, stage: str = "loops") -> str:
        """The text of a stage: 'ast', 'typed', 'loops', 'guard', 'llvm' or 'asm'."""
        from .pipeline import STAGES

        job = self.job(stage)
        return next(s for s in STAGES if s.name == stage).show(job)

    def _cache_key(self) -> str:
        from dsl.backends.target import make_target

        o = self.options
        target = make_target(o.triple, o.cpu, o.features)
        texts = [(s.name, s.first_line, s.text) for s in [self.source] + [d.source for d in self.dependencies()]]
        return make_key(kind="jit", name=self.name, sources=texts, target=target.key(),
                        options=o.cache_key_part(), kernel_options=repr(self.kernel_options))

    def compile(self):
        """Compile now (the first call does it otherwise); returns the callable."""
        with self._lock:
            if self._caller is None:
                self._caller = self._interpreter() if self.options.interpret else self._native()
            return self._caller

    def _native(self):
        key = self._cache_key()
        with _memory_lock:
            hit = _memory_cache.get(key)
        if hit is not None:
            return hit
        o = self.options
        if o.use_cache:
            cache = DiskCache(options_mod.default_cache_dir(o))
            path = cache.lookup(key) or cache.store(key, self._build)
        else:
            path = self._build(Path(tempfile.mkdtemp(prefix="dslc-")) / f"{self.name}.so")
        caller = getattr(Library(path), self.name)
        with _memory_lock:
            _memory_cache[key] = caller
        return caller

    def _build(self, path: Path) -> Path:
        from dsl.backends.link import link_shared

        job = self.job("obj")
        return link_shared(job.obj, path, job.target)

    def _interpreter(self):
        from .interpreted import InterpretedCaller

        job = self.job("loops")
        kernel = next(k for k in job.program.kernels if k.name == self.name)
        return InterpretedCaller(kernel, kernel_spec(kernel))


def kernel(fn=None, **kwargs):
    """Decorate a Python function to compile it as a kernel (see module doc).

    Keyword arguments: `interpret=True` runs it in the reference interpreter;
    `reassociate=True` lets float reductions be reordered; `inplace=True`
    allows outputs to alias inputs; `options=CompileOptions(...)`.
    """
    if fn is None:
        return lambda f: Kernel(f, **kwargs)
    return Kernel(fn, **kwargs)

