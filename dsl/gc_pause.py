"""Python's cycle collector held off while the compiler runs.

A compile allocates millions of small objects (loop IR, llvmlite's IR) and
keeps most of them until it ends; the collector's full passes walk them all
again and again, for nothing: matmul_f32's llvmlite module took 0.67-0.92 s
to build with the collector on and 0.38-0.58 s with it off (Zen 4). Reference
counting still frees what is not in a cycle; the cycles a compile leaves are
collected once it is over, as usual.

    with gc_paused():
        run(job)

Compiles in several threads share one pause: the collector runs again when
the last ends, if it ran before the first began.
"""

from __future__ import annotations

import gc
import threading
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_was_enabled = False


@contextmanager
def gc_paused():
    """Hold off the cycle collector for the duration of the `with` block."""
    global _depth, _was_enabled
    with _lock:
        if _depth == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _was_enabled:
                gc.enable()
