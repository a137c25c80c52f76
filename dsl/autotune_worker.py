"""The autotuner's timing process: loads each candidate library and times it.

Run as `python -m dsl.autotune_worker`, with a JSON job on stdin (see
`dsl.autotune.search`). For each candidate it prints `start I`, then
`done I SECONDS` or `fail I MESSAGE`, one line each, flushed at once, so the
parent knows which candidate was running if this process dies (a crashing
candidate must not take the compiler down with it), or if the parent kills it
at the search's deadline (a candidate that hangs must not stall the search).
"""

from __future__ import annotations

import json
import math
import signal
import sys
import time

import numpy as np

LAST_RESORT = 30  # seconds past its budget after which the worker ends itself


def make_args(specs: list[dict], seed: int = 0) -> list:
    """Arrays (random data, the given shapes and stride order) and scalars."""
    rng = np.random.default_rng(seed)
    out = []
    for s in specs:
        if s["kind"] == "scalar":
            out.append(s["value"])
            continue
        out.append(_array(s, rng))
    return out


def _array(s: dict, rng) -> np.ndarray:
    shape, strides, dtype = s["shape"], s["strides"], np.dtype(s["dtype"])
    # Allocate with the axes in the caller's stride order, broadcast axes as 1.
    order = sorted(range(len(shape)), key=lambda a: -abs(strides[a]))
    base_shape = [1 if strides[a] == 0 else shape[a] for a in order]
    if dtype.kind == "f":
        base = rng.standard_normal(base_shape).astype(dtype)
    elif dtype.kind == "b":
        base = rng.integers(0, 2, base_shape).astype(dtype)
    else:
        base = rng.integers(0, 8, base_shape).astype(dtype)
    view = base.transpose(np.argsort(order))
    if 0 in strides and not s["output"]:
        return np.broadcast_to(view, shape)
    return view


def time_call(fn, args, min_seconds: float = 0.02, max_calls: int = 1000) -> float:
    """Median seconds per call over at least 3 timed batches."""
    fn(*args)  # warm-up: page faults, first-touch
    samples = []
    calls = 1
    while True:
        start = time.perf_counter()
        for _ in range(calls):
            fn(*args)
        elapsed = time.perf_counter() - start
        if elapsed < min_seconds / 3 and calls < max_calls:
            calls *= 2
            continue
        samples.append(elapsed / calls)
        if len(samples) >= 3:
            return float(np.median(samples))


def main() -> int:
    import dsl

    job = json.load(sys.stdin)
    deadline = time.monotonic() + job["budget"]
    # The parent kills this process at the deadline; should the parent be
    # gone, SIGALRM's default action ends a hanging candidate all the same.
    signal.alarm(math.ceil(min(job["budget"], 1e6)) + LAST_RESORT)
    args = make_args(job["args"])
    for index, path in job["candidates"]:
        if time.monotonic() > deadline:
            break
        print(f"start {index}", flush=True)
        try:
            fn = getattr(dsl.load(path), job["kernel"])
            seconds = time_call(fn, args)
        except Exception as exc:  # a failing candidate is reported, the search goes on
            print(f"fail {index} {type(exc).__name__}: {exc}".replace("\n", " "), flush=True)
            continue
        print(f"done {index} {seconds!r}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
