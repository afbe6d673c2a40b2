"""Result store: atomic files, one row per run, resume skips finished runs."""

from __future__ import annotations

import json
import sqlite3

import pytest

from cellab.errors import CellabError
from cellab.records import PlannedRun
from cellab.results.store import ResultStore, write_atomic


def runs(n: int) -> list[PlannedRun]:
    return [PlannedRun(index=i, run_id=f"r{i}", repeat=0, factors={"cc": "cubic", "i": i}, params={}) for i in range(n)]


def test_lifecycle_and_pending(tmp_path):
    store = ResultStore.create(tmp_path, "c", "name: c\n", runs(4))
    assert (store.root / "campaign.yaml").read_text() == "name: c\n"
    assert [r["status"] for r in store.rows()] == ["pending"] * 4
    plan = store.planned()
    store.start(plan[0])
    store.finish(plan[0], "ok", metrics={"throughput_bps": 1.0})
    store.start(plan[1])
    store.finish(plan[1], "failed", error="boom")
    store.start(plan[2])  # left running, as after kill -9
    pending = [r.run_id for r in ResultStore.open(store.root).pending()]
    assert pending == ["r2", "r3"]
    rows = {r["run_id"]: r for r in store.rows()}
    assert rows["r0"]["metrics"] == {"throughput_bps": 1.0}
    assert json.loads((store.run_dir("r0") / "metrics.json").read_text()) == {"throughput_bps": 1.0}
    assert rows["r1"]["error"] == "boom" and rows["r2"]["status"] == "running"


def test_restart_of_a_run_clears_its_partial_folder_and_counts_attempts(tmp_path):
    store = ResultStore.create(tmp_path, "c", "", runs(1))
    run = store.planned()[0]
    folder = store.start(run)
    (folder / "partial.pcap").write_bytes(b"x")
    folder = store.start(run)
    assert list(folder.iterdir()) == []
    with sqlite3.connect(store.db_path) as db:
        assert db.execute("SELECT attempts, COUNT(*) FROM runs").fetchone() == (2, 1)


def test_the_database_appears_whole_or_not_at_all(tmp_path):
    """A watcher (or a crash) must never find a results.sqlite without its table: a failure while filling
    it leaves no database and no temporary file."""
    store = ResultStore.create(tmp_path, "c", "", runs(3))
    with sqlite3.connect(store.db_path) as db:
        assert db.execute("SELECT COUNT(*) FROM runs").fetchone() == (3,)
    twice = runs(2) + runs(1)  # r0 twice: the insert fails half-way
    with pytest.raises(sqlite3.IntegrityError):
        ResultStore.create(tmp_path / "bad", "c", "", twice)
    (folder,) = (tmp_path / "bad").iterdir()
    assert sorted(p.name for p in folder.iterdir()) == ["campaign.yaml", "plan.json"]
    with pytest.raises(CellabError, match="results.sqlite missing"):
        ResultStore.open(folder)


def test_open_rejects_non_campaign_folder(tmp_path):
    with pytest.raises(CellabError, match="not a campaign result folder"):
        ResultStore.open(tmp_path)


def test_write_atomic_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "m.json"
    write_atomic(path, "old")

    class Boom(str):
        def encode(self):
            raise RuntimeError("disk on fire")

    with pytest.raises(RuntimeError):
        write_atomic(path, Boom())  # type: ignore[arg-type]
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["m.json"]


def test_a_settled_folder_is_read_without_leaving_files_beside_its_database(tmp_path):
    from cellab.results.store_check import read_folder

    store = ResultStore.create(tmp_path, "c", "name: c\n", runs(2))
    plan = store.planned()
    store.start(plan[0])
    store.finish(plan[0], "ok", metrics={"throughput_bps": 1.0})
    store.settle()  # what the runner does when its runs are stored
    written = sorted(p.name for p in store.root.iterdir())
    read_folder(store.root)  # read-only: on a WAL database it would leave results.sqlite-wal and -shm
    assert [r["status"] for r in ResultStore.open(store.root).rows()] == ["ok", "pending"]
    assert sorted(p.name for p in store.root.iterdir()) == written
    store.start(plan[1])  # a resumed campaign writes again (in WAL) and settles again
    store.finish(plan[1], "failed", error="boom")
    store.settle()
    read_folder(store.root)
    assert sorted(p.name for p in store.root.iterdir()) == written
