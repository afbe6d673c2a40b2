"""The report's SR-estimation section appears only for runs that estimated the SR period (issue 18)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from cellab.records import PlannedRun
from cellab.report import page as report
from cellab.results.store import ResultStore


def folder(tmp_path: Path, runs: list[dict[str, Any]], workload: dict[str, Any] | None = None) -> Path:
    campaign = {"name": "sr", "lab": "virtual", "factors": {"cc": ["cubic", "bbr"]}, "fixed": {"sr_period_ms": 20}}
    if workload:
        campaign["workload"] = workload
    planned = [PlannedRun(index=i, run_id=f"r{i:03d}", repeat=0, factors={"cc": "cubic"}, params={})
               for i in range(len(runs))]
    store = ResultStore.create(tmp_path, "sr", yaml.safe_dump(campaign, sort_keys=False), planned)
    for run, metrics in zip(planned, runs, strict=True):
        store.start(run)
        store.finish(run, "ok", metrics=metrics, error=None)
    return store.root


def sections(html: str) -> set[str]:
    return set(re.findall(r'<section id="([^"]+)"', html))


def test_a_shootout_whose_flows_named_no_period_has_no_sr_section(tmp_path):
    runs = [{"throughput_bps": 9e6, "sr_regime": "unknown"} for _ in range(14)]
    html = report.write_report(folder(tmp_path, runs, {"tool": "probe", "duration_s": 8})).read_text()
    assert "sr" not in sections(html) and "Correct:" not in html, sections(html)


def test_sr_probes_that_found_nothing_are_scored_as_misses(tmp_path):
    runs = [{"throughput_bps": 1e6, "sr_regime": "unknown"} for _ in range(3)]
    html = report.write_report(folder(tmp_path, runs, {"tool": "probe", "sr_probes": 30})).read_text()
    assert "sr" in sections(html) and "Correct: 0 of 3 runs (0 %)" in html


def test_a_run_that_named_a_period_brings_the_section(tmp_path):
    runs = [{"sr_regime": "sr-limited", "sr_estimate_ms": 20.0}, {"sr_regime": "unknown"}]
    html = report.write_report(folder(tmp_path, runs)).read_text()
    assert "Correct: 1 of 2 runs (50 %)" in html


def test_the_section_says_which_clock_the_estimates_were_read_on(tmp_path):
    runs = [{"sr_regime": "sr-limited", "sr_estimate_ms": 20.0, "sr_clock": "stack"},
            {"sr_regime": "sr-limited", "sr_estimate_ms": 20.0, "sr_clock": "stack"},
            {"sr_regime": "sr-limited", "sr_estimate_ms": 20.0, "sr_clock": "wall"}]
    html = report.write_report(folder(tmp_path, runs)).read_text()
    assert "Estimates read on: the stack clock in 2 runs, the wall clock in 1 run." in html
