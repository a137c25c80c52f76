"""A pool of `fuzz_worker.py` processes: jobs in, one result per job out.

A worker that dies (segfault, LLVM abort) or hangs past the time limit is
counted against the job it was running, and a fresh one takes the next job.

    >>> with WorkerPool(jobs=2) as pool:                              # doctest: +SKIP
    ...     for job, result in pool.run([{"id": 0, "name": "a.tk", "text": "..."}]): ...
"""

from __future__ import annotations

import json
import os
import queue
import select
import signal
import subprocess
import sys
import threading
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent


class _Worker:
    def __init__(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HERE), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen([sys.executable, str(HERE / "fuzz_worker.py")], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
        self.buffer = b""

    def line(self, timeout: float) -> str | None:
        """The next line of output; None at end of file or after `timeout` seconds."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buffer:
            ready, _, _ = select.select([fd], [], [], timeout)
            if not ready:
                return None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return None
            self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        return line.decode()

    def run(self, job: dict, timeout: float) -> dict | None:
        """The job's result, or None when the worker died or hung (it is then gone)."""
        try:
            self.proc.stdin.write((json.dumps(job) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError:
            return None
        while True:
            line = self.line(timeout)
            if line is None:
                return None
            if line.startswith("result "):
                _, _, payload = line.split(" ", 2)
                return json.loads(payload)

    def death(self) -> str:
        """Why the worker stopped (and make sure it has)."""
        try:
            code = self.proc.wait(timeout=1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return "hung (killed after the time limit)"
        if code < 0:
            return f"worker killed by signal {signal.Signals(-code).name}"
        return f"worker exited with status {code}"

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


class WorkerPool:
    def __init__(self, jobs: int = 1, timeout: float = 120.0):
        self.jobs = max(1, jobs)
        self.timeout = timeout
        self.restarts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def run(self, jobs):
        """Yield (job, result) as results arrive (not in job order with jobs > 1)."""
        todo: queue.Queue = queue.Queue()
        done: queue.Queue = queue.Queue()
        count = 0
        for job in jobs:
            todo.put(job)
            count += 1
        threads = [threading.Thread(target=self._serve, args=(todo, done), daemon=True) for _ in range(self.jobs)]
        for t in threads:
            t.start()
        for _ in range(count):
            yield done.get()
        for t in threads:
            t.join()

    def _serve(self, todo: queue.Queue, done: queue.Queue) -> None:
        worker = None
        while True:
            try:
                job = todo.get_nowait()
            except queue.Empty:
                break
            worker = worker or _Worker()
            result = worker.run(job, self.timeout)
            if result is None:
                why = worker.death()
                result = {"kind": "bug", "detail": f"crash: {why}"}
                worker = None
                self.restarts += 1
            done.put((job, result))
        if worker is not None:
            worker.close()
