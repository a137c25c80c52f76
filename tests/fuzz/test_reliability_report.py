"""RELIABILITY.md is written from the reports it is given, nothing else."""

from __future__ import annotations

import json

from reliability_report import bad_call_kinds, main


def test_bad_call_tables_are_counted():
    assert bad_call_kinds() >= 30


def test_report_shows_the_figures_it_is_given(tmp_path):
    fuzz = {"date": "2026-01-01 00:00 UTC", "machine": "m", "seed": 3, "programs": 20, "differential": 4,
            "finished": True, "compile": {"ok": 12, "diagnostic": 7, "bug": 1}, "diff": {"agree": 4},
            "bugs": [{"id": 5, "origin": "generated", "kind": "bug", "detail": "internal error X"}],
            "worker_restarts": 0, "seconds": 9.0}
    mem = {"files": ["examples/saxpy.tk"], "kernels_called": 12, "calls_refused": 0, "invalid_reads": 0,
           "invalid_writes": 0, "errors_total": 0, "valgrind": "valgrind-3.19.0"}
    (tmp_path / "f.json").write_text(json.dumps(fuzz))
    (tmp_path / "m.json").write_text(json.dumps(mem))
    out = tmp_path / "R.md"
    main(["--fuzz", str(tmp_path / "f.json"), "--memcheck", str(tmp_path / "m.json"), "-o", str(out)])
    text = out.read_text()
    assert "**20**" in text and "| bug | 1 |" in text and "internal error X" in text
    assert "Cases: **4**" in text and "Invalid reads: **0**" in text
    assert f"**{bad_call_kinds()}**" in text
