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

import functools
import shutil
import sys
import tempfile
import threading
from pathlib import Path

from dsl.grammar.parser import parse
from dsl.lowering import ir

from . import options as options_mod
from .cache import DiskCache, make_key
from .library import Library
from .frontend import Frontend
from .metadata import kernel_spec
from .pysource import function_source, located, referenced_names
from .shaped import ShapedBuilds

_memory_cache: dict[str, object] = {}
_memory_lock = threading.Lock()


class Kernel:
    """A kernel defined in Python; call it like the function it decorates."""

    def __init__(self, fn, *, interpret: bool | None = None, reassociate: bool = False,
                 inplace: bool = False, options: options_mod.CompileOptions | None = None,
                 specialize: bool | tuple[str, ...] = False, autotune: bool = False,
                 autotune_budget: float = 60.0, schedule: str | None = None):
        self.fn = fn
        self.name = fn.__name__
        functools.update_wrapper(self, fn)  # __name__, __qualname__, __module__, __doc__, __wrapped__
        self.source = function_source(fn, schedule)
        self.kernel_options = ir.KernelOptions(reassociate=reassociate, inplace=inplace)
        self._given_options = options
        self._interpret = interpret
        self._caller = None
        self._lock = threading.Lock()
        # Per-shape builds (exact-size specialization, autotuned schedules):
        # None when the kernel asks for neither, so plain calls skip all this.
        self._shaped = ShapedBuilds(self, specialize, autotune, autotune_budget) if specialize or autotune else None

    @property
    def options(self) -> options_mod.CompileOptions:
        """The options of a compile started now: those given to the decorator,
        updated with the `DSL_*` environment variables as they are at this moment.

        The environment is read when the kernel compiles (its first call), not
        when the module defining it is imported, so `DSL_INTERPRET`,
        `DSL_CACHE_DIR` or `DSL_PRINT_AFTER` set after the import still apply.
        An explicit `interpret=` wins over `DSL_INTERPRET`.
        """
        opts = options_mod.from_env(self._given_options)
        if self._interpret is not None:
            opts = opts.with_(interpret=self._interpret)
        return opts

    def __repr__(self) -> str:
        return f"<dsl.Kernel {self.name} from {self.source.name}:{self.source.first_line}>"

    def __call__(self, *args, **kwargs):
        if self._shaped is not None:
            return self._shaped.caller(args, kwargs)(*args, **kwargs)
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
                # Another Kernel of the same name (the same function decorated
                # twice, e.g. once with interpret=True) is this kernel's own def.
                if isinstance(value, Kernel) and value.name != self.name and value.name not in found:
                    found[value.name] = value
                    stack.append(value)
        return list(found.values())

    def frontend(self) -> Frontend:
        """This kernel parsed, with the `@dsl.kernel` functions it calls
        (`dependencies`) as its imports: what the pipeline's `ast` stage makes
        of a `.tk` file.

            front = squares_plus_one.frontend()  # a kernel calling fill() and square()
            sorted(front.imported)                # ['fill', 'square']
        """
        with located():
            module = parse(self.source)
            imported = {}
            sources = [self.source]
            for dep in self.dependencies():
                for fn in parse(dep.source).functions:
                    imported[fn.name] = fn
                sources.append(dep.source)
        return Frontend(module, imported, sources)

    def job(self, stop_after: str = "obj", options: options_mod.CompileOptions | None = None):
        """Run the pipeline on this kernel up to `stop_after`; returns the `Job`."""
        from .pipeline import Job, run

        opts = options or self.options
        job = Job(self.source, opts, front=self.frontend(), kernel_options=self.kernel_options)
        with located():
            return run(job, stop_after, out=sys.stderr)  # the stream of now, not of import time

    def ir(self, stage: str = "loops") -> str:
        """The text of a stage: 'ast', 'typed', 'loops', 'guard', 'llvm' or 'asm'."""
        from .pipeline import STAGES

        job = self.job(stage)
        return next(s for s in STAGES if s.name == stage).show(job)

    def _cache_key(self, o: options_mod.CompileOptions) -> str:
        from dsl.backends.target import make_target

        target = make_target(o.triple, o.cpu, o.features)
        texts = [(s.name, s.first_line, s.text) for s in [self.source] + [d.source for d in self.dependencies()]]
        return make_key(kind="jit", name=self.name, sources=texts, target=target.key(),
                        options=o.cache_key_part(), kernel_options=repr(self.kernel_options))

    def compile(self):
        """Compile now (the first call does it otherwise); returns the callable."""
        with self._lock:
            if self._caller is None:
                self._check_not_helper()
                opts = self.options
                self._caller = self._interpreter(opts) if opts.interpret else self._native(opts)
            return self._caller

    def _check_not_helper(self) -> None:
        """A function returning a value is a helper: it only exists inlined."""
        with located():
            fn = parse(self.source).functions[0]
        if fn.returns is not None and fn.returns.name != "None":
            raise TypeError(f"{self.name}() returns a value, so it is a helper that other kernels "
                            "inline; it cannot be called from Python (write results into an output "
                            "tensor instead)")

    def _native(self, o: options_mod.CompileOptions):
        key = self._cache_key(o)
        with _memory_lock:
            hit = None if _shows_ir(o) else _memory_cache.get(key)
        if hit is not None:
            return hit
        path = self.library_path(o)
        caller = getattr(Library(path), self.name)
        if not o.use_cache:  # mapped now: its private folder is no longer needed
            shutil.rmtree(path.parent, ignore_errors=True)
        with _memory_lock:
            _memory_cache[key] = caller
        return caller

    def library_path(self, o: options_mod.CompileOptions) -> Path:
        """The compiled library for options `o`: from the disk cache, or built now."""
        build = functools.partial(self._build, options=o)
        if not o.use_cache:
            return build(Path(tempfile.mkdtemp(prefix="dslc-")) / f"{self.name}.so")
        key = self._cache_key(o)
        cache = DiskCache(options_mod.default_cache_dir(o))
        return cache.store(key, build) if _shows_ir(o) else cache.get_or_build(key, build)

    def _build(self, path: Path, options: options_mod.CompileOptions | None = None) -> Path:
        from dsl.backends.link import link_shared

        job = self.job("so", options)
        return link_shared(job.objects, path, job.target)

    def _interpreter(self, o: options_mod.CompileOptions):
        from .interpreted import InterpretedCaller

        job = self.job("loops", o)
        kernel = next(k for k in job.program.kernels if k.name == self.name)
        return InterpretedCaller(kernel, kernel_spec(kernel))


def _shows_ir(o: options_mod.CompileOptions) -> bool:
    """Asked to print or dump the IR (DSL_PRINT_AFTER, DSL_DUMP_DIR): compile
    even when cached, or a warm cache would silently print nothing."""
    return bool(o.print_after) or o.dump_dir is not None


def kernel(fn=None, **kwargs):
    """Decorate a Python function to compile it as a kernel (see module doc).

    Keyword arguments: `interpret=True` runs it in the reference interpreter;
    `reassociate=True` lets float reductions be reordered; `inplace=True`
    allows outputs to alias inputs; `options=CompileOptions(...)`;
    `schedule="split(i, 8), vectorize(i.inner)"` is the kernel's `@schedule`
    (Python would evaluate a decorator's arguments, so it is given as text);
    `specialize=True` (or a tuple of dim names) compiles one build per set of
    exact sizes seen; `autotune=True` times the candidates of an open schedule
    (`choice`, `one_of`) once per shape class, within `autotune_budget` seconds.

        @dsl.kernel(autotune=True, schedule="split(i, choice(64, 256, 1024)), parallel(i.outer)")
        def scale(x: f32[N], y: f32[N]): ...
    """
    if fn is None:
        return lambda f: Kernel(f, **kwargs)
    return Kernel(fn, **kwargs)

