"""The type checker: AST -> typed kernel IR, with every mistake reported at once."""

from .kernel import check_module, is_kernel

__all__ = ["check_module", "is_kernel"]
