"""The cluster's fault paths, with stand-in run tasks (no lab): the Dask scheduler dying mid-campaign (a clear
message naming `--resume`, every stored run and its folder intact, `--resume` on a new scheduler completes the
campaign), and `retry.after_worker_loss` (a run whose first worker was lost is stored aborted naming it when the
option is off, and run again when it is on)."""

from __future__ import annotations

import functools
import json
import signal
import sqlite3
import subprocess
import textwrap
import threading
import time
from pathlib import Path

import pytest

from cellab.cluster import dispatch, worker
from cellab.cluster.standins import sleeping_run
from cellab.errors import CellabError
from cellab.run.runner import Runner
from cellab.tests.test_cluster import VENV_BIN, _spawn, folder_digest
from cellab.testkit.helpers import stop_processes

RUNS = 40


def _scheduler(tmp: Path, tag: str) -> tuple[subprocess.Popen, str]:
    sched_file = tmp / f"scheduler-{tag}.json"
    proc = _spawn([str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0", "--scheduler-file",
                   str(sched_file), "--dashboard-address", ":0"], tmp / f"scheduler-{tag}.log")
    deadline = time.monotonic() + 60
    while not sched_file.exists():
        assert proc.poll() is None and time.monotonic() < deadline, (tmp / f"scheduler-{tag}.log").read_text()
        time.sleep(0.2)
    return proc, json.loads(sched_file.read_text())["address"]


def _worker(tmp: Path, address: str, tag: str) -> subprocess.Popen:
    return _spawn([str(VENV_BIN / "dask"), "worker", address, "--nthreads", "2", "--resources", "vlab=2",
                   "--no-dashboard", "--death-timeout", "10", "--name", f"w-{tag}"], tmp / f"worker-{tag}.log")


def _stored_ok(root: Path) -> dict[str, str]:
    with sqlite3.connect(root / "results.sqlite", timeout=10) as db:
        return dict(db.execute("SELECT run_id, finished_at FROM runs WHERE status = 'ok'").fetchall())


@pytest.mark.timeout(300)
def test_the_scheduler_dying_mid_campaign_is_named_and_resume_completes_it(tmp_path, monkeypatch):
    from distributed import Client

    monkeypatch.setattr(dispatch, "SCHEDULER_GRACE_S", 3.0)  # a silent scheduler is given up on sooner
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent(f"""
        name: dies
        lab: wired
        repeat: {RUNS // 2}
        factors: {{cc: [cubic, reno]}}
    """))
    task = functools.partial(sleeping_run, sleep_s=0.25)  # 40 runs on 2 threads: about 5 s of work
    procs: list[subprocess.Popen] = []
    try:
        scheduler, address = _scheduler(tmp_path, "a")
        procs = [scheduler, _worker(tmp_path, address, "a")]
        runner = Runner.new(campaign, tmp_path / "out")
        root = runner.store.root
        outcome: dict[str, object] = {}

        def campaign_thread() -> None:
            try:
                with Client(address, timeout=30) as client:
                    client.wait_for_workers(1, timeout=60)
                    outcome["counts"] = dispatch.run_distributed(runner, client=client, task=task)
            except CellabError as exc:
                outcome["error"] = str(exc)

        thread = threading.Thread(target=campaign_thread)
        thread.start()
        deadline = time.monotonic() + 120
        while len(_stored_ok(root)) < 6:
            assert time.monotonic() < deadline and thread.is_alive(), outcome
            time.sleep(0.1)
        scheduler.send_signal(signal.SIGKILL)  # the scheduler dies mid-campaign
        thread.join(90)
        assert not thread.is_alive(), "the campaign hung after its scheduler died"
        said = str(outcome.get("error"))
        assert "scheduler" in said and f"--resume {root}" in said and "everything finished is stored" in said, outcome
        before = _stored_ok(root)
        assert 6 <= len(before) < RUNS, before
        kept = {run_id: folder_digest(root / "runs" / run_id) for run_id in before}
        runner.hold.release()  # what the exiting `cellab run` does

        stop_processes(procs, grace_s=20)
        scheduler, address = _scheduler(tmp_path, "b")
        procs = [scheduler, _worker(tmp_path, address, "b")]
        resumed = Runner.resume(root)  # `cellab run --resume DIR` on the new cluster
        with Client(address, timeout=30) as client:
            client.wait_for_workers(1, timeout=60)
            counts = dispatch.run_distributed(resumed, client=client, task=task)
        assert counts["ok"] == RUNS - len(before) and counts["failed"] == counts["aborted"] == 0, counts
        after = _stored_ok(root)
        assert len(after) == RUNS
        assert {k: after[k] for k in before} == before  # the runs stored before were not run again
        assert {run_id: folder_digest(root / "runs" / run_id) for run_id in before} == kept
    finally:
        stop_processes(procs, grace_s=20)


class _Pool:
    """What the slot pool would do for a run that is started (the stand-in: a finished ok run)."""

    def run(self, job):
        return sleeping_run(job, sleep_s=0.0)


@pytest.mark.parametrize("retry", [False, True])
def test_retry_after_worker_loss(tmp_path, monkeypatch, retry):
    """A run task started a second time (its first worker, `w-lost`, died mid-run, and Dask rescheduled it):
    stored aborted naming w-lost when retry.after_worker_loss is off, run again when it is on."""
    from distributed import Client, Event, LocalCluster, Variable

    monkeypatch.setattr(worker, "_worker_pool", lambda _w: _Pool())
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent(f"""
        name: loss
        lab: wired
        repeat: 2
        retry: {{after_worker_loss: {str(retry).lower()}}}
    """))
    runner = Runner.new(campaign, tmp_path / "out")
    first = next(iter(runner.store.pending()))
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
        real_submit = client.submit

        def submit(task, job, **kw):  # the first run's task was started once already, on a worker now lost
            if job["run"]["run_id"] == first.run_id:
                Variable(job["marker"], client=client).set("w-lost")
                Event(job["marker"], client=client).set()
            return real_submit(task, job, **kw)

        monkeypatch.setattr(client, "submit", submit)
        counts = dispatch.run_distributed(runner, client=client, task=worker.run_task)
    rows = {r["run_id"]: r for r in runner.store.rows()}
    lost = rows[first.run_id]
    if retry:
        assert counts == {"ok": 2, "failed": 0, "aborted": 0, "invalid": 0}, counts
        assert lost["status"] == "ok"
    else:
        assert counts == {"ok": 1, "failed": 0, "aborted": 1, "invalid": 0}, counts
        assert lost["status"] == "aborted" and "w-lost" in lost["error"], lost
        assert "retry.after_worker_loss is off" in lost["error"]
