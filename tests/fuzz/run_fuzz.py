"""Fuzz the compiler: random well-typed programs and mutants of valid ones,
each compiled up to LLVM (what `dslc --emit=llvm` does) in worker processes;
then, with `--differential`, random programs with random schedules run
compiled and in the reference interpreter.

    python tests/fuzz/run_fuzz.py --programs 10000 --differential 1000 --seed 1 --report fuzz.json

Every program must end in success or located diagnostics; anything else (a
traceback, an internal error, a diagnostic without file:line:col, a crashed
or hung worker) is a bug: it is listed in the report and its program saved
under `--keep-dir`. Exit status 1 when there is one.
"""

from __future__ import annotations

import argparse
import collections
import json
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from gen_programs import ProgramGen  # noqa: E402
from mutate import mutate  # noqa: E402
from workers import WorkerPool  # noqa: E402

CORPUS_GLOBS = ("examples/*.tk", "stdlib/*.tk", "tests/golden/programs/*.tk", "tests/golden/schedules/*.tk",
                "tests/golden/errors/*.tk")


def corpus() -> list[Path]:
    return sorted(p for pattern in CORPUS_GLOBS for p in ROOT.glob(pattern))


def machine() -> str:
    """'Intel(R) Xeon(R) ..., 2 cores, Linux x86_64': where the figures were taken."""
    import os
    import platform

    model = platform.processor() or platform.machine()
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
        model = next(x.split(":", 1)[1].strip() for x in lines if x.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{model}, {os.cpu_count()} cores, {platform.system()} {platform.machine()}"


def compile_job(index: int, seed: int, files: list[Path]) -> dict:
    """Program `index` of the run with `seed`: generated (one in three) or a mutant."""
    rng = random.Random(seed * 1_000_003 + index)
    base = None
    if index % 3 == 0:
        text, origin = ProgramGen(rng).program().text, "generated"
    else:
        if rng.random() < 0.7:
            path = rng.choice(files)
            original, origin, base = path.read_text(), f"mutant of {path.relative_to(ROOT)}", str(path.parent)
        else:
            original, origin = ProgramGen(rng).program().text, "mutant of a generated program"
        text = mutate(original, rng)
    return {"id": index, "name": f"fuzz{index}.tk", "text": text, "base": base, "origin": origin,
            "mode": "compile"}


def diff_job(index: int, seed: int) -> dict:
    return {"id": f"d{index}", "mode": "diff", "seed": seed * 1_000_003 + index, "origin": "differential"}


def campaign(programs: int, differential: int, seed: int, jobs: int, timeout: float, keep: Path | None,
             progress: bool = True, on_progress=None) -> dict:
    """Run the programs and differential cases; the figures as a dict (also given
    to `on_progress` every 100 results, so a long run leaves a report if stopped)."""
    files = corpus()
    work = [compile_job(i, seed, files) for i in range(programs)] + [diff_job(i, seed) for i in range(differential)]
    counts: dict = collections.defaultdict(collections.Counter)
    bugs = []
    started = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    pool = WorkerPool(jobs, timeout)
    report: dict = {}
    for n, (job, result) in enumerate(pool.run(work), 1):
        counts[job["mode"]][result["kind"]] += 1
        if result["kind"] in ("bug", "mismatch"):
            bugs.append(_record(job, result, keep))
        if n % 100 == 0 or n == len(work):
            report = {"date": date, "machine": machine(), "seed": seed, "programs": programs, "differential": differential, "finished": n == len(work),
                      "compile": dict(counts["compile"]), "diff": dict(counts["diff"]), "bugs": bugs,
                      "worker_restarts": pool.restarts, "seconds": round(time.monotonic() - started, 1)}
            if on_progress is not None:
                on_progress(report)
            if progress:
                print(f"  {n}/{len(work)} done, {len(bugs)} bugs, {report['seconds']:.0f} s", file=sys.stderr)
    return report


def _record(job: dict, result: dict, keep: Path | None) -> dict:
    entry = {"id": job["id"], "origin": job["origin"], "kind": result["kind"], "detail": result["detail"]}
    if keep is not None:
        keep.mkdir(parents=True, exist_ok=True)
        path = keep / f"{job['id']}.tk"
        path.write_text(job.get("text") or result.get("text", ""))
        entry["file"] = str(path)
    return entry


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--programs", type=int, default=1000, help="programs compiled up to LLVM")
    ap.add_argument("--differential", type=int, default=0, help="differential cases (compiled vs interpreter)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--jobs", type=int, default=1, help="worker processes")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds one program may take")
    ap.add_argument("--report", type=Path, help="write the figures here (JSON)")
    ap.add_argument("--keep-dir", type=Path, default=Path("fuzz-bugs"), help="where the bugs' programs go")
    ap.add_argument("--show", type=int, metavar="INDEX", help="print program INDEX of this seed and exit")
    args = ap.parse_args(argv)
    if args.show is not None:
        print(compile_job(args.show, args.seed, corpus())["text"])
        return 0
    def write(report: dict) -> None:
        if args.report:
            args.report.write_text(json.dumps(report, indent=1) + "\n")

    report = campaign(args.programs, args.differential, args.seed, args.jobs, args.timeout, args.keep_dir,
                      on_progress=write)
    summary = {k: report[k] for k in ("compile", "diff", "worker_restarts", "seconds")}
    print(json.dumps(summary))
    for bug in report["bugs"]:
        print(f"BUG {bug['id']} ({bug['origin']}): {bug['detail'].splitlines()[-1] if bug['detail'] else ''}")
    return 1 if report["bugs"] else 0


if __name__ == "__main__":
    sys.exit(main())
