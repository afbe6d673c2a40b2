"""A worker's result is checked before the controller stores anything: hostile records (a UE named `../x` or
an absolute path, missing or mistyped fields, unknown keys or status, numbers the store cannot hold, metrics of
the wrong JSON type) fail that run with a clear reason; nothing is written outside the campaign folder, the
campaign goes on, and an error while storing is not called a lost scheduler. No lab: the store step is fed
directly, and one campaign runs on an in-process Dask cluster with a stand-in task."""

from __future__ import annotations

import json
import sqlite3
import textwrap
import time

import pytest

from cellab.cluster import dispatch
from cellab.cluster.result import BadResult, check_result
from cellab.errors import CellabError
from cellab.run.runner import Runner


@pytest.fixture
def runner(tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent("""
        name: hostile
        lab: wired
        repeat: 3
        workload: {tool: iperf3, duration_s: 2}
    """))
    return Runner.new(campaign, tmp_path / "out")


def _good(run_id: str, **changes) -> dict:
    now = time.time()
    record = {"run_id": run_id, "status": "ok", "attempts": 1, "error": None, "metrics": {"throughput_mbps": 1.5},
              "ue_metrics": {"ue0": {"throughput_mbps": 1.5}}, "placement": {"worker": "w"},
              "started_at": now - 1, "finished_at": now}
    return {"record": record | changes, "files": {"manifest.json": b"{}"}}


class _Done:
    def __init__(self, result):
        self._result = result

    def result(self):
        return self._result


def _feed(runner, result) -> tuple[dict, dict]:
    """The controller's storing path for one finished task: (its row, the counts)."""
    run = next(iter(runner.store.pending()))
    counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
    record, files, _ = dispatch._outcome(_Done(result), run)
    dispatch._store(runner, run, record, files, counts)
    (row,) = [r for r in runner.store.rows() if r["run_id"] == run.run_id]
    return row, counts


ESCAPES = ["../../escaped", "ABSOLUTE", "..", "a/../../b", "ue/../..", "", "x\0y", "." * 3]


@pytest.mark.parametrize("name", ESCAPES)
def test_a_ue_name_leaving_the_folder_fails_the_run_and_writes_nothing(runner, tmp_path, name):
    name = str(tmp_path / "abs-escape") if name == "ABSOLUTE" else name
    before = set(tmp_path.rglob("*"))
    row, counts = _feed(runner, _good(next(iter(runner.store.pending())).run_id,
                                      ue_metrics={name: {"throughput_mbps": 9.0}}))
    assert row["status"] == "failed" and "UE name" in row["error"] and counts["failed"] == 1, row
    made = set(tmp_path.rglob("*")) - before
    assert all(runner.store.root in p.parents for p in made), made
    assert not (tmp_path / "abs-escape").exists()
    assert not (runner.store.root.parent / "escaped").exists()


def test_the_store_refuses_an_escaping_ue_name_too(runner):
    run = next(iter(runner.store.pending()))
    runner.store.start_folder(run)
    with pytest.raises(CellabError, match="UE name"):
        runner.store.finish(run, "ok", ue_metrics={"../../x": {"a": 1}})
    assert not (runner.store.root.parent / "x").exists()


def _hostile(run_id: str) -> dict[str, object]:
    good = _good(run_id)
    rec = good["record"]
    return {
        "not a dict": ["record"],
        "no record": {"files": {}},
        "unknown top key": good | {"extra": 1},
        "record a list": {"record": [1], "files": {}},
        "missing run_id": {"record": {k: v for k, v in rec.items() if k != "run_id"}, "files": {}},
        "another run's id": _good("r9999"),
        "missing status": {"record": {k: v for k, v in rec.items() if k != "status"}, "files": {}},
        "unknown status": _good(run_id, status="exploded"),
        "status pending": _good(run_id, status="pending"),
        "unknown record key": _good(run_id, colour="red"),
        "attempts text": _good(run_id, attempts="1"),
        "attempts bool": _good(run_id, attempts=True),
        "attempts huge": _good(run_id, attempts=10**30),
        "started NaN": _good(run_id, started_at=float("nan")),
        "finished inf": _good(run_id, finished_at=float("inf")),
        "error a number": _good(run_id, error=5),
        "metrics a list": _good(run_id, metrics=[1, 2]),
        "metrics text": _good(run_id, metrics="fast"),
        "metric 10^400": _good(run_id, metrics={"throughput_mbps": 10**400}),
        "metric NaN": _good(run_id, metrics={"throughput_mbps": float("nan")}),
        "metric 1e300": _good(run_id, metrics={"throughput_mbps": 1e300}),
        "metric bytes": _good(run_id, metrics={"throughput_mbps": b"1"}),
        "metric int key": _good(run_id, metrics={1: 2}),
        "ue metrics a list": _good(run_id, ue_metrics={"ue0": [1]}),
        "placement text": _good(run_id, placement="here"),
        "files a list": {"record": rec, "files": ["a"]},
        "file path absolute": {"record": rec, "files": {"/etc/cellab-x": b""}},
        "file path up": {"record": rec, "files": {"../x": b""}},
        "file text content": {"record": rec, "files": {"a.txt": "text"}},
    }


@pytest.mark.parametrize("case", list(_hostile("r0")))
def test_a_hostile_result_fails_its_run_with_a_reason(runner, case):
    run = next(iter(runner.store.pending()))
    result = _hostile(run.run_id)[case]
    with pytest.raises(BadResult):
        check_result(result, run)
    row, counts = _feed(runner, result)
    assert row["status"] == "failed" and counts["failed"] == 1, (case, row)
    assert row["error"].startswith("the worker's result was refused: "), row["error"]
    assert row["metrics"] is None and "Traceback" not in row["error"]


def test_a_good_result_is_stored(runner):
    row, counts = _feed(runner, _good(next(iter(runner.store.pending())).run_id))
    assert row["status"] == "ok" and row["metrics"] == {"throughput_mbps": 1.5} and counts["ok"] == 1
    ue = runner.store.run_dir(row["run_id"]) / "ues" / "ue0" / "metrics.json"
    assert json.loads(ue.read_text()) == {"throughput_mbps": 1.5}


def test_files_the_store_cannot_write_fail_the_run_not_the_campaign(runner):
    run_id = next(iter(runner.store.pending())).run_id
    result = _good(run_id) | {"files": {"a": b"file", "a/b": b"under a file"}}  # `a` is a file and a folder
    row, counts = _feed(runner, result)
    assert row["status"] == "failed" and "could not store its result" in row["error"], row
    assert counts["failed"] == 1


def _mixed(job):
    """A stand-in task: the first run's result escapes, the second's is mistyped, the rest are good."""
    run_id = job["run"]["run_id"]
    index = job["run"]["index"]
    if index == 0:
        return _good(run_id, ue_metrics={"../../../escaped": {"x": 1}})
    if index == 1:
        return _good(run_id, status=3, metrics="fast")
    return _good(run_id)


def test_the_campaign_goes_on_past_bad_results(runner):
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
        counts = dispatch.run_distributed(runner, client=client, task=_mixed)
    assert counts == {"ok": 1, "failed": 2, "aborted": 0, "invalid": 0}, counts
    rows = {r["idx"]: r for r in runner.store.rows()}
    assert rows[0]["status"] == rows[1]["status"] == "failed" and rows[2]["status"] == "ok"
    assert "UE name" in rows[0]["error"] and "record.status" in rows[1]["error"]
    assert not (runner.store.root.parent.parent / "escaped").exists()


def test_an_error_while_storing_is_not_a_lost_scheduler(runner, monkeypatch):
    run = next(iter(runner.store.pending()))

    def broken(*_args, **_kw):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(runner.store, "save_record", broken)
    counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
    with pytest.raises(CellabError) as caught:
        record, files, _ = dispatch._outcome(_Done(_good(run.run_id)), run)
        dispatch._store(runner, run, record, files, counts)
    said = str(caught.value)
    assert "could not store" in said and "disk I/O error" in said and "scheduler" not in said, said
    assert "--resume" in said
