"""Comparisons kept in results.sqlite: the table and its schema version (an older store opens, a newer one is
refused and left as it is), the same numbers as the report's table, named comparisons per cell of the other
factors, and a stopping rule that names a comparison: it stops on its own and says why."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import textwrap

import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.errors import CellabError
from cellab.report.cells import named_section, repeats_section
from cellab.report.model import ValueOrder
from cellab.report.page import load_runs
from cellab.report.tables import comparisons as report_comparisons
from cellab.results.comparisons import ok_samples, read_comparisons, store_comparisons
from cellab.results.stopping import after_run
from cellab.results.store import ResultStore
from cellab.results.store_check import STORE_SCHEMA_VERSION, read_folder

pytestmark = pytest.mark.background  # files and SQLite only

SHOOTOUT = """
    name: mini
    lab: wired
    repeat: {repeat}
    factors:
      scheme: {{cubic: {{cc: cubic}}, reno: {{cc: reno}}, bbr: {{cc: bbr}}}}
      rate_mbit: [10, 20]
    comparisons:
      reno-vs-cubic: {{factor: scheme, level: reno, baseline: cubic}}
    {until}
"""


def _campaign(tmp_path, repeat=2, until=""):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(SHOOTOUT.format(repeat=repeat, until=until)))
    campaign = load_campaign(path)
    return campaign, path


def _store(tmp_path, repeat=2, until=""):
    campaign, path = _campaign(tmp_path, repeat, until)
    return campaign, ResultStore.create(tmp_path / "out", campaign.name, path.read_text(), plan(campaign, path))


def _value(factors: dict, repeat: int, spread: float = 0.01) -> dict:
    """Throughput by scheme and rate, RTT by scheme, each run off by a fixed small amount."""
    scale = {"cubic": 1.0, "reno": 0.9, "bbr": 1.1}[factors["scheme"]]
    wiggle = 1 + spread * (-1) ** repeat * (1 + repeat % 3) / 3
    return {"throughput_bps": factors["rate_mbit"] * 1e6 * scale * wiggle,
            "rtt_p95_ms": 50.0 / scale * wiggle}


def _finish(store, run, metrics):
    store.start(run)
    store.finish(run, "ok", metrics=metrics)


def test_a_new_store_has_the_table_and_its_version(tmp_path):
    _, store = _store(tmp_path)
    with sqlite3.connect(store.db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (STORE_SCHEMA_VERSION,)
        assert db.execute("SELECT COUNT(*) FROM comparisons").fetchone() == (0,)
    assert read_comparisons(store.root) == []


def test_the_store_keeps_the_reports_numbers_and_the_named_comparison_per_cell(tmp_path):
    campaign, store = _store(tmp_path)
    for run in store.planned():
        _finish(store, run, _value(run.factors, run.repeat))
    stored = store_comparisons(store, campaign.model_dump(mode="json"))
    assert read_comparisons(store.root) == [{**r, "stratum": json.loads(r["stratum"])} for r in stored]
    factor_rows = {(r["factor"], r["level"], r["metric"]): r for r in stored  # the pooled rows: the report's table
                   if r["kind"] == "factor" and r["stratum"] == "{}"}
    # scheme: reno and bbr against cubic; rate_mbit: 20 against 10; two metrics each
    assert len(factor_rows) == 6 and {k[:2] for k in factor_rows} == {("scheme", "reno"), ("scheme", "bbr"),
                                                                      ("rate_mbit", "20")}
    folder = read_folder(store.root)
    report = report_comparisons([r for r in load_runs(folder) if r.ok], folder.campaign["factors"],
                                ValueOrder(folder.campaign["factors"]))
    for entry in report:  # the report's table and the store hold the same numbers
        for metric in ("throughput_bps", "rtt_p95_ms"):
            row = factor_rows[(entry["factor"], entry["level"], metric)]
            ratio = entry[metric]
            assert (row["ratio"], row["low"], row["high"], row["p_value"], row["n_level"], row["n_base"]) == (
                ratio.ratio, ratio.low, ratio.high, ratio.p_value, ratio.n_level, ratio.n_base)
    named = [r for r in stored if r["kind"] == "named"]
    assert {(json.loads(r["stratum"])["rate_mbit"], r["metric"]) for r in named} == {
        ("10", "throughput_bps"), ("10", "rtt_p95_ms"), ("20", "throughput_bps"), ("20", "rtt_p95_ms")}
    for row in named:  # reno is 0.9 of cubic by construction, in every cell
        if row["metric"] == "throughput_bps":
            assert row["ratio"] == pytest.approx(0.9, rel=0.02) and row["low"] <= row["ratio"] <= row["high"]
            assert row["n_level"] == row["n_base"] == 2 and row["test"] == "two-sided Mann-Whitney U"
    section = named_section(folder.campaign, [r for r in load_runs(folder) if r.ok])
    assert section is not None and len(section.tables[0].rows) == 4
    assert "rate_mbit=20" in str(section.tables[0].rows) and "×0.90" in str(section.tables[0].rows)


def test_an_older_store_opens_and_gets_the_table_on_its_first_write(tmp_path):
    campaign, store = _store(tmp_path)
    for run in store.planned():
        _finish(store, run, _value(run.factors, run.repeat))
    with sqlite3.connect(store.db_path) as db:  # as a store written before comparisons and versions
        db.execute("DROP TABLE comparisons")
        db.execute("PRAGMA user_version = 0")
    old = ResultStore.open(store.root)
    assert read_comparisons(old.root) == [] and len(old.rows()) == 12
    assert read_folder(old.root).runs[0].status == "ok"
    store_comparisons(old, campaign.model_dump(mode="json"))
    with sqlite3.connect(store.db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (STORE_SCHEMA_VERSION,)
    # pooled 6, named 4, stratified 14 (scheme's 2 levels within each rate: 8; rate within each scheme: 6)
    assert len(read_comparisons(old.root)) == 6 + 4 + 14


def test_a_store_from_a_newer_cellab_is_refused_and_left_as_it_is(tmp_path):
    _, store = _store(tmp_path)
    with sqlite3.connect(store.db_path) as db:
        db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION + 1}")
    before = hashlib.sha256(store.db_path.read_bytes()).hexdigest()
    for action in (lambda: ResultStore.open(store.root), lambda: read_folder(store.root),
                   lambda: ResultStore(store.root).start_attempt(store.planned()[0])):
        with pytest.raises(CellabError) as caught:
            action()
        text = str(caught.value)
        assert "results.sqlite" in text and "newer cellab" in text and f"schema {STORE_SCHEMA_VERSION + 1}" in text
    assert hashlib.sha256(store.db_path.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in store.root.iterdir()) == ["campaign.yaml", "plan.json", "results.sqlite"]


RULE = "until: {comparison: reno-vs-cubic, ci_fraction: 0.05, max: 8}"


def _drive(campaign, store, values):
    """Run the plan as a runner would, the runs a stopping rule adds included; values(factors, repeat)."""
    todo = list(store.planned())
    while todo:
        run = todo.pop(0)
        _finish(store, run, values(run.factors, run.repeat))
        todo += after_run(campaign, store, run)


def test_a_rule_on_a_named_comparison_stops_on_its_own_and_says_why(tmp_path):
    campaign, store = _store(tmp_path, repeat=2, until=RULE)

    def values(factors, repeat):  # rate 10: steady (±1 %); rate 20: reno's first run 10 % off
        spread = 0.3 if factors["rate_mbit"] == 20 and factors["scheme"] == "reno" and repeat < 1 else 0.01
        return _value(factors, repeat, spread)

    _drive(campaign, store, values)
    cells = {(c["factors"]["scheme"], c["factors"]["rate_mbit"]): c
             for c in json.loads((store.root / "repeats.json").read_text()).values()}
    assert all(c["stopped"] for c in cells.values()), cells
    steady, noisy = cells[("reno", 10)], cells[("reno", 20)]
    assert steady["runs"] == 2 and cells[("cubic", 10)]["runs"] == 2  # narrow at once: stops at `repeat`
    assert "every ratio's 95 % interval within ±5 %" in steady["why"] and steady["comparison"] == "reno-vs-cubic"
    assert "throughput_bps ×0.9" in steady["why"] and "rtt_p95_ms" in steady["why"]
    assert noisy["runs"] > 2 and cells[("cubic", 20)]["runs"] == noisy["runs"]  # both sides grew together
    assert noisy["runs"] < 8 and "every ratio's 95 % interval within ±5 %" in noisy["why"]  # not max: narrowed
    assert cells[("bbr", 10)]["runs"] == 2 and "not in comparison reno-vs-cubic" in cells[("bbr", 10)]["why"]
    assert not list(store.pending())
    named = [r for r in read_comparisons(store.root) if r["kind"] == "named" and r["stratum"]["rate_mbit"] == "20"]
    assert {r["n_level"] for r in named} == {noisy["ok"]}  # the store's rows follow the decision
    section = repeats_section(store.root, read_folder(store.root).campaign)
    assert section is not None and "comparison reno-vs-cubic" in section.notes[0]
    shown = str(section.tables[0].rows)
    assert "rate_mbit=20, scheme=reno" in shown and noisy["why"] in shown


def test_a_comparison_that_never_narrows_stops_at_max(tmp_path):
    campaign, store = _store(tmp_path, repeat=2, until=RULE)
    _drive(campaign, store, lambda f, r: _value(f, r, spread=0.4 if f["scheme"] == "reno" else 0.01))
    cells = json.loads((store.root / "repeats.json").read_text())
    reno = [c for c in cells.values() if c["factors"]["scheme"] == "reno"]
    assert all(c["runs"] == 8 and c["stopped"] and "max 8 runs reached" in c["why"] for c in reno), reno


@pytest.mark.parametrize("change, says", [
    ("until: {comparison: nope, ci_fraction: 0.05, max: 5}", "until.comparison: 'nope' is not a comparison"),
    ("until: {ci_fraction: 0.05, max: 5}", "give one of metric"),
    ("until: {metric: throughput_bps, comparison: reno-vs-cubic, ci_fraction: 0.05, max: 5}", "give one of metric"),
])
def test_bad_rules_on_comparisons_are_refused_naming_the_field(tmp_path, change, says):
    with pytest.raises(CellabError) as caught:
        _campaign(tmp_path, until=change)
    assert says in str(caught.value) and "c.yaml" in str(caught.value), str(caught.value)


@pytest.mark.parametrize("comparison, says", [
    ("{factor: cc, level: reno, baseline: cubic}", "comparisons.x.factor: 'cc' is not a factor of the campaign "
                                                   "(allowed: scheme, rate_mbit)"),
    ("{factor: scheme, level: vegas, baseline: cubic}", "comparisons.x.level: 'vegas' is not a level of scheme "
                                                        "(allowed: cubic, reno, bbr)"),
    ("{factor: scheme, level: reno, baseline: reno}", "comparisons.x: level and baseline are both 'reno'"),
    ("{factor: scheme, level: reno, baseline: cubic, metrics: [goodput]}", "comparisons.x.metrics"),
])
def test_bad_comparisons_are_refused_naming_the_field(tmp_path, comparison, says):
    path = tmp_path / "c.yaml"
    path.write_text("name: x\nlab: wired\nfactors:\n  scheme: {cubic: {cc: cubic}, reno: {cc: reno}, bbr: {cc: bbr}}\n"
                    f"  rate_mbit: [10, 20]\ncomparisons:\n  x: {comparison}\n")
    with pytest.raises(CellabError) as caught:
        load_campaign(path)
    assert says in str(caught.value), str(caught.value)


def test_a_rule_on_a_comparison_needs_two_runs_a_side(tmp_path):
    with pytest.raises(CellabError, match="needs repeat .min. of 2 or more"):
        _campaign(tmp_path, repeat=1, until=RULE)


def test_ok_samples_leave_out_runs_that_are_not_ok(tmp_path):
    _, store = _store(tmp_path)
    first, second = store.planned()[:2]
    _finish(store, first, {"throughput_bps": 1.0})
    store.start(second)
    store.finish(second, "failed", error="boom", metrics={"throughput_bps": 2.0})
    assert [s.metrics for s in ok_samples(store.rows())] == [{"throughput_bps": 1.0}]
