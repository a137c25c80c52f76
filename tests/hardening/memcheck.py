"""Every example and standard-library kernel under valgrind memcheck, at
small sizes (1, 3, 7, 17 for every dim), on contiguous arrays and on reversed
(negative-stride) and transposed inputs: the count of invalid reads and
writes must be 0.

    python tests/hardening/memcheck.py --report memcheck.json      # `make memcheck`

The libraries are built outside valgrind, for an AVX2 target (valgrind
cannot run AVX-512 code); only the calls run under it (with
`PYTHONMALLOC=malloc`, so Python's own allocator does not hide heap blocks).
Without valgrind the report says why it was skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from kernel_calls import build, kernel_files  # noqa: E402

# valgrind 3.19 does not decode AVX-512: build for an AVX2+FMA machine.
MEMCHECK_CPU = "haswell"

CHILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import numpy as np
import dsl
from kernel_calls import calls

def reversed_inputs(a, output):
    return a if output or a.ndim == 0 else a[..., ::-1].copy()[..., ::-1]

def transposed_inputs(a, output):
    return a if output or a.ndim < 2 else np.asfortranarray(a)

count = failed = 0
for path in sys.argv[2:]:
    lib = dsl.load(path)
    for place in (None, reversed_inputs, transposed_inputs):
        for name, args in calls(lib, place=place):
            count += 1
            try:
                getattr(lib, name)(*args)
            except (ValueError, TypeError, IndexError, MemoryError) as exc:  # a refused call is not a memory error
                failed += 1
print(f"calls {count} refused {failed}", flush=True)
"""


def run(report: Path | None) -> dict:
    if shutil.which("valgrind") is None:
        result = {"skipped": "valgrind is not installed (apt-get install -y valgrind)"}
    else:
        result = _memcheck()
    if report is not None:
        report.write_text(json.dumps(result, indent=1) + "\n")
    return result


def _memcheck() -> dict:
    files = kernel_files()
    with tempfile.TemporaryDirectory(prefix="dslc-memcheck-") as tmp:
        libs = [str(build(p, Path(tmp), cpu=MEMCHECK_CPU)) for p in files]
        env = dict(os.environ, PYTHONMALLOC="malloc", DSL_NUM_THREADS="2")
        cmd = ["valgrind", "--tool=memcheck", "--error-limit=no", "--num-callers=12", "--leak-check=no",
               sys.executable, "-c", CHILD, str(HERE), *libs]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    log = proc.stderr
    calls = re.search(r"calls (\d+) refused (\d+)", proc.stdout)
    summary = re.search(r"ERROR SUMMARY: (\d+) errors", log)
    return {
        "files": [str(p.relative_to(HERE.parent.parent)) for p in files],
        "kernels_called": int(calls.group(1)) if calls else 0,
        "calls_refused": int(calls.group(2)) if calls else 0,
        "invalid_reads": _count(log, "Invalid read", True),
        "invalid_writes": _count(log, "Invalid write", True),
        "invalid_outside_kernels": _count(log, "Invalid read", False) + _count(log, "Invalid write", False),
        "uninitialised_in_kernels": _count(log, "uninitialised", True),
        "errors_total": int(summary.group(1)) if summary else None,
        "exit_status": proc.returncode,
        "valgrind": subprocess.run(["valgrind", "--version"], capture_output=True, text=True).stdout.strip(),
        "log_tail": log[-3000:] if proc.returncode or not calls else "",
    }


def _count(log: str, kind: str, in_kernels: bool) -> int:
    """Memcheck reports of `kind` whose stack is (or is not) in our libraries."""
    blocks = re.split(r"==\d+== \n", log)
    found = [b for b in blocks if kind in b.split("\n", 1)[0]]
    return sum(1 for b in found if ("dslc-memcheck-" in b) == in_kernels)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--report", type=Path)
    args = ap.parse_args(argv)
    result = run(args.report)
    print(json.dumps({k: v for k, v in result.items() if k != "log_tail"}))
    if "skipped" in result:
        return 0
    ok = result["kernels_called"] > 0 and result["invalid_reads"] == 0 and result["invalid_writes"] == 0
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
