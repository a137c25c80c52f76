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
    "load": ("dsl.library", "load"),
    "set_num_threads": ("dsl.library", "set_num_threads"),
    "num_threads": ("dsl.library", "num_threads"),
    "compile_file": ("dsl.pipeline", "compile_file"),
    "CompileOptions": ("dsl.options", "CompileOptions"),
    "CompileError": ("dsl.grammar.diagnostics", "CompileError"),
    # Capitalised names not listed here become dims (`dsl.Foo` is Dim('Foo')):
    # every public class must be listed, or `except dsl.KernelError` breaks.
    "KernelError": ("dsl.errors", "KernelError"),
    "InternalError": ("dsl.errors", "InternalError"),
    "Library": ("dsl.library", "Library"),
    "dims": ("dsl.dtypes", "dims"),
    "Dim": ("dsl.dtypes", "Dim"),
}

_SUBMODULES = ("ops", "gguf")


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

