"""A core_daemon fault on a lab inventory, end to end (issue 41): the core agent (a separate `cellab agent`) runs a
real EPC, the srsRAN bundle's srsEPC or the Open5GS bundle's daemons (2.7.7, with the run's own FerretDB, in a
namespace of their own); the campaign kills srsEPC or Open5GS's MME mid-download through the agent's typed `kill`
(SIGKILL, a crash) and starts it again through `start`. The recovery row comes from the core agent's own
telemetry: the pid it killed, the new process and when it listened again. The UEs are the virtual cell's, whose
user plane does not run through the EPC (no S1 here): their downloads go on, and the row says so, rather than
claiming an S1 or attach recovery this lab cannot show. Root: namespaces, the EPC's tun device; holds the srsRAN
lock (fixed EPC addresses)."""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import pytest
import yaml

from cellab.contracts.core import StartParams
from cellab.testkit.helpers import (free_port, only_folder, result_rows, run_cellab, skip_without_open5gs, start_agent,
                                    stop_agents)

from .test_inventory_on_the_cell import (ROOT, agent_specs, srsran_lock,  # noqa: F401 (fixture)
                                         write_inventory)

KILL_AT_S, DOWN_S = 3.0, 3.0


def use_open5gs(inventory: Path, netns: str) -> tuple[str, ...]:
    """The inventory's core as Open5GS (the srsran-zmq lab's Open5GS profile), its agent's arguments: the core's
    own namespace (loopback up), where its 127.0.0.x addresses and FerretDB's port are its own."""
    skip_without_open5gs()
    data = yaml.safe_load(inventory.read_text())
    core = data["devices"]["core"][0]
    # Open5GS gives a row without an APN its default one (internet): each row names the profile's APN
    subscribers = inventory.with_name("subscribers.csv")
    subscribers.write_text(Path(core["subscribers"]).read_text().replace(",8000,,", ",8000,srsapn,"))
    core |= {"flavour": "open5gs", "subscribers": str(subscribers),
             "profile": str(ROOT / "core-config" / "examples" / "srsran-zmq-open5gs.yaml")}
    inventory.write_text(yaml.safe_dump(data))
    subprocess.run(["ip", "netns", "add", netns], check=True)
    subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=True)
    return ("--netns", netns)


@pytest.mark.extended  # a whole inventory with a real EPC (about 1 min each, srsRAN lock)
@pytest.mark.timeout(1200)
@pytest.mark.parametrize(("flavour", "daemon", "agent_daemon"), [("srsepc", "srsepc", "epc"), ("open5gs", "mme", "mme")])
def test_an_epc_daemon_killed_and_restarted_through_the_core_agent_has_its_return_from_the_agents_telemetry(
        srsran_lock, cell_and_box, netns_prefix, tmp_path, flavour, daemon, agent_daemon):  # noqa: F811 (fixture)
    port, telemetry_port = free_port(), free_port()
    topo, pty = cell_and_box
    procs: dict[str, subprocess.Popen] = {}
    os.environ["FAKE_SRSENB_UES"] = "2"
    core_ns = f"{netns_prefix}core"
    try:
        inventory = write_inventory(tmp_path, port, telemetry_port, pty)
        specs = agent_specs(topo, tmp_path, *([use_open5gs(inventory, core_ns)] if flavour == "open5gs" else []))
        for name, (role, netns, extra) in specs.items():
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)
        (tmp_path / "c.yaml").write_text(textwrap.dedent(f"""
            name: core-fault
            lab: lab.yaml
            factors: {{faults: [epc]}}
            faults:
              epc: [{{kind: core_daemon, daemon: {daemon}, at_s: {KILL_AT_S}, duration_s: {DOWN_S}}}]
            fixed: {{attenuation_db: 10}}
            workload: {{tool: probe, duration_s: 12}}
            timeouts: {{run_s: 120, request_s: 20}}
            retry: {{max_attempts: 1, backoff_s: 0}}
        """))
        out = tmp_path / "out"
        done = run_cellab("run", str(tmp_path / "c.yaml"), "--out", str(out), "--no-report", timeout_s=600)
    finally:
        stop_agents(procs)
        os.environ.pop("FAKE_SRSENB_UES", None)
        subprocess.run(["ip", "netns", "del", core_ns], check=False, capture_output=True)
    folder = only_folder(out)
    ((run_id, status, _, _, error),) = result_rows(folder)
    assert status == "ok", (error, (done.stdout + done.stderr)[-3000:])
    run_dir = folder / "runs" / run_id
    faults = json.loads((run_dir / "faults.json").read_text())
    (row,) = faults["recovery"]
    print(json.dumps(faults, indent=1))  # the measured times, for the record

    # the window is the core agent's own kill and restart of the daemon (srsEPC: its `epc`), not the injector's replies
    started, ended = ({p["action"]: p for p in faults["played"]}[a] for a in ("start", "end"))
    assert row["times_from"] == "lab" and row["daemon"] == daemon, row
    assert started["asked_s"] <= row["start_s"] <= started["applied_s"] + 0.05, (row, started)
    assert ended["asked_s"] <= row["end_s"] <= ended["applied_s"] + 0.05, (row, ended)
    assert abs(row["end_s"] - row["start_s"] - DOWN_S) < 1.0, row
    # a new process, the one the agent runs at the end, listening again after its restart
    core = json.loads((run_dir / "core-status.json").read_text())
    epc = next(d for d in core["daemons"] if d["name"] == agent_daemon)
    assert core["ok"] and core["flavour"] == flavour, core
    assert epc["running"] and epc["pid"] == row["daemon_pid_restarted"], (core, row)
    assert isinstance(row["daemon_pid_killed"], int) and row["daemon_pid_killed"] != row["daemon_pid_restarted"]
    assert row["daemon_restarted_s"] == row["end_s"]
    # its socket (srsEPC's GTP-U, the MME's GTP-C) is bound at once: seen within the agent's settle wait (2 s)
    assert row["end_s"] <= row["daemon_listening_s"] < row["end_s"] + StartParams().settle_s, row
    assert row["daemon_back_after_end_s"] == pytest.approx(row["daemon_listening_s"] - row["end_s"]), row
    # the virtual cell's user plane does not run through the EPC: no UE lost its link or its download
    for ue_row in [row, *row["other_ues"]]:
        assert ue_row["rlf_s"] is None and ue_row["pre_fault_bps"] > 1e5, ue_row
        assert ue_row["longest_stall_s"] < 1.0, ue_row
    events = [json.loads(line) for line in (run_dir / "lab_events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["by"].startswith("core1") and e["daemon"] == agent_daemon] == [
        "core_daemon_killed", "core_daemon_started", "core_daemon_listening"], events
