"""Benchmark results as data. Each script records the tables it prints here;
with `--json PATH` they are written to PATH, with the conditions they were
taken in (machine, CPU model, date, commit, load average at start and end,
repeats, threads, library versions). `benchmarks/report.py` turns a folder
of them into BENCHMARKS.md and plots.

    parser = argparse.ArgumentParser(...)
    results.add_json_option(parser)
    args = parser.parse_args()
    rec = results.start(args, repeats=5, threads=[1, 2])   # load average now
    ...
    rec.table("gemm", "GEMM f32, C = A @ B", header, rows)  # (re)writes PATH

A row is recorded as {column: cell} with the cell exactly as printed (text:
"106.6", "0.40", "-", "95%"); `number(cell)` reads one as a float.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys
from pathlib import Path

FORMAT = 1  # bump when the layout of the file changes


def add_json_option(parser) -> None:
    """`--json PATH` on a script's argparse parser."""
    parser.add_argument("--json", metavar="PATH",
                        help="also write the results, with machine, date and load average, as JSON to PATH "
                             "(benchmarks/report.py makes BENCHMARKS.md from them)")


def start(args=None, **settings) -> "Recorder":
    """A recorder for the running script, writing to `args.json` (if given);
    `settings` (repeats, threads, sizes, ...) describe the conditions."""
    path = getattr(args, "json", None) if args is not None else None
    return Recorder(Path(sys.argv[0]).name, path, settings)


class Recorder:
    """The tables of one run of one script; `table` rewrites the JSON file each
    time, so a run stopped halfway still leaves what it measured."""

    def __init__(self, script: str, path: str | None, settings: dict):
        self.path = Path(path) if path else None
        self.data = {
            "format": FORMAT, "script": script, "argv": sys.argv[1:], "settings": settings,
            "started": _now(), "finished": None, "load_start": _load(), "load_end": None,
            "machine": _machine(), "cpu_model": cpu_model(), "cores": os.cpu_count(),
            "commit": _commit(), "versions": {}, "tables": [],
        }

    def table(self, key: str, title: str, columns: list[str], rows: list[list], note: str = "") -> None:
        """Record one table (its cells as printed) and write the file. Rows are
        recorded by column name, so the names must differ."""
        columns = [str(c) for c in columns]
        repeated = sorted({c for c in columns if columns.count(c) > 1})
        if repeated:
            raise ValueError(f"table {key!r}: column names {repeated} repeat, and a row records one cell per name")
        records = [dict(zip(columns, (str(cell) for cell in row))) for row in rows]
        self.data["tables"] = [t for t in self.data["tables"] if t["key"] != key]
        self.data["tables"].append({"key": key, "title": title, "columns": columns, "rows": records, "note": note})
        self.write()

    def write(self) -> None:
        self.data.update(finished=_now(), load_end=_load(), versions=_versions())
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1) + "\n")
        os.replace(tmp, self.path)


def load(folder: Path) -> dict[str, dict]:
    """Every results file in `folder`, by script name ('gemm.py': {...})."""
    out = {}
    for path in sorted(Path(folder).glob("*.json")):
        data = json.loads(path.read_text())
        if isinstance(data, dict) and data.get("format") == FORMAT:
            out[data["script"]] = data
    return out


def number(cell) -> float | None:
    """A recorded cell as a float ('106.6' -> 106.6, '95%' -> 0.95), or None ('-', '')."""
    text = str(cell).strip()
    scale = 1.0
    if text.endswith("%"):
        text, scale = text[:-1], 0.01
    try:
        return float(text) * scale
    except ValueError:
        return None


def cpu_model() -> str:
    """The CPU's marketing name, from lscpu (or /proc/cpuinfo); '' if neither says."""
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.SubprocessError):
        out = ""
    for line in out.splitlines():
        if line.strip().lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def _machine() -> str:
    from common import machine

    return machine()


def _load() -> list[float]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return []


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _commit() -> str:
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                             cwd=Path(__file__).parent, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip() if out.returncode == 0 else ""


def _versions() -> dict:
    """Versions of the libraries this script imported (the references)."""
    names = ("numpy", "torch", "numba", "llvmlite", "threadpoolctl")
    found = {"python": platform.python_version()}
    for name in names:
        module = sys.modules.get(name)
        if module is not None and hasattr(module, "__version__"):
            found[name] = str(module.__version__)
    return found
