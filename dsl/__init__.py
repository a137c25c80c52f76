"""dslc: a compiler for a small tensor-kernel language.

    import dsl
    from dsl import f32, N

    @dsl.kernel
    def saxpy(alpha: f32, x: f32[N], y: f32[N], out: f32[N]):
        for i in range(N):
            out[i] = alpha * x[i] + y[i]

The face is loaded lazily so that `dsl.grammar`, `dsl.lowering` and
`dsl.backends` can be imported without it.
"""

__version__ = "0.1.0"

_FACE = {
    "kernel": ("dsl.jit", "kernel"),
    "Kernel": ("dsl.jit", "Kernel"),
    "load": ("dsl.load", "load"),
    "compile_file": ("dsl.pipeline", "compile_file"),
    "CompileOptions": ("dsl.options", "CompileOptions"),
    "CompileError": ("dsl.grammar.diagnostics", "CompileError"),
    # Capitalised names not listed here become dims (`dsl.Foo` is Dim('Foo')):
    # every public class must be listed, or `except dsl.KernelError` breaks.
    "KernelError": ("dsl.errors", "KernelError"),
    "InternalError": ("dsl.errors", "InternalError"),
    "Library": ("dsl.load", "Library"),
    "dims": ("dsl.dtypes", "dims"),
    "Dim": ("dsl.dtypes", "Dim"),
}

_SUBMODULES = ("ops",)


def __getattr__(name: str):
    import importlib

    if name in _FACE:
        module, attr = _FACE[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name.startswith("_") or not name[:1].isalpha():
        raise AttributeError(f"module 'dsl' has no attribute '{name}'")
    if name in _SUBMODULES:
        return importlib.import_module(f"dsl.{name}")
    dtypes = importlib.import_module("dsl.dtypes")
    if name in dtypes.DTYPES:
        return dtypes.DTYPES[name]
    if dtypes.is_dim_name(name):
        return dtypes.Dim(name)
    raise AttributeError(f"module 'dsl' has no attribute '{name}'")


def __dir__():
    return sorted(list(globals()) + list(_FACE))


def _keep_face():
    """Keep `dsl.load` the function when the submodule `dsl.load` is imported.

    Importing a submodule binds it as an attribute of its package, so once
    anything ran `from .load import Library` (the decorator does), `dsl.load`
    would be the module and `dsl.load("k.so")` would fail with "'module' object
    is not callable". A face name is never rebound to its submodule; the module
    stays importable (`from dsl.load import Library`, `sys.modules`).
    """
    import sys
    import types

    class Package(types.ModuleType):
        def __setattr__(self, name, value):
            if name in _FACE and isinstance(value, types.ModuleType) and value.__name__ == f"dsl.{name}":
                return
            super().__setattr__(name, value)

    sys.modules[__name__].__class__ = Package


_keep_face()
