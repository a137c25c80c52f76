"""Write RELIABILITY.md from the figures the reliability runs leave behind.

    python tests/fuzz/reliability_report.py --fuzz fuzz.json --diff diff.json --memcheck memcheck.json \\
        -o RELIABILITY.md

Inputs: the JSON reports of `run_fuzz.py` (the compile campaign and the
differential one, or one report holding both) and of
`tests/hardening/memcheck.py`; the crashes found and fixed (`found.py`); and
the bad-call kinds, counted in the tables of `tests/unit/test_args.py`.
Every number printed comes from one of those; a missing input says so.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))

from found import FOUND  # noqa: E402
from run_fuzz import machine  # noqa: E402

BAD_CALL_TABLES = ("BAD_CALLS", "BAD_BINDINGS")


def bad_call_kinds(path: Path = ROOT / "tests/unit/test_args.py") -> int:
    """Entries of the bad-call tables (read with `ast`, not imported)."""
    count = 0
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.List):
            if any(isinstance(t, ast.Name) and t.id in BAD_CALL_TABLES for t in node.targets):
                count += len(node.value.elts)
    return count


def _load(path: Path | None) -> dict | None:
    if path is None or not path.exists():
        return None
    data = json.loads(path.read_text())
    if "date" not in data:  # a report from before run_fuzz.py recorded it: the file's own time
        written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(path.stat().st_mtime))
        data["date"], data["machine"] = f"(report written {written})", machine()
    return data


def _campaign_lines(fuzz: dict | None) -> list[str]:
    if fuzz is None:
        return ["No compile campaign report was given."]
    c = fuzz.get("compile", {})
    total = sum(c.values())
    state = "" if fuzz.get("finished", True) else f" (stopped after {total} of {fuzz['programs']} planned)"
    lines = [f"Programs compiled up to LLVM (`dslc --emit=llvm`'s stages, -O3, target znver3): **{total}**{state},"
             f" seed {fuzz['seed']}, {fuzz['seconds']:.0f} s, run {fuzz.get('date', '?')} on {fuzz.get('machine', '?')}.",
             "", "| outcome | programs |", "|---|---|"]
    for kind in ("ok", "diagnostic", "bug"):
        lines.append(f"| {kind} | {c.get(kind, 0)} |")
    lines += ["", f"Worker processes lost (segfault, abort, hang): {fuzz.get('worker_restarts', 0)}."]
    return lines


def _diff_lines(diff: dict | None) -> list[str]:
    if diff is None or not diff.get("diff"):
        return ["No differential report was given."]
    d = diff["diff"]
    total = sum(d.values())
    state = "" if diff.get("finished", True) else f" (stopped after {total} of {diff['differential']} planned)"
    lines = [f"Cases: **{total}**{state}, seed {diff['seed']}, {diff['seconds']:.0f} s, "
             f"run {diff.get('date', '?')} on {diff.get('machine', '?')}.", "",
             "| outcome | cases |", "|---|---|"]
    for kind in ("agree", "mismatch", "bug"):
        lines.append(f"| {kind} | {d.get(kind, 0)} |")
    return lines


def _memcheck_lines(mem: dict | None) -> list[str]:
    if mem is None:
        return ["No memcheck report was given."]
    if "skipped" in mem:
        return [f"Skipped: {mem['skipped']}."]
    return [f"{mem['valgrind']}, {len(mem['files'])} kernel files ({', '.join(mem['files'])}), "
            f"{mem['kernels_called']} kernel calls ({mem['calls_refused']} refused by the argument checks).", "",
            f"Invalid reads: **{mem['invalid_reads']}**, invalid writes: **{mem['invalid_writes']}** "
            f"in the kernels' code; uses of uninitialised values in the kernels' code: "
            f"**{mem.get('uninitialised_in_kernels', '?')}**; "
            f"invalid accesses elsewhere (Python, numpy): {mem.get('invalid_outside_kernels', '?')}; "
            f"memcheck errors of every kind, Python's included: {mem['errors_total']}. The libraries were built "
            "for an AVX2 CPU (haswell): valgrind 3.19 does not run AVX-512 code."]


def recheck(bug: dict, seed: int) -> str:
    """What the current compiler makes of a reported bug's program: 'fixed since'
    when it now ends in success or located diagnostics (or agrees)."""
    from differential import run_case
    from fuzz_worker import classify_compile

    try:
        if str(bug["id"]).startswith("d"):
            result = run_case({"seed": seed * 1_000_003 + int(str(bug["id"])[1:])})
        elif bug.get("file") and Path(bug["file"]).exists():
            result = classify_compile("recheck.tk", Path(bug["file"]).read_text())
        else:
            return "not rechecked (program not kept)"
    except Exception as exc:  # still failing in the harness
        return f"still failing ({type(exc).__name__})"
    return "fixed since" if result["kind"] in ("ok", "diagnostic", "agree") else "STILL OPEN"


def _bug_lines(fuzz: dict | None, diff: dict | None) -> list[str]:
    out = []
    reports = [fuzz] if diff is fuzz else [fuzz, diff]
    for rep in [r for r in reports if r]:
        for b in rep.get("bugs", []):
            last = b["detail"].strip().splitlines()[-1] if b["detail"] else ""
            out.append(f"- `{b['id']}` ({b['origin']}, {recheck(b, rep['seed'])}): {last[:300]}")
    return out


def report(fuzz: dict | None, diff: dict | None, mem: dict | None) -> str:
    bugs = _bug_lines(fuzz, diff)
    lines = ["# Reliability figures", "",
             f"Written by `tests/fuzz/reliability_report.py` on {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}"
             f" ({machine()}); `make fuzz` reruns everything. The machine was shared with other work.", "",
             "## Fuzzing the front-end", "",
             "Random well-typed programs (`tests/fuzz/gen_programs.py`) and mutants of valid ones "
             "(`tests/fuzz/mutate.py`: token deletions, duplications, swaps and replacements, truncation, "
             "random bytes, nesting hundreds of levels deep, huge literals, unicode names and strings), "
             "compiled in worker processes (`tests/fuzz/run_fuzz.py`). A bug is any outcome other than "
             "success or located diagnostics.", ""]
    lines += _campaign_lines(fuzz)
    lines += ["", "## Crashes found and fixed", "", f"{len(FOUND)} found and fixed (`tests/fuzz/found.py`):", "",
              "| program | symptom | fix | regression test |", "|---|---|---|---|"]
    lines += [f"| {w} | {s} | {f} | `{t}` |" for w, s, f, t in FOUND]
    lines += ["", f"Bugs the runs below reported: {len(bugs)} (each rechecked with the compiler as it is now; the "
              "campaign ran while the fixes above went in, so a worker could still run older code):"]
    lines += bugs
    lines += ["", "## Differential testing", "",
              "Random kernels with random valid schedules (split, tile, reorder, unroll, fuse, parallel, vectorize, "
              "hoist; the automatic schedule; as written), compiled for this machine, against the reference "
              "interpreter on the unscheduled loop IR (`tests/fuzz/differential.py`). Integer programs must agree "
              "exactly; float programs (no jumps: no float comparisons, casts to integers, floor or "
              "transcendentals) within 1e-3 relative to 1 + |reference| (4e-3 for f16 outputs).", ""]
    lines += _diff_lines(diff)
    lines += ["", "## Memory safety", "", "valgrind memcheck over the example and standard-library kernels at sizes "
              "1, 3, 7, 17, on contiguous, reversed and Fortran-ordered inputs (`tests/hardening/memcheck.py`):", ""]
    lines += _memcheck_lines(mem)
    lines += ["", "Guard pages: `tests/hardening/test_guard_pages.py` (every example and stdlib kernel, arrays "
              "against a PROT_NONE page, sizes 1, 7, 17, 33, reversed views) and `tests/unit/test_vector_memory.py` "
              "(masked vector tails) run in `make test`.", "",
              "## Bad Python calls", "",
              f"Kinds of bad call in the tables of `tests/unit/test_args.py`: **{bad_call_kinds()}** "
              "(each raises the documented exception naming the kernel and the parameter, compiled and interpreted).",
              ""]
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fuzz", type=Path, help="run_fuzz.py report of the compile campaign")
    ap.add_argument("--diff", type=Path, help="run_fuzz.py report of the differential cases (default: --fuzz)")
    ap.add_argument("--memcheck", type=Path, help="memcheck.py report")
    ap.add_argument("-o", "--output", type=Path, default=ROOT / "RELIABILITY.md")
    args = ap.parse_args(argv)
    fuzz = _load(args.fuzz)
    diff = _load(args.diff) if args.diff else fuzz
    args.output.write_text(report(fuzz, diff, _load(args.memcheck)))
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
