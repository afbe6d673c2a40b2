"""Faults on a lab inventory (issue 41's Show), rehearsed on this host: every agent a separate `cellab agent` over
CURVE, the radio the virtual cell. Two phones are the virtual-android lab's, behind the fake adb server, driven by
the Android agent through the real adb client (their signal and registration are the cell's); the attenuator is
the cell's Mini-Circuits serial emulator, driven by the attenuator agent; the eNB agent runs the RAN room's
stand-in srsenb. One 31 s download to each phone with, through the agents the inventory names:
- a 20 s RF outage on phone A's attenuator channel (max_db): the phone loses the cell (its radio link fails, its
  Android agent says it is out) and comes back after the channel does;
- phone B's radio off for 6 s (airplane mode through adb), its agent answering throughout;
- the server's link to the UEs cut for 3 s (the server agent: nothing it sends from the UEs' address leaves);
- an eNB restart (srsenb stopped and started again by the eNB agent): the eNB's per-UE reports stop and resume.
Each fault gets its recovery row from the agents' telemetry and the phones' own flows. A fault the inventory has
no device for is refused at validate, naming what it lacks. Root: namespaces, the cell."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.contracts.registry import load
from cellab.testkit.helpers import (free_port, only_folder, result_rows, run_cellab, start_agent,
                                    start_cell_attenuator, stop_agents)

ROOT = Path(__file__).resolve().parents[2]
FAKE_SRSENB = ROOT / "ran-config" / "tests" / "fake_srsenb.py"
OUTAGE_AT_S, OUTAGE_S = 2.0, 20.0
RADIO_OFF_AT_S, RADIO_OFF_S = 3.0, 6.0
SGI_AT_S, SGI_S = 16.0, 3.0  # phone B's row (its radio back long before)
ENB_AT_S, ENB_S = 24.0, 4.0  # after the outage: the eNB reports phone A again only once it is back

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")


def write_inventory(tmp: Path, port: int, telemetry_port: int, pty: Path, serials: list[str],
                    enb: bool = True, server_address: str = "10.200.0.1") -> Path:
    roles = {"server1": "server", "ue1": "ue", "ue2": "ue", "atten1": "attenuator"} | ({"enb1": "enb"} if enb else {})
    for name in ["controller", *roles]:
        generate_keypair(tmp / "keys", name)
    devices: dict = {
        "attenuators": [{"name": "box", "model": "minicircuits-rc4dat", "transport": "serial", "address": str(pty),
                         "channels": 2, "min_db": 0, "max_db": 95, "step_db": 0.25, "agent": "atten1"}],
        "ues": [{"name": f"phone-{x}", "kind": "android", "serial": serial, "agent": f"ue{i + 1}",
                 "attenuator": {"attenuator": "box", "channel": i + 1}}
                for i, (x, serial) in enumerate(zip("ab", serials, strict=True))],
        "servers": [{"name": "edge", "agent": "server1", "address": server_address}],
    }
    if enb:
        devices["enb"] = [{"name": "enb", "agent": "enb1", "rf": "zmq",
                           "profile": str(ROOT / "ran-config" / "examples" / "zmq-25prb.yaml")}]
    inventory = {
        "name": f"faults-{tmp.name}"[:60],  # a bench lease of its own
        "controller": {"bind": f"tcp://127.0.0.1:{port}", "telemetry_bind": f"tcp://127.0.0.1:{telemetry_port}",
                       "secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "here", "address": "127.0.0.1", "addresses": ["10.200.0.1"]}],
        "agents": [{"name": n, "role": r, "host": "here", "public_key": f"keys/{n}.key"} for n, r in roles.items()],
        "devices": devices,
    }
    path = tmp / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    return path


def test_a_fault_the_inventory_has_no_device_for_is_refused_at_validate_naming_it(tmp_path):
    # no eNB, no core, and the server reached by the UEs at the address the bus reaches its agent at
    write_inventory(tmp_path, 7700, 7701, tmp_path / "atten.pty", ["vphone-a", "vphone-b"], enb=False,
                    server_address="127.0.0.1")
    (tmp_path / "c.yaml").write_text(textwrap.dedent("""
        name: refused
        lab: lab.yaml
        factors: {faults: [core, enb, sgi, s1, radio]}
        faults:
          core: [{kind: core_daemon, daemon: mme, at_s: 1, duration_s: 1}]
          enb: [{kind: enb_restart, at_s: 1, duration_s: 1}]
          sgi: [{kind: sgi_cut, at_s: 1, duration_s: 1}]
          s1: [{kind: s1_cut, at_s: 1, duration_s: 1}]
          radio: [{kind: radio_outage, ue: 2, at_s: 1, duration_s: 1}]
        workload: {duration_s: 5}
    """))
    done = run_cellab("validate", str(tmp_path / "c.yaml"), timeout_s=60)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stdout + done.stderr
    lab = f"lab {tmp_path / 'lab.yaml'} cannot inject this"
    assert f"faults.core[0].kind: {lab} core_daemon: the inventory names no core (devices.core)" in said, said
    assert f"faults.enb[0].kind: {lab} enb_restart: the inventory names no eNB (devices.enb)" in said, said
    assert f"faults.sgi[0].kind: {lab} sgi_cut: devices.servers[0] (edge) is reached by the UEs at 127.0.0.1, " \
           "the address the bus reaches its agent server1 at" in said, said
    assert f"faults.s1[0].kind: {lab} s1_cut: the S1 path between eNB and core is no device" in said, said
    assert f"faults.radio[0].ue: {lab} radio_outage: the inventory has 2 UE(s)" in said, said


@pytest.mark.timeout(600)
def test_rf_outage_radio_off_and_enb_restart_on_an_inventory_each_recover_on_the_agents_telemetry(
        require_root, netns_prefix, tmp_path, monkeypatch):
    fake_bin = tmp_path / "fakebin"
    fake_bin.mkdir()
    (fake_bin / "srsenb").write_text(f"#!{sys.executable}\n" + FAKE_SRSENB.read_text())
    (fake_bin / "srsenb").chmod(0o755)
    port, telemetry_port = free_port(), free_port()
    # the cell's radio link failure model on: an outage loses the link, as a phone in a shield box would
    lab = load("cellab.labs", "virtual-android", "embedded lab")(prefix=netns_prefix, ues=2, rlf=True)
    procs: dict[str, subprocess.Popen] = {}
    bridge = None
    monkeypatch.setenv("FAKE_SRSENB_UES", "2")  # the stand-in eNB reports both UEs
    try:
        topo = lab.up()
        pty = tmp_path / "atten.pty"
        bridge = start_cell_attenuator(topo.extra["ctl"], pty, 2)
        serials = topo.extra["phones"]
        write_inventory(tmp_path, port, telemetry_port, pty, serials)
        phone = ("--kind", "android", "--adb-port", str(topo.extra["adb_port"]))
        specs = {"server1": ("server", topo.server.netns, ()),
                 "ue1": ("ue", None, (*phone, "--serial", serials[0])),
                 "ue2": ("ue", None, (*phone, "--serial", serials[1])),
                 "atten1": ("attenuator", None, ()),
                 "enb1": ("enb", None, ("--srsran-bin", str(fake_bin)))}
        for name, (role, netns, extra) in specs.items():
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)
        (tmp_path / "c.yaml").write_text(textwrap.dedent(f"""
            name: inventory-faults
            lab: lab.yaml
            factors: {{faults: [three]}}
            faults:
              three:
                - {{kind: radio_outage, ue: 0, at_s: {OUTAGE_AT_S}, duration_s: {OUTAGE_S}}}
                - {{kind: ue_pause, ue: 1, at_s: {RADIO_OFF_AT_S}, duration_s: {RADIO_OFF_S}}}
                - {{kind: sgi_cut, ue: 1, at_s: {SGI_AT_S}, duration_s: {SGI_S}}}
                - {{kind: enb_restart, at_s: {ENB_AT_S}, duration_s: {ENB_S}}}
            fixed: {{attenuation_db: 20}}
            workload: {{tool: probe, duration_s: 31}}
            timeouts: {{run_s: 200, request_s: 20}}
            retry: {{max_attempts: 1, backoff_s: 0}}
        """))
        out = tmp_path / "out"
        done = run_cellab("run", str(tmp_path / "c.yaml"), "--out", str(out), timeout_s=500)
        ue2_alive = procs["ue2"].poll() is None
    finally:
        stop_agents(procs)
        if bridge is not None:  # the cell's serial attenuator
            bridge.terminate()
            bridge.wait(5)
        lab.down()
    said = done.stdout + done.stderr
    folder = only_folder(out)
    ((run_id, status, _, _, error),) = result_rows(folder)
    assert status == "ok", (error, said[-3000:])
    assert ue2_alive and "ue2 lost" not in said
    run_dir = folder / "runs" / run_id
    faults = json.loads((run_dir / "faults.json").read_text())
    outage, radio_off, sgi, restart = faults["recovery"]
    print(json.dumps(faults["recovery"], indent=1))  # the measured times, for the record

    # the RF outage on phone A's channel: the attenuator agent's replies bound it; the phone's own state (its
    # Android agent: no serving cell) says when its link failed and when it was back, after the channel was
    assert abs(outage["start_s"] - OUTAGE_AT_S) < 1.0 and abs(outage["end_s"] - OUTAGE_AT_S - OUTAGE_S) < 1.0
    assert outage["start_s"] < outage["rlf_s"] < outage["start_s"] + 3.0, outage
    assert outage["end_s"] < outage["reattach_s"] < outage["end_s"] + 5.0, outage
    assert outage["pre_fault_bps"] > 1e6 and outage["longest_stall_s"] >= OUTAGE_S - 1.0, outage
    # its search stops where the eNB restart, the next fault to hit phone A after the outage, starts
    assert (outage["cut_by_fault"], outage["searched_until_s"]) == (3, restart["start_s"]), outage
    # phone B's radio off (airplane mode): out while off, back after
    assert radio_off["ue"] == 1 and abs(radio_off["end_s"] - radio_off["start_s"] - RADIO_OFF_S) < 1.0
    assert radio_off["start_s"] < radio_off["rlf_s"] < radio_off["start_s"] + 3.0, radio_off
    assert radio_off["end_s"] < radio_off["reattach_s"] < radio_off["end_s"] + 5.0, radio_off
    # the server's link cut (its agent's set_link): phone B stays attached (no radio link failure), its flow stops
    # for the cut and its user plane is restored after it
    assert sgi["ue"] == 1 and abs(sgi["end_s"] - sgi["start_s"] - SGI_S) < 1.0, sgi
    assert sgi["rlf_s"] is None or sgi["rlf_s"] >= ENB_AT_S, sgi  # (a later one is the eNB restart's)
    assert sgi["longest_stall_s"] >= SGI_S - 0.5 and sgi["user_plane_restored_s"] >= sgi["end_s"], sgi
    # the eNB restart: the eNB's reports of each UE stopped when srsenb did and came back after its restart
    assert abs(restart["start_s"] - ENB_AT_S) < 1.5, restart
    for row in [restart, *restart["other_ues"]]:
        assert restart["start_s"] - 0.3 < row["rlf_s"] < restart["start_s"] + 1.0, row
        assert row["ue_mapped_by"] == "report_order", row  # srsenb's RNTIs: no agent here names its UE's
        assert restart["end_s"] - 0.5 < row["reattach_s"] < restart["end_s"] + 5.0, row
    assert faults["final_state"]["enb_up"] is True
    assert faults["final_state"]["rrc_state"] == {"0": "connected", "1": "connected"}
    events = [json.loads(line) for line in (run_dir / "lab_events.jsonl").read_text().splitlines()]
    assert {e["by"].split()[0] for e in events} == {"ue1", "ue2", "enb1"}
