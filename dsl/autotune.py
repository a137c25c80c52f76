"""Autotuning: time the candidates of an open schedule, keep the fastest.

A schedule may leave parameters open (`choice(...)`, `one_of(...)`,
`lowering.schedule_space`). For one kernel and one *shape class* (each dim's
size rounded up to a power of two, and which tensors have a unit innermost
stride), `search` builds every candidate, times them in a separate process
(`dsl.autotune_worker`: a candidate that crashes is skipped with a warning, and
the search goes on in a new process), and returns the index of the fastest.
`TuningRecords` keeps the choice on disk, in the compile cache, keyed by the
kernel's sources, the target and the options, so the search runs once.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np


GRACE = 1.0  # seconds past the deadline a worker may take to start or to report, before it is killed


@dataclass(frozen=True)
class Outcome:
    """What a search found: `pick`, the fastest candidate; or, when nothing
    could be timed (`timed == 0`), the first that compiles, which is not a
    tuned choice and is not recorded."""

    pick: int
    seconds: float | None  # per call of `pick`; None when nothing was timed
    timed: int  # candidates timed
    failed: tuple[tuple[int, str], ...]  # (index, why)

    @property
    def tuned(self) -> bool:
        """Whether `pick` won a timing (else it is a fallback)."""
        return self.timed > 0


def shape_class(sizes: dict[str, int], unit_inner: tuple[bool, ...]) -> str:
    """'K=512,M=256,N=512;unit=TT': dims rounded up to powers of two."""
    parts = [f"{k}={1 << max(0, int(v) - 1).bit_length()}" for k, v in sorted(sizes.items())]
    return ",".join(parts) + ";unit=" + "".join("T" if u else "F" for u in unit_inner)


def arg_specs(params, values) -> list[dict]:
    """What the worker needs to make arguments like `values` (not the data)."""
    out = []
    for p, v in zip(params, values):
        if p.kind == "scalar":
            out.append({"kind": "scalar", "value": v.item() if hasattr(v, "item") else v})
            continue
        if p.quant:  # a quantized tensor's timing copy: its block bytes, [..., blocks, bytes]
            from .quant_args import blocks_of

            v = blocks_of("autotune", p, v, params, values)[0]
        a = np.asarray(v)
        strides = [s // a.itemsize for s in a.strides]
        out.append({"kind": "tensor", "dtype": a.dtype.str, "shape": list(a.shape),
                    "strides": strides, "output": p.output})
    return out


def search(kernel: str, builds, args: list[dict], budget: float = 60.0, progress=None, *,
           warn=None, names=None) -> Outcome:
    """Time `builds` (a list of (index, build) where `build()` returns a library
    path or raises) and return the fastest.

    `budget` (seconds, > 0) bounds the search: no build starts after it (but
    for the first one that compiles, the fallback), and a worker still timing
    then is killed, its candidate skipped. `progress`: a `SearchProgress`
    (`terminal_progress`) or None. A skipped candidate is reported to
    `warn(text)`, by default a `UserWarning` at the caller's code outside dsl;
    `names[index]` says what candidate `index` is.

        >>> search("k", [(0, lambda: "k0.so"), (1, lambda: "k1.so")], specs, budget=10)  # doctest: +SKIP
        Outcome(pick=1, seconds=0.0021, timed=2, failed=())
    """
    if not budget > 0:  # also refuses NaN
        raise ValueError(f"autotune {kernel}: the time budget must be a positive number of seconds, got {budget!r}")
    log = _Log(kernel, len(builds), progress, warn, names)
    deadline = time.monotonic() + budget
    try:
        paths = _build_all(builds, deadline, log)
        times = _time_all(kernel, paths, args, deadline, log)
    finally:
        if progress is not None:
            progress.close()
    if not times:
        return _fallback(paths, budget, log)
    pick = min(times, key=times.get)
    return Outcome(pick, times[pick], len(times), tuple(log.failed))


class _Log:
    """One search's skipped candidates, and where its progress and warnings go."""

    def __init__(self, kernel: str, total: int, progress, warn, names):
        self.kernel, self.total, self.progress = kernel, total, progress
        self.warn = warn or _warn_user
        self.names = names or ()
        self.failed: list[tuple[int, str]] = []

    def name(self, index: int) -> str:
        return f"candidate {index}" + (f" ({self.names[index]})" if index < len(self.names) else "")

    def skip(self, index: int, why: str) -> None:
        self.failed.append((index, why))
        self.say(f"{self.name(index)} skipped: {why}")

    def say(self, text: str) -> None:
        if self.progress is not None:
            self.progress.clear()  # the warning gets a line of its own; the next update redraws the bar
        self.warn(f"autotune {self.kernel}: {text}")

    def building(self, done: int, index: int) -> None:
        if self.progress is not None:
            self.progress.building(done, self.total, index)

    def timing(self, index: int, times: dict[int, float]) -> None:
        if self.progress is not None:
            self.progress.timing(len(times) + len(self.failed), self.total, index)

    def timed(self, times: dict[int, float]) -> None:
        if self.progress is not None:
            self.progress(len(times) + len(self.failed), self.total, min(times.values()) if times else None)


def _warn_user(text: str) -> None:
    """`warnings.warn(text)` pointing at the first caller outside dsl: the
    user's call of the kernel, not the autotuner's insides."""
    frame, level = sys._getframe(1), 2
    while frame is not None and frame.f_globals.get("__name__", "").partition(".")[0] == "dsl":
        frame, level = frame.f_back, level + 1
    warnings.warn(text, UserWarning, stacklevel=level)


def _build_all(builds, deadline: float, log: _Log) -> list[tuple[int, str]]:
    """(index, library path) of the candidates that compile. None starts after
    the deadline, unless none compiled yet: the fallback needs one."""
    paths = []
    for done, (index, build) in enumerate(builds):
        if paths and time.monotonic() > deadline:
            break
        log.building(done, index)
        try:
            paths.append((index, str(build())))
        except Exception as exc:  # a candidate the compiler refuses is skipped
            log.skip(index, f"does not compile: {(str(exc).splitlines() or [type(exc).__name__])[0]}")
    return paths


def _fallback(paths: list[tuple[int, str]], budget: float, log: _Log) -> Outcome:
    """Nothing timed: the first candidate that compiles (0 when none does, so
    that the real build reports why), with a warning."""
    pick = paths[0][0] if paths else 0
    failed = dict(log.failed)
    if not paths:
        why = "no candidate compiles"
    elif all(i in failed for i, _ in paths):
        why = "every candidate failed"
    else:
        why = f"the time budget of {budget:g} s ran out"
    defaults = ", the schedule's defaults" if pick == 0 else ""
    log.say(f"no candidate could be timed ({why}); using {log.name(pick)}{defaults}, untimed and not "
            "recorded, so that a search with a larger budget runs again")
    return Outcome(pick, None, 0, tuple(log.failed))


def _time_all(kernel: str, paths, args, deadline: float, log: _Log) -> dict[int, float]:
    """Seconds per call of the candidates in `paths`, timed by worker processes:
    after one dies, the candidate it was timing is skipped and a new worker
    goes on with the rest, until the deadline."""
    times: dict[int, float] = {}
    pending = dict(paths)
    while pending and time.monotonic() < deadline:
        running, code = _run_worker(kernel, pending, args, deadline, times, log)
        if running is None:
            break  # the worker finished (or ran out of time) normally
        del pending[running]
        if code is None:
            log.skip(running, "did not finish within the time budget; killed")
        else:
            log.skip(running, f"crashed (exit status {code})")
        log.timed(times)
    return times


def _run_worker(kernel: str, pending: dict, args, deadline: float, times: dict, log: _Log):
    """Time the `pending` candidates ({index: path}) in one worker, removing
    those it reports on. Returns (the candidate it was timing when it ended,
    or None; its exit status, or None when it was killed at the deadline)."""
    job = {"kernel": kernel, "args": args, "candidates": list(pending.items()),
           "budget": max(0.0, deadline - time.monotonic())}
    proc = subprocess.Popen([sys.executable, "-m", "dsl.autotune_worker"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=_worker_env())
    running = None
    try:
        _send(proc, json.dumps(job))
        for line in _lines(proc.stdout, deadline + GRACE):
            word, index, *rest = line.split(" ", 2) + [""]
            if word not in ("start", "done", "fail") or not index.isdigit():
                continue  # not the worker's (a candidate printing on stdout)
            running = int(index)
            if word == "start":
                log.timing(running, times)
                continue
            pending.pop(running, None)
            if word == "done":
                times[running] = float(rest[0])
            else:
                log.skip(running, f"failed: {rest[0].strip() or '?'}")
            running = None
            log.timed(times)
        return running, _exit_status(proc, deadline + GRACE)
    finally:
        if proc.poll() is None:  # past the deadline, or interrupted (Ctrl-C): never leave it running
            proc.kill()
            proc.wait()
        proc.stdout.close()


def _send(proc: subprocess.Popen, text: str) -> None:
    try:
        proc.stdin.write(text.encode())
        proc.stdin.close()
    except BrokenPipeError:  # the worker died at once: its exit status tells
        pass


def _lines(stream, until: float):
    """The lines `stream` (a pipe) gives until it ends or the monotonic clock
    reaches `until`: a worker stuck in a candidate cannot stall the search."""
    fd, rest = stream.fileno(), b""
    while True:
        left = until - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return
        chunk = os.read(fd, 65536)
        if not chunk:
            return
        *lines, rest = (rest + chunk).split(b"\n")
        for line in lines:
            yield line.decode(errors="replace")


def _exit_status(proc: subprocess.Popen, until: float) -> int | None:
    """The worker's exit status, or None if it is still running at `until`."""
    try:
        return proc.wait(timeout=max(0.1, until - time.monotonic()))
    except subprocess.TimeoutExpired:
        return None


def _worker_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), root) if p)
    return env


def terminal_progress(kernel: str) -> SearchProgress | None:
    """The progress bar of a search when stderr is a terminal (`dsl.progress`:
    not with DSL_NO_PROGRESS); None otherwise."""
    from .progress import wanted

    return SearchProgress(kernel) if wanted() else None


class SearchProgress:
    """A search's bar on stderr: the candidates built, then those timed.

        autotune mm [########................] 2/6 0:04 building candidate 2
        autotune mm [################........] 4/6 0:09 timed, best 1.204 ms

    Called as `progress(done, total, best_seconds)` when a candidate is timed
    (or skipped); the bar ends its line when all are, or on `close()`.
    """

    def __init__(self, kernel: str):
        from .progress import Progress

        self.bar = Progress(f"autotune {kernel}", 0, enabled=True)
        self.best: float | None = None

    def building(self, done: int, total: int, index: int) -> None:
        """Candidate `index` is being compiled; `done` of `total` tried so far."""
        self.bar.update(done, f"building candidate {index}", total)

    def timing(self, done: int, total: int, index: int) -> None:
        """Candidate `index` is being timed; `done` of `total` timed or skipped."""
        self.bar.update(done, f"timing candidate {index}{self._best()}", total)

    def __call__(self, done: int, total: int, best: float | None) -> None:
        self.best = best
        self.bar.update(done, f"timed{self._best()}", total)
        if done >= total:
            self.bar.close()

    def clear(self) -> None:
        """Blank the bar's line, so that a warning can take it."""
        self.bar.clear()

    def close(self) -> None:
        """End the bar's line (once)."""
        self.bar.close()

    def _best(self) -> str:
        return f", best {self.best * 1e3:.3f} ms" if self.best is not None else ""


class TuningRecords:
    """Choices on disk: `<cache>/tuning/<key>.json` maps shape class -> pick.

    A damaged file is ignored (and replaced on the next write); writes are atomic.
    """

    def __init__(self, root: Path):
        self.root = Path(root) / "tuning"

    def get(self, key: str, klass: str) -> int | None:
        entry = self._read(key).get(klass)
        return entry.get("pick") if isinstance(entry, dict) and isinstance(entry.get("pick"), int) else None

    def put(self, key: str, klass: str, outcome: Outcome, schedule: str) -> None:
        """Record `outcome.pick` for `klass`; an untimed fallback is no choice
        and is not recorded (a later search, with more time, runs again)."""
        if not outcome.tuned:
            return
        data = self._read(key)
        data[klass] = {"pick": outcome.pick, "seconds": outcome.seconds, "schedule": schedule}
        try:
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
            tmp = self.root / f".tmp-{os.getpid()}-{key}.json"
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
            os.replace(tmp, self.root / f"{key}.json")
        except OSError as exc:  # an unwritable cache: the choice holds for this process only
            warnings.warn(f"autotune: cannot record the choice in {self.root} ({exc})", RuntimeWarning,
                          stacklevel=2)

    def _read(self, key: str) -> dict:
        try:
            data = json.loads((self.root / f"{key}.json").read_text())
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}
