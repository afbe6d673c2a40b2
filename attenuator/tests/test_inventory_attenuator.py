"""The attenuator agent of a lab inventory (a Mini-Circuits box over HTTP, here its emulator): it sets each
run's attenuation on the UE's channel and plays schedules there, driven by a campaign on the inventory."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.labs.wired import WiredLab
from cellab.testkit.helpers import free_port, start_agent, stop_agents, write_lab

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)


def test_inventory_attenuator_sets_each_runs_value_and_plays_schedules_on_the_ues_channel(
        require_root, netns_prefix, tmp_path):
    applied: list[tuple[int, float]] = []
    device = MiniCircuitsDevice(model="RC4DAT-6G-95", on_set=lambda channel, db: applied.append((channel, db)))
    port, telemetry_port = free_port(), free_port()
    lab = WiredLab(netns_prefix, rate_mbit=10, buffer_bytes=60_000)
    agents = []
    with device.serve_http() as http:
        write_lab(tmp_path, port, telemetry_port, http.url)
        (tmp_path / "walk.yaml").write_text("channels: [3]\nupdate_interval_s: 0.25\n"
                                            "segments: [{kind: hold, db: 30, duration_s: 0.5}, "
                                            "{kind: ramp, from_db: 30, to_db: 40, duration_s: 1}]\n")
        (tmp_path / "campaign.yaml").write_text(textwrap.dedent("""
            name: in-the-box
            lab: lab.yaml
            factors: {attenuation_db: [20, 35.3]}
            fixed: {schedule: walk}
            schedules: {walk: {file: walk.yaml}}
            workload: {duration_s: 2, ping_interval_ms: null}
            timeouts: {run_s: 60, request_s: 10}
        """))
        try:
            topo = lab.up()
            for name, role, ns in (("server1", "server", topo.server.netns), ("ue1", "ue", topo.ues[0].netns),
                                   ("atten1", "attenuator", None)):
                agents.append(start_agent(tmp_path, name, role, ns, port, telemetry_port))
            out = tmp_path / "out"
            result = subprocess.run([sys.executable, "-m", "cellab", "run", str(tmp_path / "campaign.yaml"),
                                     "--out", str(out)], capture_output=True, text=True, timeout=180, check=False)
            assert result.returncode == 0, result.stdout + result.stderr
        finally:
            stop_agents(dict(enumerate(agents)))  # SIGTERM, a kill past the grace (a busy host)
            lab.down()
    (folder,) = list(out.iterdir())
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, status FROM runs ORDER BY started_at").fetchall()
    assert [r[1] for r in rows] == ["ok", "ok"]
    set_values = []
    for run_id, _ in rows:
        run_dir = folder / "runs" / run_id
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert {n: a["role"] for n, a in manifest["agents"].items()} == {"server1": "server", "ue1": "ue", "atten1": "attenuator"}
        set_values.append(manifest["attenuation_applied_db"])
        played = [json.loads(line) for line in (run_dir / "attenuation.jsonl").read_text().splitlines()]
        points = [p for p in played if "planned_s" in p]
        assert {p["channel"] for p in points} == {3}
        assert [p["db"] for p in points] == [30.0, 30.0, 32.5, 35.0, 37.5, 40.0]  # hold, then the ramp
    # 35.3 dB lands on the device's 0.25 dB grid; the runs touched only the UE's channel, and the agent's
    # exit put every channel in its safe state (the inventory's max_db)
    assert set_values == [{"3": 20.0}, {"3": 35.25}]
    # the runs set channel 3 only; then the agent's safe state (on losing the controller and again on exit, when
    # a busy host lets it notice the first before it is stopped) sets every channel to the inventory's max_db
    first_other = next(i for i, (channel, _) in enumerate(applied) if channel != 3)
    assert first_other >= 6 and all(db == 60.0 for _, db in applied[first_other:]), applied
    assert sorted(applied[-4:]) == [(1, 60.0), (2, 60.0), (3, 60.0), (4, 60.0)]
