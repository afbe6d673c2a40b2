"""A campaign on a real Dask cluster on this host: `dask scheduler` (TLS, certificates from `cellab tls`) and two
`cellab worker` processes, each offering one embedded-lab slot. Runs overlap, each names its worker and slot;
a worker killed mid-run aborts that run naming it, the others finish, `--resume` completes the campaign and
leaves what was written untouched."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from cellab.labs import instances

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)

VENV_BIN = Path(sys.executable).parent
CAMPAIGN = """
    name: cluster
    lab: wired
    repeat: {repeat}
    factors:
      rate_mbit: [10, 20]
    workload: {{tool: iperf3, duration_s: {duration}}}
    timeouts: {{run_s: 90, request_s: 20}}
"""


def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
    return subprocess.Popen(argv, stdout=open(log, "wb"), stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True)


class Cluster:
    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.tls = tmp / "tls"
        subprocess.run([str(VENV_BIN / "cellab"), "tls", str(self.tls)], check=True, capture_output=True)
        sched_file = tmp / "scheduler.json"
        self.scheduler = _spawn([str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                                 "--protocol", "tls", "--tls-ca-file", str(self.tls / "ca.pem"),
                                 "--tls-cert", str(self.tls / "node.pem"), "--tls-key", str(self.tls / "node.key"),
                                 "--scheduler-file", str(sched_file), "--dashboard-address", ":0"],
                                tmp / "scheduler.log")
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            assert self.scheduler.poll() is None, (tmp / "scheduler.log").read_text()
            assert time.monotonic() < deadline, "the scheduler did not start"
            time.sleep(0.2)
        self.address = json.loads(sched_file.read_text())["address"]
        self.workers: dict[str, subprocess.Popen] = {}

    def worker(self, name: str) -> subprocess.Popen:
        proc = _spawn([str(VENV_BIN / "cellab"), "worker", "--scheduler", self.address, "--slots", "1", "--name", name,
                       "--tls", str(self.tls)], self.tmp / f"{name}.log")
        self.workers[name] = proc
        return proc

    def run(self, *args: str, timeout_s: float = 400, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(VENV_BIN / "cellab"), "run", *args, "--cluster", self.address, "--tls",
                               str(self.tls), "--no-report"], capture_output=True, text=True, timeout=timeout_s,
                              env=env)

    def close(self) -> None:
        for proc in [*self.workers.values(), self.scheduler]:
            if proc.poll() is None:
                proc.terminate()
        for proc in [*self.workers.values(), self.scheduler]:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)


def rows(folder: Path) -> dict[str, dict]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        db.row_factory = sqlite3.Row
        return {r["run_id"]: dict(r) for r in db.execute("SELECT * FROM runs")}


def folder_digest(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _worker_mid_run(name: str) -> bool:
    """Worker `name`'s lab instance has a workload running (an iperf3 client in its UE namespace)."""
    for info in instances.list_instances():
        if info.live and info.holder and f"worker {name} " in info.holder.purpose:
            pids = subprocess.run(["ip", "netns", "pids", f"{info.prefix}-ue0"], capture_output=True, text=True).stdout
            for pid in pids.split():
                try:
                    if b"iperf3" in Path(f"/proc/{pid}/cmdline").read_bytes():
                        return True
                except OSError:
                    pass
    return False


def _ran_on(out: Path, workers: set[str]) -> bool:
    folders = list(out.iterdir()) if out.is_dir() else []
    if not folders:
        return False
    try:
        with sqlite3.connect(folders[0] / "results.sqlite", timeout=5) as db:
            placed = {json.loads(p)["worker"] for (p,) in db.execute(
                "SELECT placement FROM runs WHERE status = 'ok' AND placement IS NOT NULL")}
    except sqlite3.Error:
        return False
    return workers <= placed


@pytest.fixture
def cluster(require_root, tmp_path):
    made = Cluster(tmp_path)
    yield made
    made.close()


@pytest.mark.timeout(900)
def test_two_workers_share_a_campaign_and_a_killed_worker_aborts_only_its_run(cluster, tmp_path):
    campaign = tmp_path / "c.yaml"
    # 6 runs of 2 s: each worker delivers one, then wa is killed in its second; wb runs the rest
    campaign.write_text(textwrap.dedent(CAMPAIGN.format(duration=2, repeat=3)))
    cluster.worker("wa")
    cluster.worker("wb")
    out = tmp_path / "out"
    runner = subprocess.Popen([str(VENV_BIN / "cellab"), "run", str(campaign), "--out", str(out), "--cluster",
                               cluster.address, "--tls", str(cluster.tls), "--no-report"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 240
    while not _ran_on(out, {"wa", "wb"}):  # both workers have delivered a run: they ran side by side
        assert runner.poll() is None, runner.communicate()[0]
        assert time.monotonic() < deadline, "the two workers did not both finish a run"
        time.sleep(0.2)
    while not _worker_mid_run("wa"):  # then kill one while it runs a workload, not between runs
        assert runner.poll() is None, runner.communicate()[0]
        assert time.monotonic() < deadline, "worker wa never ran a workload"
        time.sleep(0.2)
    os.kill(cluster.workers["wa"].pid, signal.SIGKILL)
    output, _ = runner.communicate(timeout=600)
    assert runner.returncode == 1, output  # one run aborted
    (folder,) = out.iterdir()
    first = rows(folder)
    assert len(first) == 6
    statuses = sorted(r["status"] for r in first.values())
    assert statuses.count("aborted") == 1 and statuses.count("ok") == 5, (statuses, output)
    (lost,) = [r for r in first.values() if r["status"] == "aborted"]
    assert "worker wa was lost" in lost["error"]
    done = [r for r in first.values() if r["status"] == "ok"]
    placements = [json.loads(r["placement"]) for r in done]
    assert {p["worker"] for p in placements} <= {"wa", "wb"} and all(p["slot"] == 0 for p in placements)
    assert {p["lab"] for p in placements} == {"wired"} and all(p["instance"] for p in placements)
    spans = sorted((r["started_at"], r["finished_at"], json.loads(r["placement"])["worker"]) for r in done)
    overlapping = any(a[1] > b[0] and a[2] != b[2] for a, b in itertools.pairwise(spans))
    assert overlapping, spans  # the two workers ran at the same time
    for r in done:
        manifest = json.loads((folder / "runs" / r["run_id"] / "manifest.json").read_text())
        assert manifest["placement"] == json.loads(r["placement"])
    before = {r["run_id"]: folder_digest(folder / "runs" / r["run_id"]) for r in done}

    resumed = cluster.run("--resume", str(folder))
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    after = rows(folder)
    assert all(r["status"] == "ok" for r in after.values())
    assert json.loads(after[lost["run_id"]]["placement"])["worker"] == "wb"
    assert {rid: folder_digest(folder / "runs" / rid) for rid in before} == before  # nothing written changed
    for rid, r in first.items():
        if r["status"] == "ok":
            assert after[rid]["finished_at"] == r["finished_at"] and after[rid]["metrics"] == r["metrics"]


def test_a_run_no_worker_can_serve_is_refused_at_planning(cluster, tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent(CAMPAIGN.format(duration=2, repeat=1)) + "requires: [pixel7]\n")
    cluster.worker("wc")
    # wc joins, then the campaign waits 1 s (not the default 10) for a worker with the tag before refusing
    done = cluster.run(str(campaign), "--out", str(tmp_path / "out"), timeout_s=120,
                       env=os.environ | {"CELLAB_WORKER_JOIN_S": "1"})
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, said
    assert "no connected worker can serve" in said and "tag-pixel7" in said and "wc" in said, said
    assert "Traceback" not in said
