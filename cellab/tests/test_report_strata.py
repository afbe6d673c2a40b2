"""Issue 40: comparisons within levels of the other varied factors (stratified), the pooled one labelled as
such, a plain-words note where the repeats are too few for the test ever to reach significance; issue 39: the
report says per cell how many repeats it took and why it stopped, for every campaign. A two-factor campaign
(cc × channel, 3 repeats) written through the store by hand: every number is checked against its input."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.report.page import write_report
from cellab.results.comparisons import read_comparisons, store_comparisons
from cellab.results.ratios import runs_for_p, smallest_p_value
from cellab.results.store import ResultStore

pytestmark = pytest.mark.background  # files and SQLite only

TWO_FACTORS = """
    name: cc-by-channel
    lab: wired
    repeat: {repeat}
    factors:
      cc: [cubic, bbr]
      channel: {{static: {{rate_mbit: 20}}, mobile: {{rate_mbit: 5}}}}
"""
# BBR's throughput is 1.5x Cubic's on the mobile channel and equal on the static one; channel moves both
RATE_MBIT = {("cubic", "static"): 20.0, ("bbr", "static"): 20.0, ("cubic", "mobile"): 4.0, ("bbr", "mobile"): 6.0}


def _store(tmp_path, repeat=3):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(TWO_FACTORS.format(repeat=repeat)))
    campaign = load_campaign(path)
    return campaign, ResultStore.create(tmp_path / "out", campaign.name, path.read_text(), plan(campaign, path))


def _metrics(factors, repeat):
    wiggle = 1 + 0.01 * (repeat - 1)  # each repeat a little apart: no ties
    return {"throughput_bps": RATE_MBIT[(factors["cc"], factors["channel"])] * 1e6 * wiggle,
            "rtt_p95_ms": 50.0 * wiggle}


def _run_all(store, only=None):
    for run in store.planned()[:only]:
        store.start(run)
        store.finish(run, "ok", metrics=_metrics(run.factors, run.repeat))


def test_smallest_p_of_the_test_is_what_the_test_gives():
    from scipy import stats

    apart = stats.mannwhitneyu([4, 5, 6], [1, 2, 3], alternative="two-sided").pvalue
    assert smallest_p_value(3, 3) == pytest.approx(apart) == pytest.approx(0.1)
    assert smallest_p_value(4, 4) < 0.05 <= smallest_p_value(3, 3) and runs_for_p(0.05) == 4


def test_bbr_against_cubic_within_each_channel_in_the_store_and_the_report(tmp_path):
    campaign, store = _store(tmp_path)
    _run_all(store)
    rows = store_comparisons(store, campaign.model_dump(mode="json"))
    within = {(json.loads(r["stratum"]).get("channel"), r["metric"]): r for r in rows
              if r["factor"] == "cc" and r["stratum"] != "{}"}
    assert set(within) == {(c, m) for c in ("static", "mobile") for m in ("throughput_bps", "rtt_p95_ms")}
    assert within[("mobile", "throughput_bps")]["ratio"] == pytest.approx(1.5)
    assert within[("static", "throughput_bps")]["ratio"] == pytest.approx(1.0)
    assert within[("mobile", "throughput_bps")]["n_level"] == within[("mobile", "throughput_bps")]["n_base"] == 3
    pooled = [r for r in read_comparisons(store.root) if r["factor"] == "cc" and r["stratum"] == {}]
    assert len(pooled) == 2  # the pooled row stays, stratum {}

    page = " ".join(write_report(store.root).read_text().split())
    assert "Comparisons within each level of the other factors" in page
    assert "cc pooled over channel" in page  # the pooled table says it is pooled
    assert "channel=mobile" in page and "×1.50" in page and "channel=static" in page and "×1.00" in page
    assert "3 against 3 runs: never below 0.1" in page and "p &lt; 0.05 needs at least 4 runs a side" in page
    assert "repeat: {min: 4, max: …, comparison: NAME, ci_fraction: …}" in page
    saved = json.loads((store.root / "report" / "comparisons.json").read_text())
    assert {e["factor"]: e["pooled_over"] for e in saved["comparisons"]} == {"cc": ["channel"], "channel": ["cc"]}


def test_enough_repeats_say_nothing_about_a_floor(tmp_path):
    _, store = _store(tmp_path, repeat=4)
    _run_all(store)
    page = " ".join(write_report(store.root).read_text().split())
    assert "Comparisons within each level" in page and "Too few repeats" not in page


def test_every_campaign_says_per_cell_how_many_repeats_and_why_it_stopped(tmp_path):
    _, store = _store(tmp_path)
    _run_all(store)
    page = " ".join(write_report(store.root).read_text().split())
    assert "Repeats: how many runs each cell took, and why it stopped" in page
    assert page.count("all 3 planned run(s) done (repeat: 3, no stopping rule)") == 4  # one per cell

    (tmp_path / "partial").mkdir()
    _, partial = _store(tmp_path / "partial")
    _run_all(partial, only=7)  # the campaign stopped after 7 of its 12 runs
    finished = [json.dumps(r.factors, sort_keys=True) for r in partial.planned()[:7]]
    complete = sum(finished.count(cell) == 3 for cell in set(finished))
    page = " ".join(write_report(partial.root).read_text().split())
    assert page.count("planned run(s) done (repeat: 3") == complete
    assert page.count("the campaign stopped before the cell&#39;s runs were all in") == 4 - complete
