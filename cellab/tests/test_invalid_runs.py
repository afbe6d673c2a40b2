"""A run whose lab lost real time is `invalid` (not failed, not ok): stored with the measured reason, finished
for `--resume`, counted apart; an older results.sqlite (whose status CHECK predates `invalid`) is widened in
place with its rows kept."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from types import SimpleNamespace

from cellab.campaign import load_campaign, plan
from cellab.runstep import LabTimingError, execute_run
from cellab.store import ResultStore


class _StallingLab:
    def __init__(self, stalls: int):
        self.stalls = stalls

    def fault(self) -> None:
        return None


def _campaign(tmp_path, attempts: int):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""
        name: stalls
        lab: wired
        retry: {{max_attempts: {attempts}, backoff_s: 0}}
    """))
    campaign = load_campaign(path)
    return campaign, path, plan(campaign, path)


def test_a_run_that_kept_losing_real_time_is_invalid_and_one_that_recovered_is_ok(tmp_path, monkeypatch):
    import cellab.runstep as runstep

    campaign, _, runs = _campaign(tmp_path, attempts=2)
    calls = {"n": 0}

    def attempt(session, campaign, run, run_dir, attempt, results_root, where):
        calls["n"] += 1
        if calls["n"] <= session.lab.stalls:
            raise LabTimingError("the host stalled the virtual cell: 300 of 4000 TTIs late")
        return {"throughput_bps": 1.0}, {}

    monkeypatch.setattr(runstep, "_attempt", attempt)
    session = SimpleNamespace(lab=_StallingLab(stalls=5), lab_name="wired", ensure_agents=lambda: [])
    record = execute_run(session, campaign, runs[0], tmp_path / "r1", tmp_path, log=lambda _: None)
    assert record.status == "invalid" and record.attempts == 2 and "300 of 4000 TTIs late" in record.error
    calls["n"], session.lab.stalls = 0, 1
    record = execute_run(session, campaign, runs[0], tmp_path / "r2", tmp_path, log=lambda _: None)
    assert record.status == "ok" and record.attempts == 2


def test_invalid_is_finished_and_an_old_database_is_widened(tmp_path):
    campaign, path, runs = _campaign(tmp_path, attempts=1)
    store = ResultStore.create(tmp_path / "out", campaign.name, path.read_text(), runs)
    with sqlite3.connect(store.db_path) as db:  # as a folder written before `invalid` existed
        db.executescript("ALTER TABLE runs RENAME TO r0; CREATE TABLE runs (run_id TEXT PRIMARY KEY, idx INTEGER "
                         "NOT NULL, repeat INTEGER NOT NULL, factors TEXT NOT NULL, status TEXT NOT NULL CHECK (status "
                         "IN ('pending', 'running', 'ok', 'failed', 'aborted')), error TEXT, attempts INTEGER NOT NULL "
                         "DEFAULT 0, started_at REAL, finished_at REAL, metrics TEXT); INSERT INTO runs (run_id, idx, "
                         "repeat, factors, status) SELECT run_id, idx, repeat, factors, status FROM r0; DROP TABLE r0;")
    store = ResultStore.open(store.root)
    store.start(runs[0])
    store.finish(runs[0], "invalid", error="LabTimingError: the host stalled the virtual cell")
    rows = store.rows()
    assert rows[0]["status"] == "invalid" and "stalled" in rows[0]["error"]
    assert not list(store.pending())  # finished: --resume does not redo it (retry.max_attempts does)
    assert json.loads(json.dumps(rows[0]["factors"])) == runs[0].factors
