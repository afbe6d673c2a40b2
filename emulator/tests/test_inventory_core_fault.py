"""A core_daemon fault on a lab inventory, end to end (issue 41): the core agent (a separate `cellab agent`) runs the
real srsEPC of the srsRAN bundle; the campaign kills it mid-download through the agent's typed `kill` (SIGKILL, a
crash) and starts it again through `start`. The recovery row comes from the core agent's own telemetry: the pid it
killed, the new process and when it listened again. The UEs are the virtual cell's, whose user plane does not run
through srsEPC (no S1 here): their downloads go on, and the row says so, rather than claiming an S1 or attach
recovery this lab cannot show. Root: namespaces, srsEPC's tun device; holds the srsRAN lock."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from cellab.contracts.core import StartParams
from cellab.testkit.helpers import free_port, only_folder, result_rows, run_cellab, start_agent, stop_agents

from .test_inventory_on_the_cell import BUNDLE, FAKE_SRSENB, srsran_lock, write_inventory  # noqa: F401 (fixture)

KILL_AT_S, DOWN_S = 3.0, 3.0


@pytest.mark.extended  # a whole inventory with a real EPC (about 1 min, srsRAN lock)
@pytest.mark.timeout(1200)
def test_srsepc_killed_and_restarted_through_the_core_agent_has_its_return_from_the_agents_telemetry(
        srsran_lock, cell_and_box, tmp_path):  # noqa: F811 (the fixture imported above)
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "srsenb").write_text(f"#!{sys.executable}\n" + FAKE_SRSENB.read_text())
    (fake_bin / "srsenb").chmod(0o755)
    port, telemetry_port = free_port(), free_port()
    topo, pty = cell_and_box
    procs: dict[str, subprocess.Popen] = {}
    os.environ["FAKE_SRSENB_UES"] = "2"
    try:
        write_inventory(tmp_path, port, telemetry_port, pty)
        cell = ("--cell-ctl", topo.extra["ctl"])
        specs = {"server1": ("server", topo.server.netns, ()),
                 "ue1": ("ue", topo.ues[0].netns, (*cell, "--cell-ue", "0")),
                 "ue2": ("ue", topo.ues[1].netns, (*cell, "--cell-ue", "1")),
                 "atten1": ("attenuator", None, ()),
                 "enb1": ("enb", None, ("--srsran-bin", str(fake_bin))),
                 "core1": ("core", None, ("--srsran-bin", str(BUNDLE / "bin")))}
        for name, (role, netns, extra) in specs.items():
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)
        (tmp_path / "c.yaml").write_text(textwrap.dedent(f"""
            name: core-fault
            lab: lab.yaml
            factors: {{faults: [epc]}}
            faults:
              epc: [{{kind: core_daemon, daemon: srsepc, at_s: {KILL_AT_S}, duration_s: {DOWN_S}}}]
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
    folder = only_folder(out)
    ((run_id, status, _, _, error),) = result_rows(folder)
    assert status == "ok", (error, (done.stdout + done.stderr)[-3000:])
    run_dir = folder / "runs" / run_id
    faults = json.loads((run_dir / "faults.json").read_text())
    (row,) = faults["recovery"]
    print(json.dumps(faults, indent=1))  # the measured times, for the record

    # the window is the core agent's own kill and restart of srsEPC (its daemon `epc`), not the injector's replies
    started, ended = ({p["action"]: p for p in faults["played"]}[a] for a in ("start", "end"))
    assert row["times_from"] == "lab" and row["daemon"] == "srsepc", row
    assert started["asked_s"] <= row["start_s"] <= started["applied_s"] + 0.05, (row, started)
    assert ended["asked_s"] <= row["end_s"] <= ended["applied_s"] + 0.05, (row, ended)
    assert abs(row["end_s"] - row["start_s"] - DOWN_S) < 1.0, row
    # a new srsEPC process, the one the agent runs at the end, listening again after its restart
    core = json.loads((run_dir / "core-status.json").read_text())
    (epc,) = core["daemons"]
    assert core["ok"] and epc["running"] and epc["pid"] == row["daemon_pid_restarted"], (core, row)
    assert isinstance(row["daemon_pid_killed"], int) and row["daemon_pid_killed"] != row["daemon_pid_restarted"]
    assert row["daemon_restarted_s"] == row["end_s"]
    # srsEPC binds its GTP-U socket at once: seen within the agent's settle wait (2 s), not only after it
    assert row["end_s"] <= row["daemon_listening_s"] < row["end_s"] + StartParams().settle_s, row
    assert row["daemon_back_after_end_s"] == pytest.approx(row["daemon_listening_s"] - row["end_s"]), row
    # the virtual cell's user plane does not run through srsEPC: no UE lost its link or its download
    for ue_row in [row, *row["other_ues"]]:
        assert ue_row["rlf_s"] is None and ue_row["pre_fault_bps"] > 1e5, ue_row
        assert ue_row["longest_stall_s"] < 1.0, ue_row
    events = [json.loads(line) for line in (run_dir / "lab_events.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events if e["by"].startswith("core1")] == [
        "core_daemon_killed", "core_daemon_started", "core_daemon_listening"], events
