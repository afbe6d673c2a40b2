"""A real bench's quarantine: two benches on one Dask cluster (cellab.tests.test_cluster_benches), bench-b's UE
agent killed. bench-b's first run fails its health check and its worker leaves the pool, recorded for the
report; its other run, which no worker can serve any more, ends aborted after the grace (`--resume` runs it);
bench-a's worker stays and serves a campaign afterwards."""

from __future__ import annotations

import os
import signal
import textwrap
from pathlib import Path

import pytest

from cellab.cluster import dispatch
from cellab.results.cluster_events import read_events
from cellab.run.runner import Runner
from cellab.tests.test_cluster_benches import WORKLOAD, benches  # noqa: F401 - the two benches' fixture

# wired labs, no module: beside other tests (conftest.py); a minute of two benches, so in `make bench
# BENCH=extended` (test_cluster_quarantine.py covers the same rules in `make test` with stand-in benches)
pytestmark = [pytest.mark.shares_cpu, pytest.mark.extended]


def _agent_pid(folder: Path, name: str) -> int:
    """The pid of the agent `name` started for the bench whose files are in `folder`."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"agent" in argv and name.encode() in argv and str(folder / f"artifacts-{name}").encode() in argv:
            return int(pid)
    raise AssertionError(f"no agent {name} of {folder}")


@pytest.mark.timeout(600)
def test_a_bench_that_fails_its_health_check_leaves_the_pool_and_the_other_stays(benches, tmp_path,  # noqa: F811
                                                                                monkeypatch):
    address, (bench_a, bench_b) = benches
    monkeypatch.setattr(dispatch, "STRANDED_GRACE_S", 5.0)
    os.kill(_agent_pid(bench_b.parent, "ue1"), signal.SIGKILL)
    on_b = tmp_path / "on-b.yaml"
    on_b.write_text(textwrap.dedent(f"""
        name: on-b
        lab: {bench_b}
        repeat: 2
    """) + WORKLOAD)
    runner = Runner.new(on_b, tmp_path / "out-b")
    counts = dispatch.run_campaign(runner, cluster=address, insecure=True)
    assert counts["failed"] == 1 and counts["aborted"] == 1, counts
    rows = sorted(runner.store.rows(), key=lambda r: r["status"])
    assert rows[0]["status"] == "aborted" and "no connected worker can serve it" in rows[0]["error"], rows[0]
    assert rows[1]["status"] == "failed" and "worker wb left the pool: its health check failed" in rows[1]["error"]
    (event,) = read_events(runner.store.root)[0]
    assert event["kind"] == "retired" and event["worker"] == "wb" and event["reason"] == "its health check failed"
    runner.hold.release()

    on_a = tmp_path / "on-a.yaml"
    on_a.write_text(f"name: on-a\nlab: {bench_a}\n" + WORKLOAD)
    after = Runner.new(on_a, tmp_path / "out-a")
    assert dispatch.run_campaign(after, cluster=address, insecure=True)["ok"] == 1
