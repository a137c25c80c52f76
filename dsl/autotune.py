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
import subprocess
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Outcome:
    pick: int
    seconds: float
    timed: int  # candidates timed
    failed: tuple[tuple[int, str], ...]  # (index, why)


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


def search(kernel: str, builds, args: list[dict], budget: float = 60.0, progress=None) -> Outcome:
    """Time `builds` (a list of (index, build) where `build()` returns a library
    path or raises) and return the fastest. `budget` bounds the whole search
    in seconds; `progress(done, total, best_seconds)` is called as it goes."""
    deadline = time.monotonic() + budget
    paths, failed = [], []
    for index, build in builds:
        if time.monotonic() > deadline:
            break
        try:
            paths.append((index, str(build())))
        except Exception as exc:  # a candidate the compiler refuses is skipped
            failed.append((index, f"does not compile: {str(exc).splitlines()[0]}"))
            warnings.warn(f"autotune {kernel}: candidate {index} skipped: {failed[-1][1]}", stacklevel=2)
    times = _time_all(kernel, paths, args, deadline, failed, progress, len(builds))
    if not times:
        why = "; ".join(f"#{i}: {w}" for i, w in failed) or "the time budget ran out"
        raise RuntimeError(f"autotune {kernel}: no candidate could be timed ({why})")
    pick = min(times, key=times.get)
    return Outcome(pick, times[pick], len(times), tuple(failed))


def _time_all(kernel, paths, args, deadline, failed, progress, total) -> dict[int, float]:
    times: dict[int, float] = {}
    pending = list(paths)
    while pending and time.monotonic() < deadline:
        job = {"kernel": kernel, "args": args, "candidates": pending,
               "budget": max(0.0, deadline - time.monotonic())}
        running = None
        proc = subprocess.Popen([sys.executable, "-m", "dsl.autotune_worker"], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True, env=_worker_env())
        proc.stdin.write(json.dumps(job))
        proc.stdin.close()
        for line in proc.stdout:
            word, index, *rest = line.split(" ", 2)
            index = int(index)
            if word == "start":
                running = index
                continue
            running = None
            done = next(p for p in pending if p[0] == index)
            pending.remove(done)
            if word == "done":
                times[index] = float(rest[0])
            else:
                failed.append((index, rest[0].strip() if rest else "failed"))
                warnings.warn(f"autotune {kernel}: candidate {index} failed: {failed[-1][1]}", stacklevel=3)
            if progress is not None:
                progress(len(times) + len(failed), total, min(times.values()) if times else None)
        code = proc.wait()
        if running is None:
            break  # the worker finished (or ran out of time) normally
        failed.append((running, f"crashed (exit status {code})"))
        warnings.warn(f"autotune {kernel}: candidate {running} crashed (exit status {code}); skipped",
                      stacklevel=3)
        pending = [p for p in pending if p[0] != running]
    return times


def _worker_env() -> dict:
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), root) if p)
    return env


def terminal_progress(kernel: str):
    """`progress(done, total, best)` drawing a bar on stderr when it is a
    terminal (`dsl.progress`: not with DSL_NO_PROGRESS); None otherwise."""
    from .progress import Progress, wanted

    if not wanted():
        return None
    bar = Progress(f"autotune {kernel}", 0, enabled=True)

    def show(done: int, total: int, best: float | None) -> None:
        best_text = f", best {best * 1e3:.3f} ms" if best is not None else ""
        bar.update(done, f"candidates{best_text}", total)
        if done >= total:
            bar.close()

    return show


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
