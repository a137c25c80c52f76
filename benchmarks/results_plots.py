"""PNG plots of recorded results (matplotlib, the `bench` extra): GFLOP/s
against size for GEMM, and per case for convolutions, pointwise bandwidth and
the quantized matrix-vector product, dslc beside numpy, torch and ggml. One
panel per thread count.

    paths = make_plots(results.load(folder), Path("docs/bench"))   # {} without matplotlib
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from results import number


@dataclass(frozen=True)
class PlotSpec:
    name: str  # the file: <name>.png
    script: str
    table: str  # the recorded table's key
    title: str
    x: str  # the column naming each case
    series: tuple[str, ...]  # columns plotted, one line or bar colour each
    ylabel: str
    kind: str = "bars"  # "lines": x is a size ("512x512x512"); "bars": one group per case
    keep: Callable[[dict], bool] | None = None  # which rows
    reference: tuple[str, str, str] | None = None  # (table, column, label): a horizontal line per panel


SPECS = [
    PlotSpec("gemm", "gemm.py", "gemm", "SGEMM, dslc against numpy (OpenBLAS)", "M x K x N",
             ("dslc GFLOP/s", "numpy GFLOP/s"), "GFLOP/s", kind="lines"),
    PlotSpec("dense_sgemm", "dense.py", "sgemm", "SGEMM (dsl.ops.matmul) against numpy and torch", "case",
             ("dslc GFLOP/s", "numpy GFLOP/s", "torch GFLOP/s"), "GFLOP/s", kind="lines"),
    PlotSpec("conv", "conv.py", "conv", "Convolutions", "case",
             ("dslc GFLOP/s", "numpy GFLOP/s", "torch GFLOP/s"), "GFLOP/s"),
    PlotSpec("pointwise_bandwidth", "pointwise.py", "ops", "Pointwise bandwidth (memory-bound ops)", "op",
             ("dslc", "numpy", "torch"), "GB/s", keep=lambda row: row.get("unit") == "GB/s",
             reference=("stream", "STREAM triad GB/s", "STREAM triad")),
    PlotSpec("quant_matvec", "quant.py", "matvec", "Quantized matrix-vector product (lower is faster)", "type",
             ("ggml L3", "dslc L3", "ggml DRAM", "dslc DRAM"), "ms per call"),
    PlotSpec("seed_bmm", "seed_bmm.py", "bmm", "The seeds' batched matmul", "batch a/b x I x K x J",
             ("dslc seed as written", "dslc + contract(i)", "dslc index notation", "numba", "numpy"), "GFLOP/s"),
]


def make_plots(found: dict[str, dict], out_dir: Path, specs=SPECS) -> dict[str, list[tuple[str, Path]]]:
    """Draw every plot whose results exist; {script: [(title, png path)]}.
    Empty when matplotlib is not installed (`pip install -e ".[bench]"`)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    out_dir.mkdir(parents=True, exist_ok=True)
    made: dict[str, list] = {}
    for spec in specs:
        table = _table(found, spec.script, spec.table)
        if table is None:
            continue
        rows = [r for r in table["rows"] if spec.keep is None or spec.keep(r)]
        if not rows:
            continue
        path = out_dir / f"{spec.name}.png"
        _draw(plt, spec, rows, _reference(found, spec), path)
        made.setdefault(spec.script, []).append((spec.title, path))
    return made


def _draw(plt, spec: PlotSpec, rows: list[dict], reference: dict, path: Path) -> None:
    panels = sorted({r.get("threads", "") for r in rows}, key=lambda t: number(t) or 0)
    # Each panel scaled on its own: with shared axes, set_ylim(bottom=0) on the
    # first froze the top at its data and cut the 2-thread lines off.
    fig, axes = plt.subplots(1, len(panels), figsize=(6.4 * len(panels), 4.4), squeeze=False)
    for ax, threads in zip(axes[0], panels):
        mine = [r for r in rows if r.get("threads", "") == threads]
        (_lines if spec.kind == "lines" else _bars)(ax, spec, mine)
        if threads in reference:
            ax.axhline(reference[threads][0], color="grey", linestyle="--", label=reference[threads][1])
        ax.set_title(f"{threads} thread{'s' if threads != '1' else ''}" if threads else spec.title, fontsize=10)
        ax.set_ylabel(spec.ylabel)
        ax.set_ylim(bottom=0)
        ax.grid(True, axis="y", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(spec.title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _lines(ax, spec: PlotSpec, rows: list[dict]) -> None:
    """One line per series against the cube root of M*K*N (log scale)."""
    points = sorted(((size_of(r[spec.x]), r) for r in rows if size_of(r[spec.x]) is not None), key=lambda p: p[0])
    for column in spec.series:
        xs = [x for x, r in points if number(r.get(column, "")) is not None]
        ys = [number(r[column]) for x, r in points if number(r.get(column, "")) is not None]
        if xs:
            ax.plot(xs, ys, marker="o", label=column.replace(" GFLOP/s", ""))
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size: cube root of M x K x N")


def _bars(ax, spec: PlotSpec, rows: list[dict]) -> None:
    """A group of bars per case, one bar per series ('-': left out)."""
    width = 0.8 / len(spec.series)
    for k, column in enumerate(spec.series):
        xs = [i + (k - (len(spec.series) - 1) / 2) * width for i, r in enumerate(rows)
              if number(r.get(column, "")) is not None]
        ys = [number(r[column]) for r in rows if number(r.get(column, "")) is not None]
        if xs:
            ax.bar(xs, ys, width, label=column.replace(" GFLOP/s", ""))
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_wrap(r[spec.x]) for r in rows], fontsize=7, rotation=30, ha="right")


def size_of(label: str) -> float | None:
    """'512x3584x3584' -> the cube root of the product; None if not a size,
    or a product of a few rows ('2x512x512': a curve of sizes would put it
    among 80^3's, which it is not like)."""
    dims = re.findall(r"\d+", label)
    if len(dims) != 3 or not re.fullmatch(r"\s*\d+\s*x\s*\d+\s*x\s*\d+\s*", label):
        return None
    if int(dims[0]) * 16 < max(int(d) for d in dims):
        return None
    return math.prod(int(d) for d in dims) ** (1 / 3)


def _reference(found: dict, spec: PlotSpec) -> dict:
    """{threads: (value, label)} of the spec's reference line."""
    if spec.reference is None:
        return {}
    key, column, label = spec.reference
    table = _table(found, spec.script, key)
    if table is None:
        return {}
    return {r.get("threads", ""): (number(r[column]), label) for r in table["rows"]
            if number(r.get(column, "")) is not None}


def _table(found: dict, script: str, key: str) -> dict | None:
    data = found.get(script)
    if data is None:
        return None
    return next((t for t in data["tables"] if t["key"] == key), None)


def _wrap(label: str, width: int = 22) -> str:
    words, lines, line = label.split(), [], ""
    for w in words:
        if line and len(line) + 1 + len(w) > width:
            lines.append(line)
            line = w
        else:
            line = f"{line} {w}".strip()
    return "\n".join(lines + [line])
