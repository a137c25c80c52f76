"""`dsl.ops`: the standard library, ready to call on numpy arrays.

    import dsl
    c = dsl.ops.matmul(a, b)

Each family lives in its own module (`dense`, `pointwise`, `conv`, `quant`)
whose kernels are written in the language (`stdlib/*.tk`) and compiled on
first use (`dsl.ops.library`). The names are re-exported here lazily, so
`import dsl.ops` costs nothing until an op is called.
"""

from __future__ import annotations

import importlib

# The op families, in the order their names are looked up.
_FAMILIES = ("dense", "pointwise", "conv", "quant")


def _family_modules():
    for family in _FAMILIES:
        try:
            yield importlib.import_module(f"dsl.ops.{family}")
        except ModuleNotFoundError as exc:
            if exc.name != f"dsl.ops.{family}":
                raise  # a real missing dependency inside the module


def __getattr__(name: str):
    if name.startswith("_"):
        raise AttributeError(f"module 'dsl.ops' has no attribute '{name}'")
    for module in _family_modules():
        if name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            globals()[name] = value
            return value
    raise AttributeError(f"module 'dsl.ops' has no attribute '{name}'")


def __dir__():
    names = set(globals())
    for module in _family_modules():
        names.update(getattr(module, "__all__", ()))
    return sorted(names)
