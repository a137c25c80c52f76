"""benchmarks/report.py's parts, on a small fixture of recorded results
(tests/unit/bench_results/*.json, made-up numbers): the recorder's file, the
markdown of BENCHMARKS.md, the README summary between its markers, and the
plots (only where matplotlib is installed). Nothing here times anything."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).resolve().parent / "bench_results"
sys.path.insert(0, str(ROOT / "benchmarks"))

import results  # noqa: E402
from results_markdown import compose, describe  # noqa: E402
from results_summary import END, START, summary, update_readme  # noqa: E402


@pytest.fixture(scope="module")
def found():
    return results.load(FIXTURE)


def test_recorder_writes_rows_with_named_columns_and_conditions(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["gemm.py", "--json", str(tmp_path / "gemm.json")])
    parser = argparse.ArgumentParser()
    results.add_json_option(parser)
    rec = results.start(parser.parse_args(sys.argv[1:]), repeats=3, threads=[1, 2])
    rec.table("gemm", "GEMM", ["size", "threads", "dslc GFLOP/s"], [["64x64x64", 1, "10.5"]])
    data = json.loads((tmp_path / "gemm.json").read_text())
    assert data["script"] == "gemm.py" and data["settings"] == {"repeats": 3, "threads": [1, 2]}
    assert data["tables"][0]["rows"] == [{"size": "64x64x64", "threads": "1", "dslc GFLOP/s": "10.5"}]
    assert len(data["load_start"]) == 3 and len(data["load_end"]) == 3
    assert "cores" in data["machine"] and data["started"].endswith("UTC")
    rec.table("gemm", "GEMM", ["size"], [["128x128x128"]])  # the same key again replaces the table
    assert len(json.loads((tmp_path / "gemm.json").read_text())["tables"]) == 1
    assert results.load(tmp_path)["gemm.py"]["tables"][0]["rows"] == [{"size": "128x128x128"}]
    with pytest.raises(ValueError, match=r"column names \['x'\] repeat"):  # a row would keep one of them
        rec.table("ratios", "Ratios", ["size", "x", "threads", "x"], [["64", "1.1", 1, "0.9"]])


def test_number_reads_cells_as_printed():
    assert results.number("106.6") == 106.6 and results.number("95%") == pytest.approx(0.95)
    assert results.number("-") is None and results.number("") is None and results.number("1.0e-07") == 1e-7


def test_markdown_has_every_table_with_its_conditions(found):
    text = compose(found)
    assert text.startswith("# Benchmarks\n")
    assert "| M x K x N | threads | dslc GFLOP/s | numpy GFLOP/s | dslc/numpy | rel err |" in text
    assert "| 512x3584x3584 | 2 | 227.0 | 280.0 | 0.81 | 3.0e-07 |" in text
    assert "| add | 1 | 11.00 | 10.10 | 10.40 | GB/s | 1.06 | 92% |" in text
    assert "Test CPU Model @ 2.80GHz (rocketlake, 2 cores, vector 512 bits)" in text
    assert "medians of 5 samples, threads 1, 2" in text
    assert "Load average (1 min): 0.31 at start, 0.52 at end." in text
    # Sections in pipeline order, each titled from the script's docstring.
    assert text.index("(`benchmarks/overhead.py`)") < text.index("(`benchmarks/gemm.py`)") \
        < text.index("(`benchmarks/pointwise.py`)")
    assert f"## {describe('gemm.py')[0]} (`benchmarks/gemm.py`)" in text


def test_busy_machine_is_flagged_only_where_it_was(found):
    text = compose(found)
    pointwise = text[text.index("(`benchmarks/pointwise.py`)"):]
    gemm = text[text.index("(`benchmarks/gemm.py`)"):text.index("(`benchmarks/pointwise.py`)")]
    assert "**Machine busy**" in pointwise and "4.87 at start, 5.12 at end" in pointwise
    assert "**Machine busy**" not in gemm
    assert "| `pointwise.py` |" in text and "**machine busy** |" in text


def test_a_script_that_failed_is_named(found):
    assert "**quant.py did not run**: exit status 1" in compose(found, missing={"quant.py": "exit status 1"})


def test_readme_summary_replaces_only_the_marked_block(found, tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text(f"# title\n\nbefore\n\n{START}\nold numbers\n{END}\n\nafter\n")
    assert update_readme(readme, summary(found))
    text = readme.read_text()
    assert text.startswith("# title\n\nbefore\n\n") and text.endswith(f"{END}\n\nafter\n")
    assert "old numbers" not in text
    assert "| 512x512x512 | 156.3 | 145.5 | 1.07 | 255.2 | 257.2 | 0.99 |" in text
    assert "121.0 ms" in text and "1.5 ms" in text and "0.40 µs" in text
    assert "the machine was busy" in text and "pointwise.py" in text
    assert "[BENCHMARKS.md](BENCHMARKS.md)" in text
    unmarked = tmp_path / "OTHER.md"
    unmarked.write_text("no markers\n")
    assert not update_readme(unmarked, "x") and unmarked.read_text() == "no markers\n"


def test_readme_summary_names_each_machine_when_scripts_ran_on_several(found):
    """One script recorded again on another machine: the summary's head says
    which scripts ran where, instead of naming the first machine for all."""
    assert summary(found).startswith("Measured by `make bench` on Test CPU Model @ 2.80GHz (rocketlake, ")
    moved = {**found, "gemm.py": {**found["gemm.py"], "cpu_model": "Other CPU", "started": "2026-12-01 10:00:00 UTC"}}
    head = summary(moved).split("\n", 1)[0]
    assert "Other CPU (" in head and ", 2026-12-01 (`gemm.py`)" in head
    assert "Test CPU Model @ 2.80GHz (" in head and "`overhead.py`" in head and "`gemm.py`, " not in head


@pytest.mark.skipif(importlib.util.find_spec("matplotlib") is None, reason="matplotlib (the bench extra) not installed")
def test_plots_are_drawn_and_linked(found, tmp_path):
    from results_plots import make_plots

    plots = make_plots(found, tmp_path / "plots")
    assert sorted(plots) == ["gemm.py", "pointwise.py"]  # overhead has nothing to plot
    for entries in plots.values():
        for _, path in entries:
            assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    text = compose(found, plots, tmp_path)
    assert "![SGEMM, dslc against numpy (OpenBLAS)](plots/gemm.png)" in text
    assert "(plots/pointwise_bandwidth.png)" in text


def test_no_plots_without_matplotlib(found, tmp_path, monkeypatch):
    import results_plots

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import fails as if not installed
    assert results_plots.make_plots(found, tmp_path / "plots") == {}
    assert not (tmp_path / "plots").exists()


FAKE_BENCHMARK = '''
import argparse
import results
from common import interleaved

parser = argparse.ArgumentParser()
results.add_json_option(parser)
rec = results.start(parser.parse_args(), repeats=1)
for case in ("small", "large"):
    interleaved({"noop": lambda: None}, 1, min_time=0.0)
    print(f"timed {case}", flush=True)
rec.table("cases", "Fake", ["case", "value"], [["small", "1.0"], ["large", "2.0"]])
'''


def test_runner_records_logs_and_shows_the_case_on_the_bar(tmp_path, monkeypatch):
    import io

    import report
    from dsl.progress import Progress

    (tmp_path / "fake.py").write_text(FAKE_BENCHMARK)
    monkeypatch.setenv("PYTHONPATH", str(ROOT / "benchmarks"))
    screen = io.StringIO()
    bar = Progress("bench", 1, stream=screen, enabled=True)
    assert report.run_script("fake.py", [], tmp_path / "out", bar, folder=tmp_path) is None
    bar.close()
    shown = screen.getvalue()
    assert "fake.py: 2 cases timed | timed large" in shown  # which script, how far, its last line
    assert "1-minute load average at start:" in shown and "1-minute load average at end:" in shown
    assert (tmp_path / "out" / "fake.txt").read_text() == "timed small\ntimed large\n"
    recorded = results.load(tmp_path / "out")["fake.py"]
    assert recorded["tables"][0]["rows"][1] == {"case": "large", "value": "2.0"}
    (tmp_path / "broken.py").write_text("raise SystemExit(3)\n")
    assert "exit status 3" in report.run_script("broken.py", [], tmp_path / "out", bar, folder=tmp_path)


def test_readme_summary_points_to_the_zen3_table_when_recorded(found):
    assert "as Zen 3 runs it" not in summary(found)
    gemm = found["gemm.py"]
    zen3 = {**gemm["tables"][0], "key": "gemm_zen3", "title": "GEMM f32 as Zen 3 runs it"}
    with_zen3 = {**found, "gemm.py": {**gemm, "tables": [*gemm["tables"], zen3]}}
    assert "BENCHMARKS.md also has the table as Zen 3 runs it" in summary(with_zen3)


def test_readme_summary_points_to_the_peak_columns_when_recorded(found):
    assert "FMA peak" not in summary(found)
    gemm = found["gemm.py"]
    table = gemm["tables"][0]
    rows = [{**r, "dslc % peak": "90", "peak/numpy": "1.20"} for r in table["rows"]]
    with_peak = {**found, "gemm.py": {**gemm, "tables": [{**table, "rows": rows}]}}
    text = summary(with_peak)
    assert "share of the cores' FMA peak" in text
    assert "|\n\nBENCHMARKS.md's GEMM tables" in text  # a paragraph of its own after the table
