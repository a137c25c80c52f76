"""Run every benchmark script and write BENCHMARKS.md, its plots and the
README's summary from what they recorded (`make bench`).

    python benchmarks/report.py                  # all scripts, full size (under 10 minutes)
    python benchmarks/report.py --quick          # a smoke run into build/bench-quick/ (a few minutes)
    python benchmarks/report.py --compose-only   # rewrite the report from the recorded JSON
    python benchmarks/report.py --only gemm.py,conv.py
    python benchmarks/report.py --out-dir /tmp/bench   # everything there, the repository untouched

Each script runs in its own process with `--json`, so its results and the
conditions (CPU, load average at start and end, threads, repeats) land in
benchmarks/results/<script>.json, and its printed tables in <script>.txt
beside it. On a terminal a progress bar shows the script running, how many
cases it has timed and the last line it printed; the 1-minute load average
is printed at the start and end of each script, and results taken above 1.5
are flagged "machine busy" in the report. Plots need matplotlib (the
`bench` extra); without it the report has tables only.
"""

from __future__ import annotations

import argparse
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import results
from dsl.progress import Progress
from results_markdown import compose
from results_plots import make_plots
from results_summary import summary, update_readme

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent

# (script, arguments of the full run, of the quick run). Full: 6.5 minutes in all on the 2-core Xeon
# with a warm compile cache, under a load average of 5 (quick: about 5 minutes there, cold cache).
SCRIPTS = [
    ("overhead.py", [], []),
    ("gemm.py", ["--zen3"], ["--quick"]),
    ("dense.py", [], ["--quick"]),
    ("seed_bmm.py", [], ["--quick"]),
    ("conv.py", [], ["--quick"]),
    ("pointwise.py", [], ["--quick"]),
    ("quant.py", [], ["--quick"]),
    ("tutorial.py", [], ["--rounds", "3", "--size", "256"]),
]


def run_script(script: str, args: list[str], out: Path, bar: Progress, folder: Path = HERE) -> str | None:
    """Run `folder/script` with --json into `out`; None on success, else why not."""
    json_path, log_path = out / (Path(script).stem + ".json"), out / (Path(script).stem + ".txt")
    out.mkdir(parents=True, exist_ok=True)
    json_path.unlink(missing_ok=True)
    with tempfile.NamedTemporaryFile(prefix="bench-status-", delete=False) as status:
        status_path = Path(status.name)
    env = dict(os.environ, BENCH_STATUS_FILE=str(status_path), DSL_NO_PROGRESS="1")
    say(bar, f"== {script} {' '.join(args)}  (1-minute load average at start: {load1()})")
    proc = subprocess.Popen([sys.executable, str(folder / script), "--json", str(json_path), *args], cwd=folder,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)
    lines: queue.Queue = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
    reader.start()
    last = ""
    with open(log_path, "w") as log:
        while proc.poll() is None or reader.is_alive() or not lines.empty():
            try:
                line = lines.get(timeout=0.5).rstrip("\n")
                log.write(line + "\n")
                say(bar, line)
                last = " ".join(line.split()) or last
            except queue.Empty:
                pass
            cases = status_path.stat().st_size if status_path.exists() else 0
            bar.step(f"{script}: {cases} cases timed" + (f" | {last}" if last else ""))
    status_path.unlink(missing_ok=True)
    say(bar, f"== {script} finished, exit status {proc.returncode}  (1-minute load average at end: {load1()})")
    if proc.returncode != 0:
        return f"exit status {proc.returncode} (output in {log_path})"
    return None if json_path.exists() else "no results recorded"


def say(bar: Progress, line: str) -> None:
    """A line of output: above the bar on a terminal, plainly otherwise."""
    if bar.enabled:
        bar.message(line)
    else:
        print(line, flush=True)


def load1() -> str:
    try:
        return f"{os.getloadavg()[0]:.2f}"
    except OSError:
        return "?"


def write_report(out: Path, markdown: Path, plots_dir: Path, readme: Path | None,
                 missing: dict[str, str]) -> None:
    found = results.load(out)
    plots = make_plots(found, plots_dir)
    if not plots and found:
        print("report: no plots (matplotlib is not installed: pip install -e \".[bench]\")", file=sys.stderr)
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text(compose(found, plots, markdown.parent, missing))
    print(f"report: wrote {markdown} ({len(found)} scripts, {sum(map(len, plots.values()))} plots)")
    if readme is not None:
        if update_readme(readme, summary(found)):
            print(f"report: updated the summary in {readme}")
        else:
            print(f"report: {readme} has no bench-summary markers; left alone", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="small sizes and few samples, into build/bench-quick/ (BENCHMARKS.md and README untouched)")
    parser.add_argument("--only", metavar="SCRIPTS", help="comma-separated scripts to run (the others' "
                        "recorded results are kept), e.g. gemm.py,conv.py")
    parser.add_argument("--compose-only", action="store_true", help="run nothing; rewrite the report from the JSON")
    parser.add_argument("--results", type=Path, help="folder of the JSON results (default: benchmarks/results, "
                        "or build/bench-quick/results with --quick)")
    parser.add_argument("--out-dir", type=Path, help="write BENCHMARKS.md, plots/ and results/ into this folder "
                        "instead (README untouched); --quick's default is build/bench-quick")
    parser.add_argument("--no-progress", action="store_true",
                        help="no progress bar (drawn only when stderr is a terminal; DSL_NO_PROGRESS=1 does the same)")
    args = parser.parse_args(argv)
    base = args.out_dir or (ROOT / "build" / "bench-quick" if args.quick else None)
    out = args.results or (base / "results" if base else HERE / "results")
    markdown = base / "BENCHMARKS.md" if base else ROOT / "BENCHMARKS.md"
    plots_dir = base / "plots" if base else ROOT / "docs" / "bench"
    readme = None if base else ROOT / "README.md"
    chosen = [s for s in SCRIPTS if not args.only or s[0] in args.only.split(",")]
    if args.only and len(chosen) != len(args.only.split(",")):
        parser.error(f"--only: known scripts are {', '.join(s[0] for s in SCRIPTS)}")
    missing: dict[str, str] = {}
    if not args.compose_only:
        with Progress("bench", len(chosen), enabled=None if not args.no_progress else False) as bar:
            for done, (script, full, quick) in enumerate(chosen):
                bar.update(done, script)
                started = time.monotonic()
                why = run_script(script, quick if args.quick else full, out, bar)
                say(bar, f"== {script}: {time.monotonic() - started:.0f} s")
                if why:
                    missing[script] = why
            bar.update(len(chosen), "done")
    write_report(out, markdown, plots_dir, readme, missing)
    for script, why in missing.items():
        print(f"report: {script} failed: {why}", file=sys.stderr)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
