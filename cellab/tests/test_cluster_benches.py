"""Two benches on one Dask cluster, simulated on this host: two lab inventories (`bench-a` tagged alpha,
`bench-b` tagged beta), each with its server and UE agents in a wired-lab instance of its own, each offered by a
`cellab worker --lab`. A campaign with `lab` as a factor runs on both at once; `lab: bench` with
`requires: [beta]` runs only on bench-b; a hand `cellab run` on a bench a worker holds fails naming the
holder."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from cellab.labs import instances
from cellab.labs.wired import WiredLab
from cellab.testkit.helpers import free_port, start_agent, stop_processes, write_lab
from cellab.tests.test_cluster import VENV_BIN, _spawn

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)

WORKLOAD = "workload: {tool: iperf3, duration_s: 2}\ntimeouts: {run_s: 90, request_s: 20}\n"


def _bench(tmp: Path, name: str, tag: str, prefix: str) -> tuple[Path, WiredLab, list[subprocess.Popen]]:
    folder = tmp / name
    folder.mkdir()
    port, telemetry_port = free_port(), free_port()
    path = write_lab(folder, port, telemetry_port)
    data = yaml.safe_load(path.read_text())
    data["name"], data["tags"] = name, [tag]
    path.write_text(yaml.safe_dump(data))
    lab = WiredLab(prefix, rate_mbit=10, buffer_bytes=60_000)
    topo = lab.up()
    agents = [start_agent(folder, n, role, ns, port, telemetry_port)
              for n, role, ns in (("server1", "server", topo.server.netns), ("ue1", "ue", topo.ues[0].netns))]
    return path, lab, agents


@pytest.fixture
def benches(require_root, tmp_path, netns_prefix):
    made, procs = [], []
    try:
        for name, tag, suffix in (("bench-a", "alpha", "a"), ("bench-b", "beta", "b")):
            path, lab, agents = _bench(tmp_path, name, tag, f"{netns_prefix[:6]}{suffix}")
            made.append((path, lab))
            procs += agents
        sched_file = tmp_path / "scheduler.json"
        procs.append(_spawn([str(VENV_BIN / "dask"), "scheduler", "--host", "127.0.0.1", "--port", "0",
                             "--scheduler-file", str(sched_file), "--dashboard-address", ":0"],
                            tmp_path / "scheduler.log"))
        deadline = time.monotonic() + 60
        while not sched_file.exists():
            assert time.monotonic() < deadline, (tmp_path / "scheduler.log").read_text()
            time.sleep(0.2)
        address = json.loads(sched_file.read_text())["address"]
        for (path, _), worker in zip(made, ("wa", "wb"), strict=True):
            procs.append(_spawn([str(VENV_BIN / "cellab"), "worker", "--scheduler", address, "--insecure", "--lab", str(path),
                                 "--name", worker], tmp_path / f"{worker}.log"))
        from distributed import Client

        with Client(address, timeout=60) as client:  # both benches offered before a campaign asks for them
            client.wait_for_workers(2, timeout=120)
        yield address, [path for path, _ in made]
    finally:
        stop_processes(procs)
        for _, lab in made:
            lab.down()


def _rows(out: Path) -> list[dict]:
    (folder,) = out.iterdir()
    with sqlite3.connect(folder / "results.sqlite") as db:
        db.row_factory = sqlite3.Row
        return [dict(r) | {"factors": json.loads(r["factors"]), "placement": json.loads(r["placement"] or "{}")}
                for r in db.execute("SELECT * FROM runs")]


@pytest.mark.timeout(600)
def test_lab_factor_runs_on_both_benches_tags_pick_one_and_a_held_bench_is_refused(benches, tmp_path):
    address, (bench_a, bench_b) = benches
    both = tmp_path / "both.yaml"
    both.write_text(textwrap.dedent(f"""
        name: two-benches
        lab: {bench_a}
        factors:
          lab: [{bench_a}, {bench_b}]
          cc: [cubic, reno]
    """) + WORKLOAD)
    campaign = subprocess.Popen([str(VENV_BIN / "cellab"), "run", str(both), "--out", str(tmp_path / "out1"),
                                 "--cluster", address, "--insecure", "--no-report"], stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 120
    while not (instances.BENCH_ROOT / "bench-a.lock").exists() or not _held("bench-a"):
        assert campaign.poll() is None, campaign.communicate()[0]
        assert time.monotonic() < deadline, "no worker took bench-a"
        time.sleep(0.2)
    hand = tmp_path / "hand.yaml"
    hand.write_text(f"name: by-hand\nlab: {bench_a}\n" + WORKLOAD)
    by_hand = subprocess.run([sys.executable, "-m", "cellab", "run", str(hand), "--out", str(tmp_path / "hand")],
                             capture_output=True, text=True, timeout=120)
    said = " ".join((by_hand.stdout + by_hand.stderr).split())
    assert by_hand.returncode != 0 and "bench 'bench-a' is held by" in said and "worker wa" in said, said
    output, _ = campaign.communicate(timeout=400)
    assert campaign.returncode == 0, output
    rows = _rows(tmp_path / "out1")
    assert len(rows) == 4 and all(r["status"] == "ok" for r in rows), rows
    for r in rows:  # each run on the bench its lab level names
        assert r["placement"]["worker"] == ("wa" if r["factors"]["lab"] == str(bench_a) else "wb"), r
    spans = sorted((r["started_at"], r["finished_at"], r["placement"]["worker"]) for r in rows)
    assert any(a[1] > b[0] and a[2] != b[2] for a in spans for b in spans if a is not b), spans  # at once

    tagged = tmp_path / "tagged.yaml"
    tagged.write_text("name: tagged\nlab: bench\nrequires: [beta]\nrepeat: 2\nfactors: {cc: [cubic]}\n" + WORKLOAD)
    done = subprocess.run([str(VENV_BIN / "cellab"), "run", str(tagged), "--out", str(tmp_path / "out2"),
                           "--cluster", address, "--insecure", "--no-report"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = _rows(tmp_path / "out2")
    assert [r["placement"]["worker"] for r in rows] == ["wb", "wb"], rows


def _held(name: str) -> bool:
    import fcntl

    with open(instances.BENCH_ROOT / f"{name}.lock") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
    return False
