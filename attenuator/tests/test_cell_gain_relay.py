"""srsENB's `cell_gain` as a lab inventory's attenuator (issue 26): the inventory names the eNB agent for a
`srsenb-cell-gain` box, and the session relays the attenuator contract to that agent's `cell_gain` operation
(cellab.attenuator.relay). Before, a run sent the attenuator's commands to the eNB agent, which serves another
contract. Here srsenb is the eNB room's stand-in (it echoes each stdin command to its console log)."""

from __future__ import annotations

import json
import re
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from cellab.labs.wired import WiredLab
from cellab.testkit.helpers import free_port, start_agent, stop_agents, write_lab

pytestmark = pytest.mark.shares_cpu  # wired labs, no module: beside other tests (conftest.py)

RAN = Path(__file__).resolve().parents[2] / "ran-config"


def _gains(console: Path) -> list[float]:
    """The gains srsenb got on its stdin, in order (`cell_gain <cell> <dB>`; the profile's one cell is cell 1)."""
    text = console.read_text() if console.exists() else ""
    return [float(g) for g in re.findall(r"stdin: cell_gain 1 (-?[\d.]+)", text)]


def test_srsenb_cell_gain_is_an_inventory_attenuator(require_root, netns_prefix, tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "srsenb"
    fake.parent.mkdir()
    fake.write_text(f"#!{sys.executable}\n" + (RAN / "tests" / "fake_srsenb.py").read_text())
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("CELLAB_SRSRAN_BIN", str(fake.parent))  # the eNB agent's srsenb
    port, telemetry_port = free_port(), free_port()
    inventory = yaml.safe_load(write_lab(tmp_path, port, telemetry_port, enb=True).read_text())
    (tmp_path / "enb.yaml").write_text((RAN / "examples" / "zmq-25prb.yaml").read_text())
    inventory["devices"]["enb"][0]["profile"] = "enb.yaml"
    inventory["devices"]["attenuators"] = [{"name": "enb-gain", "model": "srsenb-cell-gain", "transport": "enb-agent",
                                            "address": "enb1", "channels": 1, "min_db": 0, "max_db": 40,
                                            "step_db": 0.5, "agent": "enb1"}]
    inventory["devices"]["ues"][0]["attenuator"] = {"attenuator": "enb-gain", "channel": 1}
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(inventory))
    (tmp_path / "walk.yaml").write_text("channels: [1]\nupdate_interval_s: 0.25\n"
                                        "segments: [{kind: ramp, from_db: 20, to_db: 30, duration_s: 1}]\n")
    (tmp_path / "campaign.yaml").write_text(textwrap.dedent("""
        name: cell-gain
        lab: lab.yaml
        factors: {attenuation_db: [10, 25.3]}
        fixed: {schedule: walk}
        schedules: {walk: {file: walk.yaml}}
        workload: {duration_s: 2, ping_interval_ms: null}
        timeouts: {run_s: 60, request_s: 10}
        retry: {max_attempts: 1, backoff_s: 0}
    """))
    bad = tmp_path / "bad.yaml"  # beyond the box's range: refused before any run, naming the box
    bad.write_text((tmp_path / "campaign.yaml").read_text().replace("[10, 25.3]", "[10, 45]"))
    said = subprocess.run([sys.executable, "-m", "cellab", "validate", str(bad)], capture_output=True, text=True)
    assert said.returncode == 2 and "bad.yaml: factors.attenuation_db[1]:" in said.stderr and "40" in said.stderr
    # channel n is the eNB profile's n-th cell (its cell_id, 1 here): a second channel has no cell
    two = dict(inventory, devices=dict(inventory["devices"], attenuators=[
        dict(inventory["devices"]["attenuators"][0], channels=2)]))
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(two))
    said = subprocess.run([sys.executable, "-m", "cellab", "validate", str(tmp_path / "two.yaml")],
                          capture_output=True, text=True)
    assert said.returncode == 2 and "devices.attenuators[0].channels: 2 channels, but eNB enb" in said.stderr, \
        said.stdout + said.stderr
    lab = WiredLab(netns_prefix, rate_mbit=10, buffer_bytes=60_000)
    agents = []
    console = tmp_path / "artifacts-enb1" / "srsenb_console.log"
    try:
        topo = lab.up()
        for name, role, ns in (("server1", "server", topo.server.netns), ("ue1", "ue", topo.ues[0].netns),
                               ("enb1", "enb", None)):
            agents.append(start_agent(tmp_path, name, role, ns, port, telemetry_port))
        out = tmp_path / "out"
        result = subprocess.run([sys.executable, "-m", "cellab", "run", str(tmp_path / "campaign.yaml"),
                                 "--out", str(out), "--no-report"], capture_output=True, text=True, timeout=240)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        gains_at_close = _gains(console)
    finally:
        stop_agents(dict(enumerate(agents)))
        lab.down()
    (folder,) = list(out.iterdir())
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, status, factors FROM runs ORDER BY started_at").fetchall()
    assert [r[1] for r in rows] == ["ok"] * 2, rows
    for run_id, _, factors in rows:
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        wanted = {10: 10.0, 25.3: 25.5}[json.loads(factors)["attenuation_db"]]  # on the box's 0.5 dB grid
        assert manifest["attenuation_applied_db"] == {"1": wanted}
        played = [json.loads(x) for x in (folder / "runs" / run_id / "attenuation.jsonl").read_text().splitlines()]
        assert [p["db"] for p in played if "planned_s" in p] == [20.0, 22.5, 25.0, 27.5, 30.0]
    # srsenb got each value as a gain (attenuation x dB = cell_gain -x), the ramp's too, and when the session
    # closed, the relay's safe state: the box's max_db
    assert {-10.0, -25.5, -20.0, -22.5, -25.0, -27.5, -30.0} <= set(gains_at_close), gains_at_close
    deadline = time.monotonic() + 10
    while _gains(console)[-1:] != [-40.0] and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _gains(console)[-1] == -40.0, _gains(console)
