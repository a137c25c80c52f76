"""The one error type of the back-end: LLVM rejected something, or linking failed."""

from __future__ import annotations


class BackendError(Exception):
    """LLVM verification, code generation or the system linker failed.

    The message carries the tool's own text (the verifier's complaint, the
    linker's stderr), since that is what a compiler developer needs to see.
    """
