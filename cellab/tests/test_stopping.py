"""Sequential repeats: a cell of the matrix gets runs until its metric's 95 % interval is narrow enough, or its
`max`; the plan grows in the result folder (so `--resume` continues the rule), `repeats.json` says why each cell
stopped; bad rules are refused naming the field."""

from __future__ import annotations

import json
import textwrap

import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.errors import CellabError
from cellab.results.stopping import after_run, interval
from cellab.results.store import ResultStore
from cellab.testkit.helpers import only_folder, run_cellab

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)

# 1 s runs: a tbf bottleneck's rate repeats within ±3 % after 2 or 3 of them (measured: 3 and 2 runs)
RULE = """
    name: seq
    lab: wired
    repeat: {{min: 2, max: {max}, metric: throughput_bps, ci_fraction: {fraction}}}
    factors: {{cc: [cubic, reno]}}
    workload: {{tool: iperf3, duration_s: 1}}
    timeouts: {{run_s: 60, request_s: 15}}
"""


def _store(tmp_path, fraction=0.05, max_runs=6):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(RULE.format(max=max_runs, fraction=fraction)))
    campaign = load_campaign(path)
    return campaign, ResultStore.create(tmp_path / "out", campaign.name, path.read_text(), plan(campaign, path))


def _finish(store, run, value):
    store.start(run)
    store.finish(run, "ok", metrics={"throughput_bps": value})


def test_a_noisy_cell_gets_more_runs_and_a_steady_one_stops(tmp_path):
    campaign, store = _store(tmp_path)
    first = store.planned()
    assert len(first) == 4  # the minimum: 2 per cell
    steady = [r for r in first if r.factors["cc"] == "reno"]
    noisy = [r for r in first if r.factors["cc"] == "cubic"]
    _finish(store, steady[0], 10.0e6)
    assert after_run(campaign, store, steady[0]) == []  # its cell has a run still to come
    _finish(store, steady[1], 10.1e6)
    [third] = after_run(campaign, store, steady[1])  # two values: t(0.975, 1) = 12.7 makes it ±6.4 %, not 5 %
    assert third.repeat == 2 and third.factors == {"cc": "reno"}
    assert store.planned()[-1].run_id == third.run_id  # the plan grew: --resume would run it
    _finish(store, third, 10.05e6)
    assert after_run(campaign, store, third) == []  # three values: ±1.2 %
    for run, value in zip(noisy, [5e6, 9e6], strict=True):
        _finish(store, run, value)
    more = after_run(campaign, store, noisy[1])
    while more:
        [extra] = more
        _finish(store, extra, 7e6 + (extra.repeat % 2) * 3e6)
        more = after_run(campaign, store, extra)
    cells = {c["factors"]["cc"]: c for c in json.loads((store.root / "repeats.json").read_text()).values()}
    assert cells["reno"]["stopped"] and cells["reno"]["runs"] == 3 and "after 3 ok runs" in cells["reno"]["why"]
    assert cells["cubic"]["stopped"] and cells["cubic"]["runs"] == 6 and "max 6 runs reached" in cells["cubic"]["why"]
    assert len(store.planned()) == 9 and not list(store.pending())


def test_the_interval_is_students():
    mean, half = interval([10.0, 12.0, 11.0, 13.0])
    assert mean == 11.5 and half == pytest.approx(2.054, abs=0.01)  # t(0.975, 3) = 3.182, sd 1.291
    assert interval([1.0]) is None


@pytest.mark.parametrize("rule, field, says", [
    ("{min: 2, max: 4, metric: goodput, ci_fraction: 0.1}", "until.metric", "throughput_bps"),
    ("{min: 2, max: 4, metric: throughput_bps, ci_fraction: 0}", "until.ci_fraction", "greater than 0"),
    ("{min: 2, max: 4, metric: throughput_bps, ci_fraction: 1.5}", "until.ci_fraction", "less than or equal to 1"),
    ("{min: 5, max: 4, metric: throughput_bps, ci_fraction: 0.1}", "", "min 5 is above max 4"),
])
def test_bad_rules_are_refused_naming_the_field(tmp_path, rule, field, says):
    path = tmp_path / "c.yaml"
    path.write_text(f"name: x\nlab: wired\nrepeat: {rule}\n")
    with pytest.raises(CellabError) as caught:
        load_campaign(path)
    text = str(caught.value)
    assert field in text and says in text, text


def test_a_campaign_stops_on_its_own(require_root, netns_prefix, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(RULE.format(max=5, fraction=0.03)))
    shown = run_cellab("plan", str(path))
    assert "each cell 2..5 runs" in " ".join(shown.stdout.split()), shown.stdout
    done = run_cellab("run", str(path), "--out", str(tmp_path / "out"), "--prefix", netns_prefix, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    cells = json.loads((folder / "repeats.json").read_text())
    assert len(cells) == 2 and all(c["stopped"] for c in cells.values()), cells
    for cell in cells.values():  # a tbf bottleneck repeats itself: the interval closes well before max
        assert 2 <= cell["runs"] <= 5 and ("interval" in cell["why"] or "max" in cell["why"]), cell
    again = run_cellab("run", "--resume", str(folder), "--no-report")
    assert again.returncode == 0 and "runs ok: 0" in again.stdout, again.stdout + again.stderr


NAMED_RULE = """
    name: named
    lab: wired
    repeat: 2
    until: {comparison: reno-vs-cubic, ci_fraction: 0.05, max: 4}
    comparisons:
      reno-vs-cubic: {factor: cc, level: reno, baseline: cubic}
    factors: {cc: [cubic, reno, bbr]}
    fixed: {rate_mbit: 10}
    workload: {tool: iperf3, duration_s: 1}
    timeouts: {run_s: 60, request_s: 15}
"""


def test_a_rule_on_a_named_comparison_stops_on_its_own_and_the_report_says_why(require_root, netns_prefix, tmp_path):
    import sqlite3

    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(NAMED_RULE))
    shown = run_cellab("plan", str(path))
    assert "until comparison reno-vs-cubic's ratios' 95 % intervals are within ±5 %" in " ".join(shown.stdout.split())
    done = run_cellab("run", str(path), "--out", str(tmp_path / "out"), "--prefix", netns_prefix)
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    cells = {c["factors"]["cc"]: c for c in json.loads((folder / "repeats.json").read_text()).values()}
    assert set(cells) == {"cubic", "reno", "bbr"} and all(c["stopped"] for c in cells.values()), cells
    assert cells["reno"]["runs"] == cells["cubic"]["runs"] and 2 <= cells["reno"]["runs"] <= 4  # decided together
    assert cells["reno"]["why"] == cells["cubic"]["why"] and cells["reno"]["comparison"] == "reno-vs-cubic"
    assert ("every ratio's 95 % interval within ±5 %" in cells["reno"]["why"]
            or "max 4 runs reached" in cells["reno"]["why"]), cells["reno"]
    assert "throughput_bps ×" in cells["reno"]["why"] and "rtt_p95_ms ×" in cells["reno"]["why"]
    assert cells["bbr"]["runs"] == 2 and "not in comparison" in cells["bbr"]["why"]
    with sqlite3.connect(folder / "results.sqlite") as db:
        named = db.execute("SELECT metric, n_level, n_base, ratio, low, high FROM comparisons WHERE kind = 'named'")
        rows = {m: rest for m, *rest in named}
    assert set(rows) == {"throughput_bps", "rtt_p95_ms"}
    assert all(n == cells["reno"]["ok"] and low <= ratio <= high for n, _, ratio, low, high in rows.values()), rows
    page = (folder / "report.html").read_text()
    assert "Repeats: how many runs each cell took" in page and "Named comparisons" in page
    assert cells["reno"]["why"].replace("'", "&#39;") in page
