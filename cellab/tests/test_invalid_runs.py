"""A run whose lab lost real time is `invalid` (not failed, not ok): stored with the measured reason, finished
for `--resume`, counted apart; an older results.sqlite (whose status CHECK predates `invalid`) is widened in
place with its rows kept."""

from __future__ import annotations

import json
import sqlite3
import textwrap
from types import SimpleNamespace

from cellab.campaign.load import load_campaign, plan
from cellab.results.store import ResultStore
from cellab.run.step import LabTimingError, execute_run


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
    import cellab.run.step as runstep

    campaign, _, runs = _campaign(tmp_path, attempts=2)
    calls = {"n": 0}

    def attempt(session, campaign, run, run_dir, attempt, results_root, where, log=print):
        calls["n"] += 1
        if calls["n"] <= session.lab.stalls:
            raise LabTimingError("the host stalled the virtual cell: 300 of 4000 TTIs late")
        return {"throughput_bps": 1.0}, {}

    monkeypatch.setattr(runstep, "_attempt", attempt)
    session = SimpleNamespace(lab=_StallingLab(stalls=5), lab_name="wired", ensure_agents=lambda: [],
                              lost_agents=lambda: [])
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


def test_the_rule_names_a_stalled_cell_or_a_slow_srsran_stack_and_keeps_a_run_on_time():
    from cellab.campaign.model import Retry

    rule = Retry()
    cell_late = {"ttis": 10_000, "resyncs": 0, "late_max_us": 9000, "late_ttis_over_us": {"5000": 150}}
    assert rule.invalid_reason(cell_late).startswith("the host stalled the virtual cell: 150 of 10000 TTIs")
    assert rule.invalid_reason(cell_late | {"late_ttis_over_us": {"5000": 50}}) is None  # 0.5 %: kept
    slow = {"stack_speed": 0.78, "stack_msps": 4.49, "nominal_msps": 5.76}
    assert rule.invalid_reason(slow) is None  # by default the speed is recorded, not judged (issue 37)
    real_time = Retry(min_stack_speed=0.9)  # a user who wants real time
    why = real_time.invalid_reason(slow)
    assert why and "78% of real time" in why and "4.49 of 5.76 Msps" in why and "min_stack_speed 0.9" in why, why
    assert real_time.invalid_reason({"stack_speed": 0.97, "stack_msps": 5.59, "nominal_msps": 5.76}) is None
    assert rule.invalid_reason({}) is None  # a lab that keeps no time (wired)
