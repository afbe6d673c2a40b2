"""Issue 27, result folders that contradict themselves: `cellab run --resume` refuses them as `cellab report`
does (a status that does not exist, a run the plan lacks, a manifest naming another run), naming the file and
run, before any lab is opened and without touching the folder's files. Before, resume checked only that each
file parsed, ran the lab on the folder, and the report at the end refused it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from cellab.errors import InputError
from cellab.records import PlannedRun
from cellab.run.runner import Runner
from cellab.results.store import ResultStore

CAMPAIGN = "name: c\nlab: wired\nfactors: {cc: [cubic, bbr]}\nworkload: {tool: iperf3, duration_s: 2}\n"


def _folder(tmp_path: Path) -> tuple[ResultStore, list[str]]:
    runs = [PlannedRun(index=i, run_id=f"r{i}", repeat=0, factors={"cc": cc}, params={"cc": cc})
            for i, cc in enumerate(("cubic", "bbr"))]
    store = ResultStore.create(tmp_path, "c", CAMPAIGN, runs)
    store.start(runs[0])
    store.finish(runs[0], "ok", metrics={"throughput_bps": 1e6})
    (store.run_dir("r0") / "manifest.json").write_text(json.dumps({"run_id": "r0"}))
    return store, [r.run_id for r in runs]


def _without_status_check(db_path: Path) -> None:
    with sqlite3.connect(db_path) as db:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()
        start = sql.index("CHECK (status")
        unchecked = sql[:start] + sql[sql.index(")", sql.index("IN (", start)) + 2:]
        db.executescript(f"ALTER TABLE runs RENAME TO old; {unchecked}; INSERT INTO runs SELECT * FROM old; "
                         "DROP TABLE old;")


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.name.endswith(("-wal", "-shm"))}  # SQLite's own reader files


@pytest.mark.parametrize("case, field, says", [
    ("status", "runs.r1.status", "'done' is no run status"),
    ("extra run", "runs.zz9", "in the database but not in plan.json"),
    ("manifest", "runs/r0/manifest.json", "names run 'r1'"),
])
def test_resume_refuses_a_folder_that_contradicts_itself(tmp_path, case, field, says):
    store, _ = _folder(tmp_path)
    if case == "status":
        _without_status_check(store.db_path)
        with sqlite3.connect(store.db_path) as db:
            db.execute("UPDATE runs SET status = 'done' WHERE run_id = 'r1'")
    elif case == "extra run":
        with sqlite3.connect(store.db_path) as db:
            db.execute("INSERT INTO runs (run_id, idx, repeat, factors, status) VALUES ('zz9', 7, 0, '{}', 'ok')")
    else:
        (store.run_dir("r0") / "manifest.json").write_text(json.dumps({"run_id": "r1"}))
    before = _files(store.root)
    with pytest.raises(InputError) as caught:
        Runner.resume(store.root)  # before: accepted, and `run` then drove the lab
    said = str(caught.value)
    assert field in said and says in said, said
    assert _files(store.root) == before


def test_a_consistent_folder_still_resumes(tmp_path):
    store, _ = _folder(tmp_path)
    assert [r.run_id for r in Runner.resume(store.root).store.pending()] == ["r1"]
