"""The boundary between the compiler and its users: an unexpected exception
inside the compiler becomes an `InternalError` naming the stage and the file
being compiled; `DSL_DEBUG=1` lets the raw traceback through."""

from __future__ import annotations

from contextlib import contextmanager

from dsl.grammar.diagnostics import CompileError


class InternalError(Exception):
    """A bug in dslc (not in the user's program)."""


class KernelError(Exception):
    """Base class for errors raised when a compiled kernel is called."""


@contextmanager
def internal_errors(debug: bool, stage: str, where: str):
    try:
        yield
    except (CompileError, InternalError):
        raise
    except RecursionError:
        if debug:
            raise
        raise InternalError(f"internal error in stage '{stage}' while compiling {where}: "
                            "program nested too deeply") from None
    except Exception as exc:
        if debug:
            raise
        raise InternalError(f"internal error in stage '{stage}' while compiling {where}: "
                            f"{type(exc).__name__}: {exc} (set DSL_DEBUG=1 for the traceback)") from exc
