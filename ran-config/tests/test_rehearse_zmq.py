"""The rehearsal lab on the real srsRAN stack (issues 40 and 41): `cellab rehearse up NAME --radio srsran-zmq` holds
the srsRAN host lock and the namespaces (`cellab ran zmq-stack`), runs the real agents over CURVE (srsenb through
the eNB agent, srsEPC through the core agent, a UE agent in srsue's namespace, the Mini-Circuits box emulated in
front of the ZMQ broker's per-UE gain); `cellab doctor --lab` is go on it; a campaign on its inventory with an
`enb_restart` fault restarts the real srsenb through the eNB agent, srsue is restarted with it by the stack (its
events name it) and attaches again, and the recovery row comes from the agents' telemetry (the eNB's per-UE reports,
the UE's own flow), srsue's way back read on the stack's clock too (the broker's record); `down` stops exactly what `up` started
and releases the lock. This is what docs/real-lab.md's rehearse section tells a user to do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from cellab.hostlock import SRSRAN_LOCK
from cellab.inventory.rehearse import Rehearsal
from cellab.inventory.rehearse_procs import group
from cellab.labs import instances
from cellab.results.cell_time import stack_seconds
from cellab.testkit.helpers import only_folder, result_rows

from .conftest import LOCK_WAIT_S

FAULT_AT_S, FAULT_S, RUN_S = 8.0, 4.0, 40.0


def cellab(*args: str, env: dict, timeout_s: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True, env=env,
                          timeout=timeout_s)


def lock_holders() -> set[int]:
    """The pids holding the srsRAN host lock (its flock in /proc/locks; other srsRAN users on this host may take
    it the moment the rehearsal lets go)."""
    inode = SRSRAN_LOCK.stat().st_ino
    holders = set()
    for line in Path("/proc/locks").read_text().splitlines():
        fields = line.split()
        if "FLOCK" in fields and "->" not in fields and int(fields[-3].rsplit(":", 1)[1]) == inode:
            holders.add(int(fields[-4]))
    return holders


def stack_events(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "stack" / "stack_events.jsonl").read_text().splitlines()]


@pytest.mark.root
@pytest.mark.extended  # the whole rehearsal on the real stack, one 60 s run (about 3 min)
@pytest.mark.timeout(LOCK_WAIT_S + 900)
def test_rehearsal_on_srsran_zmq_is_go_recovers_an_enb_restart_and_goes_down_clean(bundle, tmp_path):
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": str(LOCK_WAIT_S),
                        "COLUMNS": "600"}
    root, name = tmp_path / "rehearse", "rz"
    began = time.monotonic()
    done = cellab("rehearse", "up", name, "--radio", "srsran-zmq", "--root", str(root), env=env,
                  timeout_s=LOCK_WAIT_S + 120)
    assert done.returncode == 0, done.stdout + done.stderr
    up_s = time.monotonic() - began
    rehearsal = Rehearsal.load(root / name)
    try:
        stack_pid = next(p.pid for p in rehearsal.processes if p.name == "zmq-stack")
        assert lock_holders() == {stack_pid}  # the rehearsal's stack holds it from up on
        inventory = yaml.safe_load(Path(rehearsal.inventory).read_text())
        assert {a["role"] for a in inventory["agents"]} == {"server", "attenuator", "enb", "core", "ue"}
        assert inventory["devices"]["enb"][0]["rf"] == "zmq" and inventory["devices"]["core"][0]["flavour"] == "srsepc"
        began = time.monotonic()
        doctor = cellab("doctor", "--lab", rehearsal.inventory, "--connect-timeout", "30", env=env, timeout_s=180)
        took = {"up": up_s, "doctor": time.monotonic() - began}
        rows = [cells for line in doctor.stdout.splitlines()
                if len(cells := [c.strip() for c in line.split("│")[1:-1]]) == 4 and cells[2] in ("ok", "warn", "fail")]
        assert doctor.returncode == 0 and rows and not [r for r in rows if r[2] == "fail"], doctor.stdout
        assert {"enb1", "core1", "ue1", "atten1", "server1"} <= {r[0] for r in rows}, rows
        (tmp_path / "c.yaml").write_text(textwrap.dedent(f"""
            name: rehearse-enb-restart
            lab: {rehearsal.inventory}
            factors: {{faults: [enb]}}
            faults: {{enb: [{{kind: enb_restart, at_s: {FAULT_AT_S}, duration_s: {FAULT_S}}}]}}
            fixed: {{attenuation_db: 5}}
            workload: {{tool: probe, duration_s: {RUN_S}}}
            timeouts: {{run_s: 300, request_s: 20}}
            retry: {{max_attempts: 1, backoff_s: 0}}
        """))
        out = tmp_path / "out"
        began = time.monotonic()
        run = cellab("run", str(tmp_path / "c.yaml"), "--out", str(out), "--no-report", env=env, timeout_s=600)
        took["campaign"] = time.monotonic() - began
        events = stack_events(rehearsal.folder)
    finally:
        began = time.monotonic()
        down = cellab("rehearse", "down", name, "--root", str(root), env=env, timeout_s=180)
    took["down"] = time.monotonic() - began
    assert down.returncode == 0, down.stdout + down.stderr
    assert not [p.name for p in rehearsal.processes if group(p)]
    assert not instances.namespaces_of(rehearsal.prefix) and stack_pid not in lock_holders()
    check_run(only_folder(out), rehearsal.folder, events, run.stdout[-3000:] + run.stderr[-3000:], took)


def check_run(folder: Path, rehearsal_folder: Path, events: list[dict], said: str, took: dict[str, float]) -> None:
    """The campaign's one run: ok, srsenb restarted inside its fault, srsue restarted with it and attached, the
    recovery row from the agents' telemetry, srsue's way back on the stack clock."""
    ((run_id, status, _, _, error),) = result_rows(folder)
    assert status == "ok", (error, said)
    run_dir = folder / "runs" / run_id
    t0 = json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]
    faults = json.loads((run_dir / "faults.json").read_text())
    (row,) = faults["recovery"]
    print(json.dumps({"row": row, "final_state": faults["final_state"]}, indent=1))
    # the real srsenb went away and a new one came, inside the fault, as the stack saw it in its namespace
    gone = [e["t_s"] - t0 for e in events if e["event"] == "srsenb_gone" and e["t_s"] - t0 < RUN_S]
    back = [e["t_s"] - t0 for e in events if e["event"] == "srsenb_up" and 0 < e["t_s"] - t0 < RUN_S]
    assert len(gone) == len(back) == 1 and row["start_s"] - 3 < gone[0] <= row["start_s"] + 0.5, (gone, row)
    assert row["start_s"] < back[0] <= row["end_s"] + 0.5, (back, row)
    # srsue and the broker went with srsenb and started afresh with the new one, named in the stack's events
    restarted = [e for e in events if e["event"] == "radio_started" and e["t_s"] - t0 >= back[0] - 0.5]
    assert restarted and restarted[0]["why"].startswith("srsenb restarted") and "srsue" in restarted[0]["restarted"], \
        events
    attached = [e for e in events if e["event"] == "ue_attached" and e["start"] == restarted[0]["start"]]
    assert attached and attached[0]["ip"] == "172.16.0.2", events
    # the recovery row from the agents' telemetry: the eNB's reports of the UE stopped and resumed; the UE's own
    # flow delivered bytes again after the restart
    assert row["rlf_s"] is not None and row["reattach_s"] is not None and row["reattach_s"] > row["end_s"], row
    assert row["user_plane_restored_s"] is not None and row["user_plane_restored_s"] > row["end_s"], row
    assert faults["final_state"]["enb_up"] is True and faults["final_state"]["rrc_state"] == {"0": "connected"}
    # the UE agent's own state (the stack's control socket: srsue attached or not) in the run's events too
    said_by_ue = [e for e in map(json.loads, (run_dir / "lab_events.jsonl").read_text().splitlines())
                  if e["by"].startswith("ue1 ue_state")]
    assert [e["event"] for e in said_by_ue] == ["rlf", "connect_complete"], said_by_ue
    assert row["start_s"] - 1 < said_by_ue[0]["t_s"] - t0 < said_by_ue[1]["t_s"] - t0 < row["end_s"] + 10, said_by_ue
    # srsue's way back on the stack's own clock (the new broker's record, from srsue's start; srsRAN's timers
    # count it) beside the wall clock: its attach, and the run's user plane back
    clock = rehearsal_folder / "stack" / "clock" / str(restarted[0]["start"]) / "stack-clock-dl.bin"
    stack_s_of = stack_seconds(clock, t0)
    assert stack_s_of is not None, clock
    radio_s = restarted[0]["t_s"] - t0
    spans = {"ue_attached": attached[0]["t_s"] - t0, "reattach_s": row["reattach_s"],
             "user_plane_restored_s": row["user_plane_restored_s"]}
    on_wall = {k: round(t - radio_s, 2) for k, t in spans.items()}
    on_stack = {k: round(stack_s_of(t) - stack_s_of(radio_s), 2) for k, t in spans.items()}
    assert all(0 < st <= w * 1.05 + 0.3 for st, w in zip(on_stack.values(), on_wall.values(), strict=True)), \
        (on_stack, on_wall)  # the stack runs at most at real time
    print(f"wall s: {', '.join(f'{k} {v:.1f}' for k, v in took.items())} (up: the lock wait included); fault {row['start_s']:.2f}..{row['end_s']:.2f} s, eNB "
          f"reports back {row['reattach_s']:.2f} s, user plane back {row['user_plane_restored_s']:.2f} s (workload "
          f"s); from srsue's restart, wall s {on_wall}, stack s {on_stack}")
