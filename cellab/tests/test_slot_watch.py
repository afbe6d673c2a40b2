"""Issue 40: the running runs of a campaign on Dask (`--slots N`, `--cluster`) are watched as the single-slot run is:
each running slot's last seconds (throughput, RTT, attenuation) said by `cellab run` and shown by `cellab status`."""

from __future__ import annotations

import json
import os
import textwrap
import time
from types import SimpleNamespace

import pytest

from cellab.cluster import worker
from cellab.cluster.watch import SlotWatch
from cellab.run.runner import Runner
from cellab.run.status import status_lines
from cellab.run.view import RUNNING_FILE
from cellab.testkit.helpers import only_folder, run_cellab


def _telemetry(run_dir, now, mbit: int):
    folder = run_dir / "telemetry"
    folder.mkdir(parents=True)
    cell = [{"t_s": now - 2 + i * 0.1, "topic": "cell.summary", "ue": 0, "dl_bytes": mbit * 12_500}
            for i in range(11)]  # mbit * 12.5 kB every 100 ms
    pings = [{"t_s": now - 1, "topic": "ping", "rtt_ms": 30.0 + mbit}]
    (folder / "cell.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cell + pings))


def test_each_running_slot_is_said_and_kept_for_status(tmp_path, monkeypatch):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: watched
        lab: wired
        factors: {cc: [cubic, bbr]}
        workload: {duration_s: 1}
    """))
    runner = Runner.new(path, tmp_path / "out")
    now = time.time()
    slots = []
    for index, (run, mbit) in enumerate(zip(runner.store.planned(), (10, 20), strict=True)):
        run_dir = tmp_path / "worker" / run.run_id
        _telemetry(run_dir, now, mbit)
        slots.append(SimpleNamespace(worker_name="w1", index=index, running=(run.run_id, run.factors, run_dir, now - 7)))
    slots.append(SimpleNamespace(worker_name="w1", index=2, running=None))  # an idle slot says nothing
    monkeypatch.setattr(worker, "_pool", SimpleNamespace(slots=slots))
    client = SimpleNamespace(run=lambda function: {"tcp://10.0.0.2:4000": function(), "tcp://gone": "not a list"})
    said: list[str] = []
    try:
        watch = SlotWatch(client, said.append, runner.store.root, every_s=0.0)
        watch.tick()
        first, second = runner.store.planned()
        assert said == [f"worker w1 slot 0: running {first.run_id} cc=cubic for 7 s: last 5 s throughput ue0 10.0 Mbit/s; "
                        "RTT 40 ms; attenuation - (newest sample 1 s old)",
                        f"worker w1 slot 1: running {second.run_id} cc=bbr for 7 s: last 5 s throughput ue0 20.0 Mbit/s; "
                        "RTT 50 ms; attenuation - (newest sample 1 s old)"], said
        shown = status_lines(runner.store.root)  # this process holds the folder, as the controller does
        at = shown.index("running slots:")
        assert shown[at + 1] == f"  {said[0]} (seen 0 s ago)" and shown[at + 2].startswith(f"  {said[1][:40]}")
        watch.close()
        assert not (runner.store.root / RUNNING_FILE).exists()
        assert "running slots:" not in status_lines(runner.store.root)
    finally:
        runner.hold.release()


def test_a_bad_running_file_shows_nothing(tmp_path):
    (tmp_path / "c.yaml").write_text("name: c\nlab: wired\n")
    runner = Runner.new(tmp_path / "c.yaml", tmp_path / "out")
    try:
        (runner.store.root / RUNNING_FILE).write_text('{"at": "x", "slots": [1]}')
        assert "running slots:" not in status_lines(runner.store.root)
    finally:
        runner.hold.release()


@pytest.mark.shares_cpu  # the wired lab keeps no clock and loads no module: beside other tests (conftest.py)
def test_a_campaign_on_two_slots_says_its_running_runs(require_root, tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent("""
        name: two-slots
        lab: wired
        factors: {cc: [cubic, reno]}
        workload: {duration_s: 6, ping_interval_ms: 200}
        timeouts: {run_s: 60, request_s: 10}
        retry: {max_attempts: 1, backoff_s: 0.1}
    """))
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--slots", "2", "--no-report", timeout_s=400,
                        env=os.environ | {"CELLAB_SLOT_WATCH_S": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    lines = [line for line in result.stderr.splitlines() if " slot " in line and ": running " in line]
    assert lines, result.stderr
    # a slot's line once its workload's pings are in: the run's RTT from the worker's telemetry
    assert any("RTT -" not in line and "RTT " in line for line in lines), lines
    assert not (only_folder(out) / RUNNING_FILE).exists()  # gone with the campaign
