"""A campaign on a lab inventory: the agents already run on their hosts (here: started by the test,
each inside a wired-lab namespace as if on its own machine); the controller binds where the inventory
says and admits only the listed keys."""

from __future__ import annotations

import json
import socket
import sqlite3
import subprocess
import sys
import textwrap

import pytest
import yaml

from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice
from cellab.bus.keys import generate_keypair
from cellab.campaign import load_campaign
from cellab.errors import InputErrors
from cellab.labs.wired import WiredLab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_agent(tmp_path, name: str, role: str, netns: str | None, port: int, telemetry_port: int) -> subprocess.Popen:
    """An agent as its host would run it, with the key pair made in tmp_path/keys."""
    keys = tmp_path / "keys"
    return subprocess.Popen(
        [sys.executable, "-m", "cellab", "agent", "--role", role, "--name", name,
         "--controller", f"tcp://127.0.0.1:{port}", "--telemetry", f"tcp://127.0.0.1:{telemetry_port}",
         "--key", str(keys / f"{name}.key_secret"), "--controller-key", str(keys / "controller.key"),
         "--artifact-dir", str(tmp_path / f"artifacts-{name}")] + (["--netns", netns] if netns else []),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


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
            assert manifest["agents"] == {"server1": "server", "ue1": "ue"}
        # as run: the inventory path is stored absolute, so --resume works from the result folder
        assert str(tmp_path / "lab.yaml") in (folder / "campaign.yaml").read_text()
    finally:
        for proc in agents:
            proc.terminate()
            proc.wait(10)
        lab.down()


def test_inventory_lab_rejects_radio_parameters(tmp_path):
    write_lab(tmp_path)  # a server and a UE (an inventory without agents and devices is refused)
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {n_prb: [25]}\n")
    result = subprocess.run([sys.executable, "-m", "cellab", "validate", str(tmp_path / "c.yaml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "factors.n_prb: unknown parameter (allowed: cc, module_params, receiver, schedule)" in result.stderr


def write_lab(tmp_path, port: int = 7700, telemetry_port: int = 7701, attenuator_url: str | None = None) -> None:
    """An inventory of a server and a UE host, and with attenuator_url a Mini-Circuits RC4DAT whose
    channel 3 is in front of the UE; key pairs for every agent in tmp_path/keys."""
    agents = {"server1": ("server", "edge"), "ue1": ("ue", "laptop")} | (
        {"atten1": ("attenuator", "laptop")} if attenuator_url else {})
    for name in ["controller", *agents]:
        generate_keypair(tmp_path / "keys", name)
    ue = {"name": "phone", "kind": "virtual", "agent": "ue1"}
    devices: dict = {"servers": [{"name": "edge", "agent": "server1", "address": "10.90.1.1"}], "ues": [ue]}
    if attenuator_url:
        devices["attenuators"] = [{"name": "box1", "model": "minicircuits-rc4dat", "transport": "http",
                                   "address": attenuator_url, "channels": 4, "min_db": 10, "max_db": 60,
                                   "step_db": 0.25, "agent": "atten1"}]
        ue["attenuator"] = {"attenuator": "box1", "channel": 3}
    inventory = {
        "name": "test-lab",
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "edge", "address": "127.0.0.1"}, {"name": "laptop", "address": "127.0.0.1"}],
        "agents": [{"name": name, "role": role, "host": host, "public_key": f"keys/{name}.key"}
                   for name, (role, host) in agents.items()],
        "devices": devices,
    }
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inventory))


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
            for proc in agents:
                proc.terminate()
                proc.wait(10)
            lab.down()
    (folder,) = list(out.iterdir())
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, status FROM runs ORDER BY started_at").fetchall()
    assert [r[1] for r in rows] == ["ok", "ok"]
    set_values = []
    for run_id, _ in rows:
        run_dir = folder / "runs" / run_id
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert manifest["agents"] == {"server1": "server", "ue1": "ue", "atten1": "attenuator"}
        set_values.append(manifest["attenuation_applied_db"])
        played = [json.loads(line) for line in (run_dir / "attenuation.jsonl").read_text().splitlines()]
        points = [p for p in played if "planned_s" in p]
        assert {p["channel"] for p in points} == {3}
        assert [p["db"] for p in points] == [30.0, 30.0, 32.5, 35.0, 37.5, 40.0]  # hold, then the ramp
    # 35.3 dB lands on the device's 0.25 dB grid; the runs touched only the UE's channel, and the agent's
    # exit put every channel in its safe state (the inventory's max_db)
    assert set_values == [{"3": 20.0}, {"3": 35.25}]
    assert {channel for channel, _ in applied[:-4]} == {3}
    assert sorted(applied[-4:]) == [(1, 60.0), (2, 60.0), (3, 60.0), (4, 60.0)]


def test_inventory_attenuation_is_checked_against_its_limits(tmp_path):
    write_lab(tmp_path, attenuator_url="http://127.0.0.1:1")
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {attenuation_db: [20, 70]}\n")
    with pytest.raises(InputErrors, match=r"factors.attenuation_db\[1\]: .*less than or equal to 60"):
        load_campaign(tmp_path / "c.yaml")


def test_inventory_drive_replay_needs_a_calibration_file(tmp_path):
    write_lab(tmp_path, attenuator_url="http://127.0.0.1:1")
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfixed: {schedule: drive}\n"
                                     "schedules: {drive: {drive_log: drive.csv}}\n")
    with pytest.raises(InputErrors, match=r"schedules.drive.calibration: auto sweeps while the UE agent reports RSRP"):
        load_campaign(tmp_path / "c.yaml")
