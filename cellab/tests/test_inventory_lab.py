"""A campaign on a lab inventory: the agents already run on their hosts (here: started by the test,
each inside a wired-lab namespace as if on its own machine); the controller binds where the inventory
says and admits only the listed keys."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import textwrap

import pytest

from cellab.campaign.load import load_campaign
from cellab.errors import InputErrors
from cellab.labs.wired import WiredLab
from cellab.testkit.helpers import free_port, start_agent, stop_agents, write_lab

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)


def test_campaign_runs_on_agents_listed_in_an_inventory(require_root, netns_prefix, tmp_path):
    port, telemetry_port = free_port(), free_port()
    write_lab(tmp_path, port, telemetry_port)
    (tmp_path / "campaign.yaml").write_text(textwrap.dedent("""
        name: on-inventory
        lab: lab.yaml
        factors: {cc: [cubic, bbr]}
        workload: {duration_s: 2, ping_interval_ms: 100}
        timeouts: {run_s: 60, request_s: 10}
    """))
    lab = WiredLab(netns_prefix, rate_mbit=10, buffer_bytes=60_000)
    agents = []
    try:
        topo = lab.up()
        for name, role, ns in (("server1", "server", topo.server.netns), ("ue1", "ue", topo.ues[0].netns)):
            agents.append(start_agent(tmp_path, name, role, ns, port, telemetry_port))
        out = tmp_path / "out"
        result = subprocess.run([sys.executable, "-m", "cellab", "run", str(tmp_path / "campaign.yaml"),
                                 "--out", str(out)], capture_output=True, text=True, timeout=180, check=False)
        assert result.returncode == 0, result.stdout + result.stderr
        (folder,) = list(out.iterdir())
        with sqlite3.connect(folder / "results.sqlite") as db:
            rows = db.execute("SELECT run_id, status FROM runs").fetchall()
        assert [r[1] for r in rows] == ["ok", "ok"]
        for run_id, _ in rows:
            metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
            assert 6e6 < metrics["throughput_bps"] <= 10.3e6
            manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
            assert {n: a["role"] for n, a in manifest["agents"].items()} == {"server1": "server", "ue1": "ue"}
            assert all(a["version"] and a["clock_offset_s"] is not None for a in manifest["agents"].values())
        # as run: the inventory path is stored absolute, so --resume works from the result folder
        assert str(tmp_path / "lab.yaml") in (folder / "campaign.yaml").read_text()
    finally:
        stop_agents(dict(enumerate(agents)))  # SIGTERM, a kill past the grace (a busy host)
        lab.down()


def test_an_inventory_without_an_enb_rejects_radio_parameters(tmp_path):
    write_lab(tmp_path)  # a server and a UE (an inventory without agents and devices is refused)
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {n_prb: [25]}\n")
    result = subprocess.run([sys.executable, "-m", "cellab", "validate", str(tmp_path / "c.yaml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    said = " ".join(result.stderr.split())
    assert "factors.n_prb: unknown parameter 'n_prb'" in said, said
    assert "a run parameter of lab srsran-zmq, virtual" in said  # where it would belong
    assert "(allowed: cc, faults, module_params, receiver, schedule, ues)" in said


def test_an_inventory_with_an_enb_takes_radio_parameters_with_the_enbs_allowed_values(tmp_path):
    write_lab(tmp_path, enb=True)
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {n_prb: [25, 50], sr_period_ms: [5, 80]}\n")
    assert len(load_campaign(tmp_path / "c.yaml").factors["n_prb"]) == 2
    (tmp_path / "bad.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {sr_period_ms: [7]}\n")
    with pytest.raises(InputErrors, match=r"factors.sr_period_ms\[0\]: 7 is not allowed \(allowed: 5, 10, 20, 40, 80\)"):
        load_campaign(tmp_path / "bad.yaml")


def test_inventory_attenuation_is_checked_against_its_limits(tmp_path):
    write_lab(tmp_path, attenuator_url="http://127.0.0.1:1")
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {attenuation_db: [20, 70]}\n")
    with pytest.raises(InputErrors, match=r"factors.attenuation_db\[1\]: .*less than or equal to 60"):
        load_campaign(tmp_path / "c.yaml")


def test_inventory_drive_replay_may_calibrate_automatically(tmp_path):
    # every UE kind's agent reports RSRP (`signal`: a phone's modem, the virtual UE's cell): auto is allowed
    write_lab(tmp_path, attenuator_url="http://127.0.0.1:1")
    (tmp_path / "drive.csv").write_text("t_s,rsrp_dbm\n0,-90\n1,-95\n2,-100\n")
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfixed: {schedule: drive}\n"
                                     "schedules: {drive: {drive_log: drive.csv}}\n")
    assert load_campaign(tmp_path / "c.yaml").schedules["drive"].calibration == "auto"
