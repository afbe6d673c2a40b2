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

from cellab.bus.keys import generate_keypair
from cellab.labs.wired import WiredLab


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_campaign_runs_on_agents_listed_in_an_inventory(require_root, netns_prefix, tmp_path):
    keys = tmp_path / "keys"
    for name in ("controller", "server1", "ue1"):
        generate_keypair(keys, name)
    port, telemetry_port = free_port(), free_port()
    (tmp_path / "lab.yaml").write_text(textwrap.dedent(f"""
        name: bench-lab
        controller: {{bind: "tcp://127.0.0.1:{port}", telemetry_bind: "tcp://127.0.0.1:{telemetry_port}",
                      secret_key: keys/controller.key_secret}}
        hosts: [{{name: edge, address: 127.0.0.1}}, {{name: laptop, address: 127.0.0.1}}]
        agents:
          - {{name: server1, role: server, host: edge, public_key: keys/server1.key}}
          - {{name: ue1, role: ue, host: laptop, public_key: keys/ue1.key}}
        devices:
          servers: [{{name: edge, agent: server1, address: 10.90.1.1}}]
          ues: [{{name: laptop, kind: virtual, agent: ue1}}]
    """))
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
            agents.append(subprocess.Popen(
                [sys.executable, "-m", "cellab", "agent", "--role", role, "--name", name,
                 "--controller", f"tcp://127.0.0.1:{port}", "--telemetry", f"tcp://127.0.0.1:{telemetry_port}",
                 "--key", str(keys / f"{name}.key_secret"), "--controller-key", str(keys / "controller.key"),
                 "--netns", ns, "--artifact-dir", str(tmp_path / f"artifacts-{name}")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
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
    keys = tmp_path / "keys"
    generate_keypair(keys, "controller")
    (tmp_path / "lab.yaml").write_text("name: l\ncontroller: {secret_key: keys/controller.key_secret}\n")
    (tmp_path / "c.yaml").write_text("name: c\nlab: lab.yaml\nfactors: {n_prb: [25]}\n")
    result = subprocess.run([sys.executable, "-m", "cellab", "validate", str(tmp_path / "c.yaml")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2
    assert "factors.n_prb: unknown parameter (allowed: cc, module_params, receiver, schedule)" in result.stderr
