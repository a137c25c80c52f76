"""BENCHMARKS.md from recorded results (`benchmarks/results.py`): one section
per script — what it measures (the script's docstring), the conditions (CPU,
date, threads, repeats, load average at start and end, flagged when the
machine was busy), its plots and its tables.

    text = compose(results.load(folder), plots={"gemm.py": [("GEMM", Path("docs/bench/gemm.png"))]},
                   base=Path("."))
"""

from __future__ import annotations

import ast
import os
from pathlib import Path

HERE = Path(__file__).resolve().parent
BUSY_LOAD = 1.5  # 1-minute load average above which a 2-core machine is not quiet
TITLES = {"overhead.py": "Compile time and call overhead", "gemm.py": "GEMM: benchmarks/gemm.tk against numpy",
          "dense.py": "The dense standard library (dsl.ops) against numpy and torch",
          "seed_bmm.py": "The seeds' strided batched matmul", "conv.py": "Convolutions against torch and im2col",
          "pointwise.py": "Pointwise ops, reductions, softmax and norms", "quant.py": "GGML's quantized formats",
          "tutorial.py": "The tutorial's steps"}
# Explanations that hold whatever the numbers (no numbers here: they go stale).
NOTES = {
    "dense.py": "Where the time goes in permute: each 16 x 16 tile is transposed in registers (for 4-byte elements, "
                "64 shuffles: two rounds inside 128-bit lanes, two moving whole lanes), which caps a core at about "
                "the rate it transposes data already in cache, below its copy bandwidth. A tile reads 16 rows of "
                "x side by side, more streams than the hardware prefetcher follows, so each tile asks for the next "
                "group of rows' lines into L2, and (4-byte tiles) for its next tile's lines, by then in L2, "
                "into L1, so that its loads do not wait on L2. The output's rows are streamed past the caches when they start "
                "on a line (an aligned output, as dsl.ops.permute allocates); np.empty's large arrays start 16 "
                "bytes past one, and rows of 64 elements cannot be shifted to a line, so those tiles are written "
                "through the cache, each store first reading the lines it fills. The tiles also start where the "
                "input's columns reach a line when they are long (the 4096 x 4096 matrix: numpy's x is 16 bytes "
                "past one), so that no tile reads half a line. Rows a power of two apart (that matrix) cost "
                "more: a tile's 16 stores then fall in one cache set, and so do the next tile's (in C, a "
                "1024 x 1024 f32 transpose held in L3 ran half as fast as 1040 x 1040; no order of the tiles "
                "we tried gave it back without slowing the copy from DRAM). Where the rows allow (4-byte "
                "elements, the input's rows in whole lines and a pair of them within L2), the tiles go in pairs, "
                "one above the other, so that each output row gets 128 bytes at a time, which also eases "
                "output rows a power of two apart (their 16 stores on the same low address bits). A whole reversal (2, 1, 0) "
                "reads each tile's 16 rows from 16 planes of x, a plane apart. The tiles take one group of 16 "
                "rows through 4 planes at a time, so that the reads are "
                "16 streams (all of a long row at once, or the rows read one after another into a buffer first, "
                "ran slower); on an Intel core "
                "with AVX-512, where the output's rows are short (up to 1 KiB, 4-byte elements), they go plane "
                "by plane instead, each output row written whole before the next (on Zen 4 that ran at half "
                "the speed). Each group's tiles write one line of every output row in a pass, 64 bytes in "
                "each of many places: in C, streamed stores of one line in each of 512 places in turn ran at 12 "
                "GB/s on this Zen 4, of 256 bytes at 22-26 GB/s. Output rows that start "
                "inside lines at different places (rows of 500 elements) take tiles whose rows each start at "
                "their own first whole line: such a tile reads up to twice as many rows of x and shifts each "
                "row of the transpose into place with one shuffle. The rows' first and last partial lines go "
                "to ordinary tiles in passes of their own, written through the cache: that is most of what "
                "these permutes lose against a copy. An image's pixels of 3 channels "
                "go to planes and back a register of pixels at a time, the channels shuffled out of the loaded "
                "pixels or into the stored ones.",
    "quant.py": "Where the time goes. Quantize: the k-quant searches are compute-bound, and each block's "
                "arithmetic is ggml's sequence exactly (one block per vector lane, regrouped into lanes by 16 x 16 "
                "transposes in registers; q4_K's and q5_K's searches run 32 blocks as two vectors, since "
                "each step waits on the last one's min; q6_K's runs its steps two at a time; what a search "
                "step does not change, such as the weights and the step's levels, waits in local arrays). "
                "The ratio to ggml moves by 10-20% between recordings on this shared machine. q8_0 is one pass over memory, 16 blocks "
                "at a time for the maxima, then each block scaled within itself. Both sides quantize into an array allocated once "
                "(dslc's `out=`). Matvec: the dots are DSL code on the "
                "target intrinsics `x86.maddubs`, `x86.madd` and `x86.sign` (`vpmaddubsw`, `vpmaddwd`, "
                "`vpsignb`), as ggml's AVX2 kernels are; each lane keeps its own f32 sum, reduced once per row. "
                "From DRAM both sides wait on memory; cache-resident, the count of instructions per block "
                "decides; on 2 threads q8_0 sits at 0.98-1.00x ggml from run to run (its activations are "
                "quantized by a native call of their own before the dots, on the calling thread, and cross to "
                "the other core). Each thread of a team runs the parallel loop's body out of line, the "
                "function a serial run calls: inlined into the thread team's entry, LLVM compiled q6_K's "
                "dots ~20% slower there (2 threads: 0.90 -> 1.10x ggml). A dslc call also "
                "runs Python around its native call (one for the k-quants, whose kernel quantizes the "
                "activations before the dots; two for q8_0), each step missing caches the weights have "
                "just swept: about 10-15 us a call after a 4096 x 4096 product against ~5 us in a hot "
                "loop, so what depends only on the type and shape is checked once per (type, shape).",
}
ORDER = ["overhead.py", "gemm.py", "dense.py", "seed_bmm.py", "conv.py", "pointwise.py", "quant.py", "tutorial.py"]


def compose(found: dict[str, dict], plots: dict[str, list] | None = None, base: Path = Path("."),
            missing: dict[str, str] | None = None) -> str:
    """The whole BENCHMARKS.md. `plots`: per script, (title, png path) pairs,
    linked relative to `base` (the folder the markdown goes to); `missing`:
    scripts that did not produce results, with why."""
    plots, missing = plots or {}, missing or {}
    scripts = [s for s in ORDER if s in found] + sorted(set(found) - set(ORDER))
    lines = ["# Benchmarks", "",
             "Generated by `make bench` (`benchmarks/report.py`) from the results the scripts in `benchmarks/` "
             "recorded (`--json`); edit the scripts or the report, not this file. Each reference library "
             "(numpy, torch, ggml, numba) is timed in the same process as dslc, as each section says.", ""]
    lines += _conditions_table(found, scripts), ""
    for name, why in sorted(missing.items()):
        lines += [f"**{name} did not run**: {why}", ""]
    for script in scripts:
        lines += section(found[script], plots.get(script, []), base)
    return "\n".join(lines).rstrip("\n") + "\n"


def section(data: dict, plots: list, base: Path) -> list[str]:
    """One script's section: title, what it measures, conditions, plots, tables."""
    script = data["script"]
    title, body = describe(script)
    out = [f"## {title} (`benchmarks/{script}`)", ""]
    if body:
        out += [body, ""]
    out += [conditions(data), ""]
    if is_busy(data):
        out += [f"**Machine busy**: the 1-minute load average was above {BUSY_LOAD} on "
                f"{data.get('cores') or '?'} cores while this ran, so times are inflated and noisy (the ratios, "
                "timed side by side, less so). Re-run on a quiet machine before quoting a number.", ""]
    for plot_title, path in plots:
        out += [f"![{plot_title}]({Path(os.path.relpath(path, base)).as_posix()})", ""]
    for t in data["tables"]:
        out += [f"### {t['title']}", "", markdown_table(t["columns"], t["rows"]), ""]
        if t.get("note"):
            out += [t["note"], ""]
    if script in NOTES:
        out += [NOTES[script], ""]
    return out


def describe(script: str) -> tuple[str, str]:
    """(title, what the script measures: its docstring, the usage line as code)."""
    path = HERE / script
    try:
        doc = ast.get_docstring(ast.parse(path.read_text())) or ""
    except (OSError, SyntaxError):
        doc = ""
    paragraphs = [p.strip() for p in doc.split("\n\n") if p.strip()]
    body = [f"`{p}`" if p.startswith("python ") else " ".join(p.split()) for p in paragraphs]
    title = TITLES.get(script) or (body[0].split(". ")[0].rstrip(".:") if body else script)
    return title, "\n\n".join(body)


def conditions(data: dict) -> str:
    """'Measured 2026-11-23 10:51 UTC on <CPU> (<machine>), ...; load average ...'."""
    parts = [f"Measured {data['started']} on {data.get('cpu_model') or 'an unnamed CPU'} ({data['machine']})"]
    parts.append(settings_text(data.get("settings", {})))
    versions = data.get("versions", {})
    if versions:
        parts.append(", ".join(f"{k} {v}" for k, v in versions.items()))
    if data.get("commit"):
        parts.append(f"commit {data['commit']}")
    argv = _without_json(data.get("argv", []))
    if argv:
        parts.append("arguments `" + " ".join(argv) + "`")
    text = "; ".join(p for p in parts if p)
    return f"{text}. Load average (1 min): {load_text(data)}."


def _without_json(argv: list[str]) -> list[str]:
    """The script's arguments less `--json PATH` (where the results went)."""
    out, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--json="):
            skip = False
        elif arg == "--json":
            skip = True
        else:
            out.append(arg)
    return out


def settings_text(settings: dict) -> str:
    words = []
    for key, value in settings.items():
        if key == "repeats":
            words.append(f"medians of {value} samples")
        elif key == "threads":
            words.append("threads " + ", ".join(map(str, value)) if isinstance(value, list) else f"threads {value}")
        elif key == "quick":
            if value:
                words.append("quick run (--quick: fewer sizes and samples)")
        else:
            words.append(f"{key} {value}")
    return ", ".join(words)


def load_text(data: dict) -> str:
    start, end = data.get("load_start") or [None], data.get("load_end") or [None]
    show = lambda x: "?" if x is None else f"{x:.2f}"  # noqa: E731
    return f"{show(start[0])} at start, {show(end[0])} at end"


def is_busy(data: dict) -> bool:
    loads = [x[0] for x in (data.get("load_start"), data.get("load_end")) if x]
    return any(load > BUSY_LOAD for load in loads)


def markdown_table(columns: list[str], rows: list[dict]) -> str:
    out = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(str(row.get(c, "")) for c in columns) + " |" for row in rows]
    return "\n".join(out)


def _conditions_table(found: dict[str, dict], scripts: list[str]) -> str:
    rows = []
    for script in scripts:
        data = found[script]
        rows.append({"script": f"`{script}`", "started": data["started"], "CPU": data.get("cpu_model", ""),
                     "load 1-min, start / end": load_text(data).replace(" at start, ", " / ").replace(" at end", ""),
                     "state": "**machine busy**" if is_busy(data) else "quiet"})
    return markdown_table(["script", "started", "CPU", "load 1-min, start / end", "state"], rows)
