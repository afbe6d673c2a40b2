"""The report leads with the campaign's answer, says under which conditions, and draws honest axes: the first
section is the SR accuracy (SR campaigns) or the comparison table; a conditions block with units; panels of one
comparison share their axes; no axis magnifies noise; an empty panel says so; figures drawn in parallel are
the figures drawn in one process."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET

import numpy as np
import pytest

from cellab.report import page as report

from cellab.report import plots
from cellab.report.timeline import timeline, timeline_data, timeline_limits
from cellab.tests.test_report import full_metrics, make_folder

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)


def section_order(html: str) -> list[str]:
    return re.findall(r'<section id="([^"]+)"', html)


def shootout(tmp_path, repeats: int = 3):
    rng = np.random.default_rng(2)
    factors = {"cc": ["cubic", "bbr"], "channel": ["static", "mobile"]}
    runs = []
    for cc in factors["cc"]:
        for ch in factors["channel"]:
            for _ in range(repeats):
                m = full_metrics(rng, 5 if cc == "bbr" else 10, 30, points=50)
                m["rtt_source"] = "sender tcp_info"
                m.pop("sr_estimate_ms")
                runs.append(({"cc": cc, "channel": ch}, "ok", m))
    fixed = {"n_prb": 25, "core_delay_ms": 10, "attenuation_db": 20, "rlc_queue": 4194304, "sr_period_ms": 20}
    return make_folder(tmp_path, factors, runs, fixed=fixed)


def test_a_shootout_leads_with_the_comparison_table(tmp_path):
    folder = shootout(tmp_path)
    html = report.write_report(folder).read_text()
    assert section_order(html)[:2] == ["comparisons", "conditions"]
    assert "sr" not in section_order(html)
    row = re.search(r'<td class="left">cc</td><td class="left">bbr vs cubic</td><td>6 / 6</td><td>([^<]+)</td>'
                    r'<td class="left nowrap">×([0-9.]+) \[([0-9.]+), ([0-9.]+)\]</td><td>([^<]+)</td>', html)
    assert row, html[html.index('id="comparisons"'):][:3000]
    ratio, low, high = (float(row.group(i)) for i in (2, 3, 4))
    assert 0.4 < low <= ratio <= high < 0.65  # bbr at half cubic's rate
    assert float(row.group(5)) < 0.01
    stats = json.loads((folder / "report" / "comparisons.json").read_text())
    (cc,) = [c for c in stats["comparisons"] if c["factor"] == "cc"]
    assert cc["baseline"] == "cubic" and cc["level"] == "bbr" and cc["runs_level"] == 6
    assert cc["throughput_bps"]["ratio"] == pytest.approx(ratio, abs=0.01)
    assert cc["throughput_bps"]["low"] <= cc["throughput_bps"]["ratio"] <= cc["throughput_bps"]["high"]
    assert {"ratio", "low", "high", "p_value", "n_base", "n_level"} <= set(cc["rtt_p95_ms"])


def test_one_run_a_side_says_too_few_runs(tmp_path):
    runs = [({"cc": cc}, "ok", {"throughput_bps": rate, "rtt_p95_ms": 30.0}) for cc, rate in (("cubic", 1e7), ("bbr", 5e6))]
    html = report.write_report(make_folder(tmp_path, {"cc": ["cubic", "bbr"]}, runs)).read_text()
    comparisons = html[html.index('id="comparisons"'):html.index('id="conditions"')]
    assert "×0.50 (too few runs (1 vs 1; 2 per side needed))" in comparisons
    assert "[" not in comparisons.replace("[95 % CI]", "")


def test_conditions_name_units_workload_and_rtt_source(tmp_path):
    html = report.write_report(shootout(tmp_path)).read_text()
    block = html[html.index('id="conditions"'):]
    block = block[:block.index("</section>")]
    for text in ("n_prb = 25 PRB", "core_delay_ms = 10 ms", "attenuation_db = 20 dB", "sr_period_ms = 20 ms",
                 "rlc_queue = 4194304 bytes (4 MiB)", "iperf3 download, 10 s", "ping every 200 ms",
                 "TCP_INFO", "every 10 ms", "cc: cubic, bbr (baseline cubic)"):
        assert text in block, text


def test_an_sr_campaign_leads_with_accuracy_and_confusion(tmp_path):
    pairs = [(10, 10), (10, 10), (10, 20), (20, 20), (20, None), (40, 40), (40, 80), (40, 40)]
    runs = [({"sr_period_ms": t, "attenuation_db": a}, "ok",
             {"sr_true_ms": t, "sr_regime": "sr-limited", "throughput_bps": 1e6, **({"sr_estimate_ms": e} if e else {})})
            for (t, e), a in zip(pairs, [0, 40] * 4, strict=True)]
    folder = make_folder(tmp_path, {"sr_period_ms": [10, 20, 40], "attenuation_db": [0, 40]}, runs)
    html = report.write_report(folder).read_text()
    assert section_order(html)[:3] == ["sr", "conditions", "comparisons"]
    sr = html[html.index('id="sr"'):html.index('id="conditions"')]
    assert "Correct: 5 of 8 runs (62 %); 95 % Wilson interval 31–86 %." in sr
    assert sr.index("SR-estimate accuracy") < sr.index("SR confusion matrix")
    assert "5 of 8 (62 %) [31 %, 86 %]" in sr and "2 of 3 (67 %)" in sr  # all runs; true period 10 ms
    assert '<td class="left">attenuation_db</td><td class="left">40</td>' in sr
    stats = json.loads((folder / "report" / "comparisons.json").read_text())
    assert stats["sr_accuracy"]["correct"] == 5 and stats["sr_accuracy"]["runs"] == 8
    assert stats["sr_accuracy"]["wilson_low"] == pytest.approx(0.306, abs=0.01)


# --- axes ---------------------------------------------------------------------------------------------
def test_a_narrow_throughput_range_is_drawn_from_zero():
    lo, hi = plots.value_range(np.linspace(19.10, 19.18, 50), zero_based=True)
    assert lo == 0 and hi >= 19.18


def test_no_axis_is_narrower_than_five_percent_of_the_median():
    values = np.linspace(40.0, 40.4, 30)
    lo, hi = plots.value_range(values)
    assert hi - lo >= 0.1 * np.median(values) and lo < 40.0 < 40.4 < hi
    assert plots.value_range(np.array([0.0, 0.0])) == pytest.approx((-0.53, 0.53), abs=0.05)
    assert plots.value_range(np.empty(0)) == (0.0, 1.0)


def test_panels_of_one_comparison_share_their_axes():
    panels = [plots.Panel("a", "RTT (ms)", samples={"x": np.array([10.0, 20.0])}),
              plots.Panel("b", "RTT (ms)", samples={"x": np.array([100.0, 300.0])}),
              plots.Panel("c", "RTT (ms)", note="no samples here")]
    fig = plots.cdfs(panels, {"x": "#000000"})
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len({ax.get_xlim() for ax in axes}) == 1 and axes[0].get_xlim()[1] >= 300
    assert any(t.get_text() == "no samples here" for t in axes[2].texts)
    scatter = plots.throughput_delay([plots.Panel("a", points=[plots.ScatterPoint("x", 50.0, 5e6)]),
                                      plots.Panel("b", points=[plots.ScatterPoint("x", 200.0, 20e6)])], {"x": "#000"})
    a, b = [ax for ax in scatter.axes if ax.get_visible()]
    assert a.get_xlim() == b.get_xlim() and a.get_ylim() == b.get_ylim() and a.get_ylim()[0] == 0
    plots.plt.close("all")


def test_a_facet_without_data_is_named_not_dropped(tmp_path):
    runs = [({"cc": "cubic", "channel": "static"}, "ok", {"throughput_bps": 1e6, "rtt_p95_ms": 20.0,
                                                          "rtt_series_ms": [1.0, 2.0]}),
            ({"cc": "cubic", "channel": "mobile"}, "ok", {"throughput_bps": 2e6})]
    html = report.write_report(make_folder(tmp_path, {"cc": ["cubic"], "channel": ["static", "mobile"]}, runs)).read_text()
    assert "No data for channel=mobile: no finished run there has both metrics." in html
    assert "RTT (ms): no samples for channel=mobile." in html


def test_timelines_share_axes_and_their_svg_is_one_document():
    a = timeline_data({"throughput_bps": {"t_s": [0, 1, 2], "v": [1e6, 2e6, 1e6]}, "rtt_ms": {"t_s": [0, 2], "v": [5, 9]}})
    b = timeline_data({"throughput_bps": {"t_s": [0, 4], "v": [8e6, 9e6]}, "rtt_ms": {"t_s": [1, 3], "v": [50, 90]}})
    limits = timeline_limits([a, b])
    assert limits.t_s == (0.0, 4.0) and limits.rate_mbit[0] == 0 and limits.rate_mbit[1] >= 9
    assert limits.rtt_ms[0] == 0 and limits.rtt_ms[1] >= 90
    png, svg = timeline("run <7> & co", {"throughput_bps": {"t_s": [0, 1, "x", 3], "v": [1e6, None, 2e6, 3e6]},
                                         "rtt_ms": {"t_s": [0, 1], "v": [10, 12]}})
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    root = ET.fromstring(svg)  # well-formed: the run's lines were laid into the decorations' document
    ids = [el.get("id") for el in root.iter() if el.get("id")]
    assert len(ids) == len(set(ids))
    assert "run &lt;7&gt; &amp; co" in svg.decode()
    assert timeline_data({"rtt_ms": {"t_s": "abc", "v": {"a": 1}}}) is None


def test_parallel_figures_are_the_serial_figures(tmp_path):
    folder = shootout(tmp_path)
    serial = report.write_report(folder, workers=1).read_text()
    files = {p.name: p.read_bytes() for p in (folder / "report").iterdir()}
    parallel = report.write_report(folder, workers=2).read_text()
    assert parallel == serial
    assert {p.name: p.read_bytes() for p in (folder / "report").iterdir()} == files
    assert len([n for n in files if n.endswith(".svg")]) >= 4
