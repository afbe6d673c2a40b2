"""Issue 40: a run whose host was saturated, whose probe was partial or whose first telemetry was stale is flagged
in the store (results.sqlite run_flags, schema 3; an older store gets its runs' flags when it is migrated, a newer
one is refused untouched) and in the report (the Flagged runs section, the run table, the timeline titles)."""

from __future__ import annotations

import hashlib
import sqlite3
import textwrap

import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.errors import CellabError
from cellab.report.page import write_report
from cellab.results.flags import run_flags
from cellab.results.store import ResultStore
from cellab.results.store_check import STORE_SCHEMA_VERSION

pytestmark = pytest.mark.background  # files and SQLite only


def _line(t_s, v):
    return {"t_s": list(t_s), "v": list(v)}


def test_each_flag_and_what_it_saw():
    assert run_flags({"host_cpu_pct": 99.9}) == {"host-saturated": "host_cpu_pct 99.9 % (at least 95 %)"}
    assert run_flags({"host_cpu_pct": 60.0}) == {}
    assert run_flags({"probe_status": "partial"})["probe-partial"] == "probe_status partial: run"
    assert run_flags({}, {"phone": {"probe_status": "partial"}, "ue1": {"probe_status": "ok"}}) == {
        "probe-partial": "probe_status partial: phone"}
    # the phone's first RSRP is 25 dB below its second with the box still at 20 dB: the level before the run
    stale = {"timeline": {"rsrp_dbm.phone": _line([0.1, 1.1, 2.1], [-110, -85, -85]),
                          "attenuation_db": _line([0.0], [20.0])}}
    assert "phone: first RSRP -110 dBm at 0.1 s, then -85 dBm at 1.1 s (25 dB" in run_flags(stale)["stale-telemetry"]
    # the same jump while a schedule lowered the attenuation by 25 dB: the reading follows the box, not stale
    moved = {"timeline": {"rsrp_dbm.phone": _line([0.1, 1.1], [-110, -85]),
                          "attenuation_db.phone": _line([0.0, 0.5], [45.0, 20.0])}}
    assert run_flags(moved) == {}
    assert run_flags({"timeline": {"rsrp_dbm.phone": _line([0.1, 1.1], [-86, -85])}}) == {}


CAMPAIGN = """
    name: flagged
    lab: wired
    repeat: 3
    factors: {cc: [cubic]}
"""


def _store(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN))
    campaign = load_campaign(path)
    return ResultStore.create(tmp_path / "out", campaign.name, path.read_text(), plan(campaign, path))


RUN_METRICS = [{"throughput_bps": 9e6, "rtt_p95_ms": 40.0, "host_cpu_pct": 100.0},
               {"throughput_bps": 9e6, "rtt_p95_ms": 41.0, "host_cpu_pct": 30.0, "probe_status": "partial"},
               {"throughput_bps": 9e6, "rtt_p95_ms": 42.0, "host_cpu_pct": 30.0,
                "timeline": {"throughput_bps": _line([0, 1, 2], [9e6, 9e6, 9e6]),
                             "rsrp_dbm.phone": _line([0.2, 1.2], [-112, -84])}}]


def _flags_in(db_path):
    with sqlite3.connect(db_path) as db:
        return sorted(db.execute("SELECT r.idx, f.flag FROM run_flags f JOIN runs r USING (run_id)"))


def test_the_store_keeps_the_flags_and_the_report_shows_them(tmp_path):
    store = _store(tmp_path)
    for run, metrics in zip(store.planned(), RUN_METRICS, strict=True):
        store.start(run)
        store.finish(run, "ok", metrics=metrics)
    assert _flags_in(store.db_path) == [(0, "host-saturated"), (1, "probe-partial"), (2, "stale-telemetry")]
    page = " ".join(write_report(store.root).read_text().split())
    assert "Flagged runs" in page and "3 of 3 finished run(s) flagged" in page
    assert "host_cpu_pct 100.0 % (at least 95 %)" in page and "probe_status partial: run" in page
    assert "phone: first RSRP -112 dBm" in page
    assert "flagged: stale-telemetry" in page  # the run's timeline title
    store.start(store.planned()[0])  # run again: its flags follow its new metrics
    store.finish(store.planned()[0], "ok", metrics={"throughput_bps": 9e6, "host_cpu_pct": 20.0})
    assert _flags_in(store.db_path) == [(1, "probe-partial"), (2, "stale-telemetry")]


def test_an_older_store_is_migrated_with_its_runs_flags_and_a_newer_one_refused(tmp_path):
    store = _store(tmp_path)
    for run, metrics in zip(store.planned(), RUN_METRICS, strict=True):
        store.start(run)
        store.finish(run, "ok", metrics=metrics)
    with sqlite3.connect(store.db_path) as db:  # as schema 2 wrote it: no run_flags
        db.execute("DROP TABLE run_flags")
        db.execute("PRAGMA user_version = 2")
    old = ResultStore.open(store.root)
    assert [r["status"] for r in old.rows()] == ["ok"] * 3  # read as it is
    page = " ".join(write_report(store.root).read_text().split())
    assert "3 of 3 finished run(s) flagged" in page  # the report computes them from the metrics
    old.settle()  # its first write migrates it: table, flags of the runs already there, version
    old.start_attempt(old.planned()[1])
    with sqlite3.connect(store.db_path) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (STORE_SCHEMA_VERSION,) == (3,)
    assert _flags_in(store.db_path) == [(0, "host-saturated"), (1, "probe-partial"), (2, "stale-telemetry")]

    with sqlite3.connect(store.db_path) as db:
        db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION + 1}")
    before = hashlib.sha256(store.db_path.read_bytes()).hexdigest()
    for action in (lambda: ResultStore.open(store.root), lambda: ResultStore(store.root).start_attempt(
            store.planned()[0])):
        with pytest.raises(CellabError, match=f"store schema {STORE_SCHEMA_VERSION + 1} was written by a newer"):
            action()
    assert hashlib.sha256(store.db_path.read_bytes()).hexdigest() == before


def test_the_runs_dataframe_has_each_runs_flags_from_the_store_or_an_older_folders_metrics(tmp_path):
    from cellab.results.frames import load

    store = _store(tmp_path)
    for run, metrics in zip(store.planned(), RUN_METRICS, strict=True):
        store.start(run)
        store.finish(run, "ok", metrics=metrics)
    assert load(store.root).runs()["flags"].tolist() == ["host-saturated", "probe-partial", "stale-telemetry"]
    with sqlite3.connect(store.db_path) as db:  # the store's rows are what the column shows
        db.execute("DELETE FROM run_flags WHERE flag = 'probe-partial'")
    assert load(store.root).runs()["flags"].isna().tolist() == [False, True, False]
    with sqlite3.connect(store.db_path) as db:  # a schema-2 store: computed from the metrics, as the report does
        db.execute("DROP TABLE run_flags")
        db.execute("PRAGMA user_version = 2")
    assert load(store.root).runs()["flags"].tolist() == ["host-saturated", "probe-partial", "stale-telemetry"]
