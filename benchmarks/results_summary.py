"""The README's performance summary, made from the same recorded results as
BENCHMARKS.md (so the two cannot disagree): compile time and call overhead,
the GEMM table at 1 and 2 threads, and one line per other benchmark.

`update_readme` replaces the text between the two marker comments

    <!-- bench-summary:start -->  ...  <!-- bench-summary:end -->

and leaves the rest of README.md alone.
"""

from __future__ import annotations

from pathlib import Path

from results import number
from results_markdown import BUSY_LOAD, is_busy, markdown_table

START, END = "<!-- bench-summary:start -->", "<!-- bench-summary:end -->"

# (script, table, row label column, the row's label, columns shown: dslc first, then the reference)
HEADLINES = [
    ("dense.py", "batched", "case", "(1,128,256)@(64,256,128)", ("dslc GFLOP/s", "torch GFLOP/s"), "GFLOP/s"),
    ("dense.py", "matvec", "case", "matvec 4096x4096", ("dslc GB/s", "numpy GB/s"), "GB/s"),
    ("seed_bmm.py", "bmm", "batch a/b x I x K x J", "8/8 x 128x128x128", ("dslc index notation", "numpy"),
     "GFLOP/s"),
    ("conv.py", "conv", "case", "ResNet (8,56,56,64) 3x3 64->64 pad 1", ("dslc GFLOP/s", "torch GFLOP/s"),
     "GFLOP/s"),
    ("pointwise.py", "ops", "op", "add", ("dslc", "torch"), "GB/s"),
    ("quant.py", "matvec", "type", "q4_k", ("dslc L3", "ggml L3"), "ms"),
]


def summary(found: dict[str, dict]) -> str:
    """The markdown block (without the markers)."""
    if not found:
        return "No benchmark results yet: run `make bench`."
    loads = [x[0] for d in found.values() for x in (d.get("load_start"), d.get("load_end")) if x]
    busy = [s for s, d in found.items() if is_busy(d)]
    head = f"Measured by `make bench` on {_machines(found)}"
    if loads:
        head += f"; 1-minute load average {min(loads):.2f} to {max(loads):.2f}"
    during = "every script" if len(busy) == len(found) else ", ".join(sorted(busy))
    head += (f" — **the machine was busy** (load above {BUSY_LOAD}) during {during}: "
             "those numbers are low and noisy." if busy else ".")
    parts = [head + " Full tables and plots: [BENCHMARKS.md](BENCHMARKS.md).", ""]
    for block in (_overhead(found), _gemm(found), _headlines(found)):
        if block:
            parts += [block, ""]
    return "\n".join(parts).rstrip("\n")


def _machines(found: dict[str, dict]) -> str:
    """The machine and date of the runs; when scripts ran on different
    machines (a script recorded again elsewhere), each with its scripts."""
    groups: dict[str, list[str]] = {}
    for script, d in found.items():
        where = f"{d.get('cpu_model') or d['machine']} ({d['machine']}), {d['started'][:10]}"
        groups.setdefault(where, []).append(f"`{script}`")
    if len(groups) == 1:
        return next(iter(groups))
    return "; ".join(f"{where} ({', '.join(scripts)})" for where, scripts in groups.items())


def update_readme(path: Path, block: str) -> bool:
    """Put `block` between the markers of `path`; False (file untouched) when
    the markers are missing."""
    text = path.read_text()
    if START not in text or END not in text:
        return False
    before, rest = text.split(START, 1)
    _, after = rest.split(END, 1)
    path.write_text(f"{before}{START}\n{block}\n{END}{after}")
    return True


def _overhead(found: dict) -> str:
    rows = {r["measure"]: r for r in _rows(found, "overhead.py", "overhead")}
    if not rows:
        return ""
    cell = lambda key: rows.get(key, {}).get("median", "?")  # noqa: E731
    ms = lambda key: f"{number(cell(key)) * 1e3:.1f} ms" if number(cell(key)) is not None else "?"  # noqa: E731
    out = [{"what": "compile a kernel, cold (parse → LLVM -O3 → link)", "time": ms("compile, cold (s)")},
           {"what": "compile, found in the disk cache", "time": ms("compile, cached on disk (s)")},
           {"what": "Python call overhead (`@dsl.kernel` saxpy, N = 1)",
            "time": f"{cell('call overhead, saxpy N=1 (us)')} µs (numpy's `np.add`: "
                    f"{cell('numpy np.add N=1, for scale (us)')} µs)"}]
    return "`benchmarks/overhead.py`:\n\n" + markdown_table(["what", "time"], out)


def _gemm(found: dict) -> str:
    rows = _rows(found, "gemm.py", "gemm")
    if not rows:
        return ""
    by_size: dict[str, dict] = {}
    for r in rows:
        by_size.setdefault(r["M x K x N"], {})[r["threads"]] = r
    out = []
    for size, per in by_size.items():
        line = {"M×K×N": size}
        for t in ("1", "2"):
            r = per.get(t, {})
            line[f"dslc, {t}t"] = r.get("dslc GFLOP/s", "-")
            line[f"numpy, {t}t"] = r.get("numpy GFLOP/s", "-")
            line[f"ratio, {t}t"] = r.get("dslc/numpy", "-")
        out.append(line)
    columns = list(out[0])
    zen3 = ("\n\nBENCHMARKS.md also has the table as Zen 3 runs it: the kernel built for znver3 (AVX2) against "
            "OpenBLAS's AVX2 kernels, on the same machine." if _rows(found, "gemm.py", "gemm_zen3") else "")
    return ("GEMM f32 (`benchmarks/gemm.py`: the index-notation matmul of `benchmarks/gemm.tk` against numpy's "
            "OpenBLAS, interleaved in one process), GFLOP/s at 1 and 2 threads:\n\n" + markdown_table(columns, out)
            + zen3 + _peak_columns(rows))


def _peak_columns(rows: list[dict]) -> str:
    """A pointer to gemm.py's columns against the FMA peak, when recorded."""
    if not any("peak/numpy" in r for r in rows):
        return ""
    return ("\n\nBENCHMARKS.md's GEMM tables also give each case's share of the cores' FMA peak (an FMA loop "
            "timed alongside) and peak/numpy, the highest ratio to OpenBLAS any kernel could reach there.")


def _headlines(found: dict) -> str:
    out = []
    for script, key, label_col, label, (ours, theirs), unit in HEADLINES:
        row = next((r for r in _rows(found, script, key) if r.get(label_col) == label and r.get("threads", "1") == "1"),
                   None)
        if row is None or number(row.get(ours, "")) is None or number(row.get(theirs, "")) is None:
            continue
        mine, ref = number(row[ours]), number(row[theirs])
        faster = ref / mine if unit == "ms" else mine / ref  # above 1: dslc is faster
        out.append({"benchmark": f"`{script}`", "case (1 thread)": label, "dslc": f"{row[ours]} {unit}",
                    "reference": f"{row[theirs]} {unit} ({theirs.split()[0]})", "dslc speed / reference": f"{faster:.2f}"})
    if not out:
        return ""
    return markdown_table(["benchmark", "case (1 thread)", "dslc", "reference", "dslc speed / reference"], out)


def _rows(found: dict, script: str, key: str) -> list[dict]:
    data = found.get(script)
    if data is None:
        return []
    table = next((t for t in data["tables"] if t["key"] == key), None)
    return table["rows"] if table else []
