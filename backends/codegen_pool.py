"""Compile the parts of a split module (`split_module`) on several cores.

llvmlite lets one thread into LLVM at a time (a lock around every call), so
the other cores are reached through helper processes (`codegen_worker`).
They start with the first compile that has parts to share and stay for the
next (a fork's child starts its own); one ends when this process does, or
after two idle minutes.
This process compiles parts too; each takes the largest part left, so a
part that takes long does not wait behind others.

    >>> objects = compile_parts(split_module(module), target, 3, jobs=2)   # doctest: +SKIP

A helper that cannot start or dies only costs time: its part is compiled
here. The objects do not depend on who compiled them.
"""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
import threading
from collections import deque
from dataclasses import asdict

from .errors import BackendError
from .optimize import compile_text
from .target import Target

_CLOSE_SECONDS = 5  # how long an exiting process waits for a helper to end


class PartFailed(BackendError):
    """A part's LLVM IR did not verify; `text` is that part (to find its kernel)."""

    def __init__(self, message: str, text: str):
        super().__init__(message)
        self.text = text


class _HelperGone(Exception):
    """The helper process ended (or never started): its work comes back here."""


def default_jobs() -> int:
    """Processes a compile uses when not told: the cores this process may run
    on, at most 4 (a stdlib kernel has about 10 parts, its largest a fifth of
    the work)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(4, cores))


def compile_parts(texts: list[str], target: Target, opt_level: int, jobs: int) -> list[bytes]:
    """The object file of each LLVM IR text in `texts`, in order, compiled by
    this process and up to `jobs - 1` helpers. Raises PartFailed for the first
    part whose IR does not verify."""
    queue = deque(sorted(range(len(texts)), key=lambda i: -_cost(texts[i])))
    results: list[bytes | None] = [None] * len(texts)
    errors: dict[int, BackendError] = {}
    lock = threading.Lock()

    def take() -> int | None:
        with lock:
            return queue.popleft() if queue else None

    def here(index: int) -> None:
        try:
            results[index] = compile_text(texts[index], target, opt_level)
        except BackendError as err:
            errors[index] = err

    def drive(helper: _Helper) -> None:
        while (index := take()) is not None:
            try:
                results[index] = helper.compile(texts[index], target, opt_level)
            except BackendError as err:
                errors[index] = err
            except _HelperGone:
                with lock:
                    queue.appendleft(index)
                return

    helpers = _borrow(min(jobs, len(texts)) - 1)
    threads = [threading.Thread(target=drive, args=(h,), daemon=True) for h in helpers]
    for thread in threads:
        thread.start()
    while (index := take()) is not None:
        here(index)
    for thread in threads:
        thread.join()
    for index in range(len(texts)):  # given back by a helper that ended after the loop above
        if results[index] is None and index not in errors:
            here(index)
    _give_back(helpers)
    if errors:
        first = min(errors)
        raise PartFailed(str(errors[first]), texts[first])
    return results


def _cost(text: str) -> int:
    """A guess of LLVM's time for `text`, to start the longest parts first:
    its lines, a gather or scatter counting 100 (matmul_f32's general-stride
    body, 2,100 lines with 96 of them, took longer than the 10,000-line
    unit-stride one: 0.49 s against 0.33)."""
    calls = text.count("@llvm.masked.gather") + text.count("@llvm.masked.scatter")
    return text.count("\n") + 100 * calls


class _Helper:
    """One `codegen_worker` process and its pipes."""

    def __init__(self):
        self.proc = subprocess.Popen([sys.executable, "-m", "dsl.backends.codegen_worker"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.alive = True
        self.served = 0

    def compile(self, text: str, target: Target, opt_level: int) -> bytes:
        """The object file of `text`, compiled by the helper."""
        data = text.encode()
        header = {"target": asdict(target), "opt_level": opt_level, "bytes": len(data)}
        try:
            self.proc.stdin.write(json.dumps(header).encode() + b"\n" + data)
            self.proc.stdin.flush()
            line = self.proc.stdout.readline()
            reply = json.loads(line) if line else None
            obj = self.proc.stdout.read(reply["bytes"]) if reply and "bytes" in reply else b""
        except (OSError, ValueError):
            reply = None
        if reply is None or ("bytes" in reply and len(obj) != reply["bytes"]):
            self.close()
            raise _HelperGone()
        self.served += 1
        if "error" in reply:
            raise BackendError(reply["error"])
        return obj

    def close(self) -> None:
        self.alive = False
        try:
            self.proc.stdin.close()
            self.proc.wait(_CLOSE_SECONDS)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()


_idle: list[_Helper] = []
_pool_lock = threading.Lock()
_failed = False  # a helper could not start or died at its first part: use none from now on


def _borrow(count: int) -> list[_Helper]:
    global _failed
    with _pool_lock:
        _idle[:] = [h for h in _idle if h.proc.poll() is None]  # (ended after idling)
        helpers = [_idle.pop() for _ in range(min(count, len(_idle)))]
    while len(helpers) < count and not _failed:
        try:
            helpers.append(_Helper())
        except OSError:
            _failed = True
    return helpers


def _give_back(helpers: list[_Helper]) -> None:
    global _failed
    if any(not h.alive and not h.served for h in helpers):
        _failed = True  # (a helper that cannot import dslc dies at once, every time)
    with _pool_lock:
        _idle.extend(h for h in helpers if h.alive)


def _close_all() -> None:
    with _pool_lock:
        helpers, _idle[:] = list(_idle), []
    for helper in helpers:
        helper.close()


def _forget_parents_helpers() -> None:
    """In a fork's child: the parent's helpers are the parent's to talk to."""
    _idle.clear()


atexit.register(_close_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_parents_helpers)
