"""The campaign report from synthetic result folders: sections appear exactly when their data exists."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from cellab.records import PlannedRun
from cellab.report import page as report
from cellab.results.store import ResultStore
from cellab.results.store_check import read_folder

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

SECTION_IDS = ("throughput-delay", "cdfs", "sr", "network", "timelines")
ALWAYS = {"runs", "conditions", "repeats"}  # every report: the run table, the conditions, each cell's repeats


# --- synthetic result folders -------------------------------------------------------------------
def make_folder(tmp_path: Path, factors: dict[str, list[Any]], runs: list[tuple[dict, str, dict | None]],
                fixed: dict[str, Any] | None = None) -> Path:
    """A result folder: the campaign's factors, then (factors, status, metrics) per run, in plan order."""
    campaign = {"name": "synthetic", "lab": "virtual", "factors": factors, "fixed": fixed or {}}
    planned = [PlannedRun(index=i, run_id=f"r{i:03d}", repeat=0, factors=f, params={})
               for i, (f, _, _) in enumerate(runs)]
    store = ResultStore.create(tmp_path, "synthetic", yaml.safe_dump(campaign, sort_keys=False), planned)
    for run, (_, status, metrics) in zip(planned, runs, strict=True):
        store.start(run)
        store.finish(run, status, metrics=metrics, error=None if status == "ok" else "boom")
    return store.root


def full_metrics(rng: np.random.Generator, rate_mbit: float, delay_ms: float, *, sr_true_ms: int = 20,
                 sr_estimate_ms: int | None = 20, points: int = 200) -> dict[str, Any]:
    """Every metric of docs/metrics.md, made up but shaped like a real run."""
    t_s = np.linspace(0, 10, points)
    capacity = rate_mbit * 1e6 * (1.2 + 0.3 * np.sin(t_s))
    throughput = capacity * rng.uniform(0.6, 0.95, points)
    rtt = delay_ms + rng.gamma(2.0, delay_ms / 4, points)
    metrics: dict[str, Any] = {
        "throughput_bps": float(throughput.mean()), "capacity_bps": float(capacity.mean()),
        "utilization": float(throughput.mean() / capacity.mean()),
        "rtt_mean_ms": float(rtt.mean()), "rtt_p95_ms": float(np.percentile(rtt, 95)),
        "retransmits": int(rng.integers(0, 50)), "fct_mean_s": 1.5, "jain_fairness": 0.98,
        "sr_true_ms": sr_true_ms, "sr_regime": "sr-limited" if sr_true_ms >= 20 else "not-sr-limited",
        "rtt_series_ms": rtt.tolist(), "throughput_series_bps": throughput[::20].tolist(),
        "ack_gap_ms": rng.exponential(sr_true_ms / 4, 100).tolist(),
        "timeline": {"attenuation_db": {"t_s": [0, 5], "v": [10, 30]},
                     "capacity_bps": {"t_s": t_s.tolist(), "v": capacity.tolist()},
                     "throughput_bps": {"t_s": t_s.tolist(), "v": throughput.tolist()},
                     "rtt_ms": {"t_s": t_s.tolist(), "v": rtt.tolist()}},
    }
    if sr_estimate_ms is not None:
        metrics["sr_estimate_ms"] = sr_estimate_ms
    return metrics


def campaign_folder(tmp_path: Path, *, repeats: int = 2, networks: tuple[str, ...] = ("lab", "commercial")) -> Path:
    rng = np.random.default_rng(7)
    factors = {"cc": ["cubic", "bbr"], "receiver": ["none", "exll"], "network": list(networks)}
    runs = []
    for cc in factors["cc"]:
        for receiver in factors["receiver"]:
            for network in networks:
                for _ in range(repeats):
                    f = {"cc": cc, "receiver": receiver, "network": network}
                    runs.append((f, "ok", full_metrics(rng, 8 if cc == "bbr" else 10, 30 if network == "lab" else 45)))
    runs.append(({"cc": "cubic", "receiver": "none", "network": networks[0]}, "failed", None))
    return make_folder(tmp_path, factors, runs)


def section_ids(html: str) -> set[str]:
    return set(re.findall(r'<section id="([^"]+)"', html))


def figure_names(html: str) -> list[str]:
    return re.findall(r'<a href="report/([^"]+)\.png">PNG</a>', html)


# --- units ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("cc", "receiver", "label"), [
    ("cubic", None, "cubic"), ("cubic", "none", "cubic"), ("cubic", "exll", "cubic+exll-rx"),
    ("bbr", "dfcsd", "bbr+dfcsd-rx"), ("cubic", "exll-rx", "cubic+exll-rx"), (None, None, "default"),
])
def test_scheme_label(cc, receiver, label):
    assert report.scheme_label(cc, receiver) == label


def test_ks_statistic_on_known_samples():
    same = np.arange(50.0)
    assert report.ks_2samp(same, same) == (0.0, 1.0)
    d, p = report.ks_2samp(np.arange(50.0), np.arange(100.0, 150.0))
    assert d == 1.0 and p < 1e-8
    d, _ = report.ks_2samp([1, 2, 3, 4], [3, 4, 5, 6])
    assert d == pytest.approx(0.5)
    with pytest.raises(ValueError):
        report.ks_2samp([], [1.0])


def test_ks_p_value_large_identical_distributions_is_not_significant():
    rng = np.random.default_rng(1)
    _, p = report.ks_2samp(rng.normal(size=2000), rng.normal(size=2000))
    assert p > 0.01
    d, p = report.ks_2samp(rng.normal(size=2000), rng.normal(0.5, size=2000))
    assert 0.1 < d < 0.3 and p < 1e-10


# --- the whole report -------------------------------------------------------------------------
def test_full_campaign_has_every_section_and_self_contained_html(tmp_path):
    folder = campaign_folder(tmp_path)
    path = report.write_report(folder)
    html = path.read_text()
    assert path == folder / "report.html"
    assert section_ids(html) == {*SECTION_IDS, *ALWAYS, "comparisons", "stratified"}  # cc within each network
    assert not re.search(r"https?://", html) and "<script" not in html  # offline, no JS
    names = figure_names(html)
    assert {"throughput-vs-delay", "rtt-cdf", "throughput-cdf", "sr-confusion", "network-cdfs"} <= set(names)
    assert len([n for n in names if n.startswith("timeline-")]) == 16  # one per ok run, the failed one has none
    assert html.count("data:image/png;base64,") == len(names)
    for name in names:
        assert (folder / "report" / f"{name}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert b"<svg" in (folder / "report" / f"{name}.svg").read_bytes()[:1000]
    for header in ("throughput (Mbit/s)", "RTT p95 (ms)", "utilization", "retransmits", "FCT mean (s)",
                   "Jain index", "SR true (ms)", "SR estimate (ms)", "SR regime", "scheme"):
        assert f"<th>{header}</th>" in html
    assert "cubic+exll-rx" in html and "bbr+exll-rx" in html
    summary = json.loads((folder / "report" / "summary.json").read_text())
    assert len(summary) == 17 and summary[0]["scheme"] == "cubic"
    stats = json.loads((folder / "report" / "comparisons.json").read_text())
    assert {(c["factor"], c["level"], c["baseline"]) for c in stats["comparisons"]} == {
        ("cc", "bbr", "cubic"), ("receiver", "exll", "none"), ("network", "commercial", "lab")}
    assert "rtt_series_ms" not in summary[0]["metrics"] and "throughput_bps" in summary[0]["metrics"]


def test_sections_absent_without_their_data(tmp_path):
    runs = [({"cc": "cubic"}, "ok", {"throughput_bps": 5e6}), ({"cc": "bbr"}, "ok", {"rtt_mean_ms": 40.0}),
            ({"cc": "bbr"}, "failed", None)]
    folder = make_folder(tmp_path, {"cc": ["cubic", "bbr"]}, runs)
    html = report.write_report(folder).read_text()
    assert section_ids(html) == {*ALWAYS, "comparisons"}  # bbr vs cubic: too few runs, said so
    assert "too few runs" in html
    assert "No plots" in html
    assert "<th>throughput (Mbit/s)</th>" in html and "<th>RTT mean (ms)</th>" in html
    assert "<th>RTT p95 (ms)</th>" not in html and "SR estimate" not in html
    assert "5.00" in html and "boom" in html
    assert sorted(p.name for p in (folder / "report").iterdir()) == ["comparisons.json", "summary.json"]


def test_only_failed_runs_still_give_a_report(tmp_path):
    folder = make_folder(tmp_path, {"cc": ["cubic"]}, [({"cc": "cubic"}, "failed", None)])
    html = report.write_report(folder).read_text()
    assert section_ids(html) == ALWAYS and "status-failed" in html


def test_each_plot_needs_only_its_own_metrics(tmp_path):
    runs = [({"cc": "cubic"}, "ok", {"throughput_bps": 5e6, "rtt_p95_ms": 50.0}),
            ({"cc": "cubic"}, "ok", {"rtt_series_ms": [10.0, 20.0, 30.0]}),
            ({"cc": "cubic"}, "ok", {"timeline": {"rtt_ms": {"t_s": [0, 1, 2], "v": [10, 12, 11]}}}),
            ({"cc": "cubic"}, "ok", {"timeline": {}})]  # an empty timeline gives no figure
    folder = make_folder(tmp_path, {"cc": ["cubic"]}, runs)
    html = report.write_report(folder).read_text()
    assert section_ids(html) == {"throughput-delay", "cdfs", "timelines", "comparisons", *ALWAYS}
    assert figure_names(html) == ["throughput-vs-delay", "rtt-cdf", "timeline-002-r002"]


def test_sr_confusion_matrix_counts(tmp_path):
    pairs = [(10, 10), (10, 10), (10, 20), (20, 20), (20, None), (40, 40), (40, 80)]
    runs = [({"cc": "cubic", "sr_period_ms": t}, "ok", {"sr_true_ms": t, "sr_regime": "sr-limited",
                                                        **({"sr_estimate_ms": e} if e else {})}) for t, e in pairs]
    folder = make_folder(tmp_path, {"cc": ["cubic"], "sr_period_ms": [10, 20, 40]}, runs)
    matrix = report.sr_confusion(report.load_runs(read_folder(folder)), {})
    assert matrix.true_labels == ["10", "20", "40"]
    assert matrix.estimate_labels == ["10", "20", "40", "80", "none"]
    assert matrix.counts.tolist() == [[2, 1, 0, 0, 0], [0, 1, 0, 0, 1], [0, 0, 1, 1, 0]]
    assert (matrix.correct, matrix.total, matrix.without_truth) == (4, 7, 0)
    html = report.write_report(folder).read_text()
    assert "Correct: 4 of 7 runs (57 %)" in html and "sr" in section_ids(html)
    assert '<td class="hit">2</td>' in html
    assert "<th>sr-limited</th>" in html


def test_sr_truth_from_the_factor_or_fixed_setting(tmp_path):
    runs = [({"sr_period_ms": 5}, "ok", {"sr_estimate_ms": 5.0}), ({"sr_period_ms": 80}, "ok", {"sr_estimate_ms": 40}),
            ({"sr_period_ms": 80}, "ok", {"sr_regime": "unknown"})]
    folder = make_folder(tmp_path, {"sr_period_ms": [5, 80]}, runs)
    matrix = report.sr_confusion(report.load_runs(read_folder(folder)), {})
    assert matrix.true_labels == ["5", "80"] and matrix.estimate_labels == ["5", "40", "80", "none"]
    assert matrix.counts.tolist() == [[1, 0, 0, 0], [0, 1, 0, 1]] and matrix.correct == 1
    fixed_only = [({"cc": "cubic"}, "ok", {"sr_estimate_ms": 20})]
    matrix = report.sr_confusion(report.load_runs(read_folder(make_folder(tmp_path, {"cc": ["cubic"]},
                                 fixed_only, fixed={"sr_period_ms": 20}))), {"sr_period_ms": 20})
    assert matrix.counts.tolist() == [[1]] and matrix.correct == 1


def test_network_comparison_ks_table(tmp_path):
    same = {"rtt_series_ms": [10.0, 20.0, 30.0, 40.0], "throughput_series_bps": [1e6, 2e6]}
    runs = [({"network": "lab"}, "ok", {**same, "ack_gap_ms": [1.0, 2.0, 3.0]}),
            ({"network": "commercial"}, "ok", {**same, "ack_gap_ms": [10.0, 20.0]}),
            ({"network": "other"}, "ok", {"rtt_series_ms": [100.0, 200.0]})]
    folder = make_folder(tmp_path, {"network": ["lab", "commercial", "other"]}, runs)
    html = report.write_report(folder).read_text()
    assert "network" in section_ids(html) and "lab vs commercial vs other" in html
    rows = re.findall(r'<td class="left">([^<]+)</td><td class="left">([^<]+)</td><td>([^<]+)</td>', html)
    ks = {(dist, pair): d for dist, pair, d in rows}
    assert ks[("RTT (ms)", "lab vs commercial")] == "0.000"
    assert ks[("RTT (ms)", "lab vs other")] == "1.000"
    assert ks[("ACK gap (ms)", "lab vs commercial")] == "1.000"
    assert ks[("throughput per interval (Mbit/s)", "lab vs commercial")] == "0.000"
    assert ks[("throughput per interval (Mbit/s)", "lab vs other")] == "no samples"  # other has no throughput series


def test_one_network_value_gives_no_comparison(tmp_path):
    runs = [({"network": "lab", "cc": c}, "ok", {"rtt_series_ms": [1.0, 2.0]}) for c in ("cubic", "bbr")]
    folder = make_folder(tmp_path, {"network": ["lab"], "cc": ["cubic", "bbr"]}, runs)
    assert "network" not in section_ids(report.write_report(folder).read_text())


def test_scatter_is_faceted_by_the_other_factors(tmp_path):
    runs = [({"cc": cc, "channel": ch, "n_prb": 25}, "ok", {"throughput_bps": 1e6, "rtt_p95_ms": 20.0})
            for cc in ("cubic", "bbr") for ch in ("static", "mobile")]
    folder = make_folder(tmp_path, {"cc": ["cubic", "bbr"], "channel": ["static", "mobile"], "n_prb": [25]}, runs)
    runs_ = [r for r in report.load_runs(read_folder(folder)) if r.ok]
    names = report._assign_facets(runs_, ["cc", "channel", "n_prb"])
    order = report.ValueOrder({"channel": ["static", "mobile"]})
    facets = report._facet_order(runs_, order, names)
    assert names == ["channel"] and facets == ["channel=static", "channel=mobile"]  # campaign order, n_prb fixed
    panels = report.scatter_panels(runs_, facets)
    assert [p.title for p in panels] == facets and [len(p.points) for p in panels] == [2, 2]
    assert {p.scheme for p in panels[0].points} == {"cubic", "bbr"}


def test_many_facets_split_over_several_figures(tmp_path):
    runs = [({"cc": "cubic", "n_prb": n}, "ok", {"throughput_bps": 1e6, "rtt_p95_ms": 20.0}) for n in range(12)]
    folder = make_folder(tmp_path, {"cc": ["cubic"], "n_prb": list(range(12))}, runs)
    names = figure_names(report.write_report(folder).read_text())
    assert names == ["throughput-vs-delay", "throughput-vs-delay-2"]


def test_timelines_beyond_the_inline_limit_are_linked(tmp_path, monkeypatch):
    monkeypatch.setattr(report, "MAX_INLINE_TIMELINES", 3)
    timeline = {"throughput_bps": {"t_s": [0, 1, 2], "v": [1e6, 2e6, 1.5e6]}}
    folder = make_folder(tmp_path, {"seed": list(range(5))}, [({"seed": i}, "ok", {"timeline": timeline})
                                                             for i in range(5)])
    html = report.write_report(folder).read_text()
    assert html.count("data:image/png;base64,") == 3
    assert "2 of 5 timelines are not shown inline" in html
    assert '<a href="report/timeline-003-r003.png">' in html and '<a href="report/timeline-004-r004.png">' in html
    assert len(list((folder / "report").glob("timeline-*.svg"))) == 5


def test_rebuild_drops_figures_that_no_longer_exist(tmp_path):
    folder = make_folder(tmp_path, {"cc": ["cubic"]}, [({"cc": "cubic"}, "ok", {"rtt_series_ms": [1.0, 2.0]})])
    report.write_report(folder)
    stale = folder / "report" / "timeline-999-gone.png"
    stale.write_bytes(b"old")
    report.write_report(folder)
    assert not stale.exists() and (folder / "report" / "rtt-cdf.svg").exists()


def test_long_series_are_thinned_keeping_extremes():
    from cellab.report import timeline

    t_s = np.arange(100_000, dtype=float)
    v = np.zeros(100_000)
    v[54_321] = 99.0
    t, w = timeline.thin(t_s, v, max_points=1000)
    assert t.size <= 1000 and w.max() == 99.0 and np.all(np.diff(t) > 0)


# extended: 64 figures, 11 s. make test keeps the same claims at small scale: the inline cap, the note and the
# linked files in test_timelines_beyond_the_inline_limit_are_linked, a PNG per ok run in
# test_full_campaign_has_every_section_and_self_contained_html
@pytest.mark.extended
def test_sixty_runs_render(tmp_path):
    """Functional only: how fast is `python -m cellab.bench report` (cellab/report/bench.py)."""
    rng = np.random.default_rng(3)
    factors = {"cc": ["cubic", "bbr", "c2tcp"], "channel": ["static", "mobile"], "seed": list(range(10))}
    runs = [({"cc": cc, "channel": ch, "seed": s}, "ok", full_metrics(rng, 10, 40, points=2000))
            for cc in factors["cc"] for ch in factors["channel"] for s in factors["seed"]]
    folder = make_folder(tmp_path, factors, runs)
    html = report.write_report(folder).read_text()
    assert html.count("data:image/png;base64,") <= report.MAX_INLINE_TIMELINES + 10
    assert "20 of 60 timelines are not shown inline" in html
    assert len(list((folder / "report").glob("timeline-*.png"))) == 60


def test_runs_section_names_the_downlink_queue_the_runs_used(tmp_path):
    campaign = {"name": "queues", "lab": "virtual", "factors": {"cc": ["cubic"]}, "fixed": {}}
    planned = [PlannedRun(index=i, run_id=f"q{i}", repeat=0, factors={"cc": "cubic"},
                          params={"cc": "cubic", "rlc_queue": queue}) for i, queue in enumerate(["srsenb", 4194304])]
    store = ResultStore.create(tmp_path, "queues", yaml.safe_dump(campaign), planned)
    html = report.write_report(store.root).read_text()
    assert "Downlink queue (rlc_queue): 4194304 bytes (4 MiB), srsenb (srsenb&#39;s own queue" in html
    assert "Downlink queue" not in report.write_report(make_folder(tmp_path / "none", {"cc": ["cubic"]},
                                                                  [({"cc": "cubic"}, "failed", None)])).read_text()
