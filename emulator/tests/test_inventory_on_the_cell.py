"""Issue 13's Show: a campaign on an inventory whose agents (server, eNB, core, two UEs, attenuator) all run on
this host as separate `cellab agent` processes over CURVE, against the virtual cell and the fakes already built:
the eNB agent runs the RAN room's stand-in srsenb (it renders and reads real srsENB files), the core agent runs
the real srsEPC from the srsRAN bundle, the UE agents sit in the cell's UE namespaces, and the attenuator agent
drives the cell's Mini-Circuits serial bridge. Radio parameters change between runs; an agent killed mid-run
fails that run naming it, and the next run works once its host restarted it (root)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.emulator.vlab import SERVER_ADDR
from cellab.hostlock import SRSRAN_LOCK, host_lock
from cellab.testkit.helpers import (free_port, only_folder, pid_in_netns, result_rows, run_cellab, start_agent,
                            stop_agents)

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "tools" / "srsran"
FAKE_SRSENB = ROOT / "ran-config" / "tests" / "fake_srsenb.py"


@pytest.fixture
def srsran_lock():
    if not (BUNDLE / "bin" / "srsepc").is_file():
        pytest.skip(f"the srsRAN bundle is absent ({BUNDLE}): srsEPC is the core of this lab")
    with host_lock(SRSRAN_LOCK, 900, "inventory test"):  # one srsRAN stack per host (fixed addresses and ports)
        yield


def write_inventory(tmp: Path, port: int, telemetry_port: int, pty: Path) -> Path:
    names = ["controller", "server1", "enb1", "core1", "ue1", "ue2", "atten1"]
    for name in names:
        generate_keypair(tmp / "keys", name)
    roles = {"server1": "server", "enb1": "enb", "core1": "core", "ue1": "ue", "ue2": "ue", "atten1": "attenuator"}
    inventory = {
        "name": "one-host-lab",
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "here", "address": "127.0.0.1"}],
        "agents": [{"name": n, "role": r, "host": "here", "public_key": f"keys/{n}.key"} for n, r in roles.items()],
        "devices": {
            "enb": [{"name": "enb", "agent": "enb1", "rf": "zmq",
                     "profile": str(ROOT / "ran-config" / "examples" / "zmq-25prb.yaml")}],
            "core": [{"name": "epc", "flavour": "srsepc", "agent": "core1",
                      "profile": str(ROOT / "core-config" / "examples" / "srsran-zmq.yaml"),
                      "subscribers": str(ROOT / "core-config" / "examples" / "subscribers-srsran-zmq.csv")}],
            "attenuators": [{"name": "box", "model": "minicircuits-rc4dat", "transport": "serial", "address": str(pty),
                             "channels": 2, "min_db": 0, "max_db": 95, "step_db": 0.25, "agent": "atten1"}],
            "ues": [{"name": "phone-a", "kind": "virtual", "agent": "ue1", "attenuator": {"attenuator": "box", "channel": 1}},
                    {"name": "phone-b", "kind": "virtual", "agent": "ue2", "attenuator": {"attenuator": "box", "channel": 2}}],
            "servers": [{"name": "edge", "agent": "server1", "address": SERVER_ADDR}],
        },
    }
    path = tmp / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def agent_specs(topo: Any, tmp_path: Path, core_args: tuple[str, ...] = ("--srsran-bin", str(BUNDLE / "bin"))
                ) -> dict[str, tuple[str, str | None, tuple[str, ...]]]:
    """name -> (role, netns, extra arguments) of the inventory's agents on the cell: the UE agents in the cell's UE
    namespaces, the eNB agent on the stand-in srsenb (tmp_path/fakebin), the core agent on `core_args`."""
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "srsenb").write_text(f"#!{sys.executable}\n" + FAKE_SRSENB.read_text())
    (fake_bin / "srsenb").chmod(0o755)
    cell = ("--cell-ctl", topo.extra["ctl"])
    return {"server1": ("server", topo.server.netns, ()),
            "ue1": ("ue", topo.ues[0].netns, (*cell, "--cell-ue", "0")),
            "ue2": ("ue", topo.ues[1].netns, (*cell, "--cell-ue", "1")),
            "atten1": ("attenuator", None, ()),
            "enb1": ("enb", None, ("--srsran-bin", str(fake_bin))),
            "core1": ("core", None, core_args)}


def test_a_campaign_drives_every_agent_of_an_inventory_and_survives_a_killed_agent(
        srsran_lock, cell_and_box, tmp_path):
    port, telemetry_port = free_port(), free_port()
    topo, pty = cell_and_box
    procs: dict[str, subprocess.Popen] = {}
    try:
        write_inventory(tmp_path, port, telemetry_port, pty)
        specs = agent_specs(topo, tmp_path)
        os.environ["FAKE_SRSENB_UES"] = "2"  # the stand-in eNB sees both UEs attached

        def start(name: str) -> None:
            role, netns, extra = specs[name]
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)

        for name in specs:
            start(name)
        (tmp_path / "c.yaml").write_text(textwrap.dedent("""
            name: whole-lab
            lab: lab.yaml
            order: {mode: sequential}
            # run 1 (25) is the one ue2's kill fails; run 2 finds the eNB at 50 (a third, ok run checked the same)
            factors: {n_prb: [25, 50]}
            fixed: {attenuation_db: 10, sr_period_ms: 20}
            workload: {tool: probe, duration_s: 2}
            timeouts: {run_s: 120, request_s: 20}
        """))
        out = tmp_path / "out"
        killed = threading.Event()

        def kill_ue2_in_the_first_run_then_restart_it() -> None:
            deadline = time.monotonic() + 150
            while time.monotonic() < deadline:
                folders = list(out.glob("whole-lab-*")) if out.exists() else []
                rows = result_rows(folders[0]) if folders and (folders[0] / "results.sqlite").exists() else []
                if (not killed.is_set() and rows and rows[0][1] == "running"
                        and pid_in_netns(topo.ues[1].netns, "cellab-probe")):  # inside ue2's workload
                    os.kill(procs["ue2"].pid, signal.SIGKILL)
                    killed.set()
                if killed.is_set() and rows and rows[0][1] == "failed":
                    start("ue2")  # what the UE host's service manager does
                    return
                time.sleep(0.1)

        watcher = threading.Thread(target=kill_ue2_in_the_first_run_then_restart_it)
        watcher.start()
        # no report: what is checked is in the database and the run folders
        result = run_cellab("run", str(tmp_path / "c.yaml"), "--out", str(out), "--no-report", timeout_s=600)
        watcher.join()
        assert killed.is_set()
        folder = only_folder(out)
        rows = result_rows(folder)
        assert [r[1] for r in rows] == ["failed", "ok"], result.stdout + result.stderr
        assert "ue2" in rows[0][4], rows[0][4]  # the failed run names the agent that vanished
        for run_id, *_ in rows[1:]:
            run_dir = folder / "runs" / run_id
            manifest = json.loads((run_dir / "manifest.json").read_text())
            assert set(manifest["agents"]) == set(specs)  # every agent health-checked, with version and offset
            assert all(a["version"] for a in manifest["agents"].values())
            enb = json.loads((run_dir / "enb-status.json").read_text())
            assert enb["n_prb"] == manifest["params"]["n_prb"]  # the eNB agent got this run's radio parameters
            assert manifest["ground_truth"]["source"] == "rrc" and manifest["ground_truth"]["sr_period_ms"] == 20
            core = json.loads((run_dir / "core-status.json").read_text())
            assert core["ok"] and core["flavour"] == "srsepc"
            assert set(json.loads((run_dir / "metrics.json").read_text())) >= {"ues", "ue_fairness_jain"}
            assert {p.name for p in (run_dir / "ues").iterdir()} == {"phone-a", "phone-b"}
            assert (run_dir / "telemetry" / "enb1.jsonl").is_file()  # the eNB's per-UE metrics, recorded
            assert manifest["attenuation_applied_db"] == {"1": 10.0, "2": 10.0}
    finally:
        stop_agents(procs)
        os.environ.pop("FAKE_SRSENB_UES", None)
