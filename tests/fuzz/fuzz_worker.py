"""The fuzzer's compiling process: many programs compiled in one process.

Run as `python tests/fuzz/fuzz_worker.py`, fed JSON lines on stdin
(`{"id": 7, "name": "p7.tk", "text": "...", "base": null, "mode": "compile"}`).
For each it prints `start ID`, then `result ID {json}`, flushed at once, so
the parent (`run_fuzz.py`) knows which program was running if this process
dies (an LLVM abort or a segfault) and starts a new one for the rest.

A compile goes as far as `dslc --emit=llvm` does (parse, type check, lower,
schedule, guard, LLVM IR verified and optimized at -O3) and ends in one of:
`ok`, `diagnostic` (a `CompileError` whose every diagnostic has a
file:line:col) or `bug` (anything else: a traceback, an internal error, a
diagnostic without a location).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

TARGET_CPU = "znver3"  # a fixed target: the same programs give the same results on every host


def classify_compile(name: str, text: str, base: str | None = None) -> dict:
    """Compile `text` up to LLVM; {"kind": "ok" | "diagnostic" | "bug", "detail": ...}."""
    from dsl.errors import InternalError
    from dsl.grammar.diagnostics import CompileError, Source
    from dsl.options import CompileOptions
    from dsl.pipeline import compile_source

    try:
        compile_source(Source(name, text), CompileOptions(cpu=TARGET_CPU), stop_after="llvm",
                       base_dir=Path(base) if base else None)
    except CompileError as err:
        unlocated = [d for d in err.diagnostics if d.span is None]
        if unlocated:
            return {"kind": "bug", "detail": "diagnostic without a location: " + unlocated[0].render()}
        first = err.diagnostics[0].render().splitlines()[0]
        return {"kind": "diagnostic", "detail": first}
    except InternalError as err:
        return {"kind": "bug", "detail": str(err)}
    except Exception:
        return {"kind": "bug", "detail": traceback.format_exc(limit=-6)}
    return {"kind": "ok", "detail": ""}


def handle(job: dict) -> dict:
    if job.get("mode") == "diff":
        from differential import run_case

        return run_case(job)
    return classify_compile(job["name"], job["text"], job.get("base"))


def main() -> int:
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        print(f"start {job['id']}", flush=True)
        try:
            result = handle(job)
        except Exception:  # the harness itself failed on this job: report, go on
            result = {"kind": "bug", "detail": "harness: " + traceback.format_exc(limit=-4)}
        print(f"result {job['id']} {json.dumps(result)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
