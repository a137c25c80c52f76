"""The fuzzer, CI-sized: generated programs must compile, and a short
campaign of generated and mutated programs must end every program in success
or located diagnostics (`make fuzz` runs the long campaign)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fuzz_worker import classify_compile
from gen_programs import programs
from run_fuzz import campaign


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(programs(), programs(exact=True), programs(smooth=True)))
def test_generated_programs_are_well_typed(text):
    result = classify_compile("gen.tk", text)
    assert result["kind"] == "ok", f"{result['detail']}\n{text}"


def test_short_campaign_has_no_bugs(tmp_path):
    report = campaign(programs=36, differential=0, seed=20261123, jobs=1, timeout=120, keep=tmp_path,
                      progress=False)
    assert sum(report["compile"].values()) == 36
    assert report["compile"].get("diagnostic", 0) > 0  # the mutants do break programs
    assert report["bugs"] == [], report["bugs"]


def test_short_differential_run_agrees(tmp_path):
    """Random kernels with random schedules, compiled == interpreted."""
    report = campaign(programs=0, differential=24, seed=20261123, jobs=1, timeout=120, keep=tmp_path,
                      progress=False)
    assert report["diff"].get("agree", 0) == 24, report["bugs"]
