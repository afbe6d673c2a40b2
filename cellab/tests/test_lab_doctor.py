"""`cellab doctor --lab`: a go/no-go table of a lab inventory whose agents all run on this host as separate
`cellab agent` processes over CURVE: the virtual-android lab's phones (the fake adb server, through the real adb
client), the virtual cell's Mini-Circuits serial attenuator (the bridge), the server in the lab's server
namespace, srsenb (ZMQ radio) and srsEPC from the srsRAN bundle. All green once the phones are prepared; a
swapped serial, a mismatched key, a stopped agent and Wi-Fi left on are each named, and the exit is 1; a bad
inventory file exits 2 naming it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.contracts.registry import load
from cellab.testkit.helpers import free_port, run_cellab, start_agent, start_cell_attenuator, stop_agents, write_lab

ROOT = Path(__file__).resolve().parents[2]
BUNDLE = ROOT.parent / "shared" / "tools" / "srsran"
WIDE = {**os.environ, "COLUMNS": "600"}  # one table row per line: the assertions read rows, not wrapped text
AGENTS = ("server1", "ue1", "ue2", "enb1", "core1", "atten1")


def doctor(path: Path, *args: str) -> tuple[int, list[tuple[str, str, str, str]], str]:
    """(exit code, table rows (name, check, status, detail), all the output)."""
    done = run_cellab("doctor", "--lab", str(path), *args, timeout_s=120, env=WIDE)
    rows = []
    for line in done.stdout.splitlines():
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if len(cells) == 4 and cells[2] in ("ok", "warn", "fail"):
            rows.append((cells[0], cells[1], cells[2], cells[3]))
    return done.returncode, rows, done.stdout + done.stderr


def status_of(rows: list[tuple[str, str, str, str]], name: str, check: str) -> tuple[str, str]:
    found = [(status, detail) for n, c, status, detail in rows if n == name and c == check]
    assert len(found) == 1, (name, check, rows)
    return found[0]


def write_inventory(tmp: Path, port: int, telemetry_port: int, serials: list[str], pty: Path,
                    server_address: str) -> Path:
    """write_lab's server, two UEs and eNB, made a one-host lab of Android phones behind the cell's serial
    attenuator, with srsEPC as its core."""
    path = write_lab(tmp, port, telemetry_port, enb=True, ues=2)
    for name in ("atten1", "core1"):
        generate_keypair(tmp / "keys", name)
    data = yaml.safe_load(path.read_text())
    data["name"] = f"doctor-{tmp.name}"[:60]  # a bench lease of its own
    data["agents"] += [{"name": "atten1", "role": "attenuator", "host": "laptop", "public_key": "keys/atten1.key"},
                       {"name": "core1", "role": "core", "host": "edge", "public_key": "keys/core1.key"}]
    devices = data["devices"]
    devices["servers"][0]["address"] = server_address
    devices["enb"][0]["profile"] = str(ROOT / "ran-config" / "examples" / "zmq-25prb.yaml")
    devices["core"] = [{"name": "epc", "flavour": "srsepc", "agent": "core1",
                        "profile": str(ROOT / "core-config" / "examples" / "srsran-zmq.yaml")}]
    devices["attenuators"] = [{"name": "box", "model": "minicircuits-rc4dat", "transport": "serial",
                               "address": str(pty), "channels": 2, "min_db": 0, "max_db": 95, "step_db": 0.25,
                               "agent": "atten1"}]
    for i, (ue, serial) in enumerate(zip(devices["ues"], serials, strict=True)):
        ue |= {"kind": "android", "serial": serial, "attenuator": {"attenuator": "box", "channel": i + 1}}
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def one_host_lab(require_root, netns_prefix, tmp_path):
    if shutil.which("adb") is None:
        pytest.skip("needs Debian's adb client (make setup)")
    if not (BUNDLE / "bin" / "srsenb").is_file():
        pytest.skip(f"the srsRAN bundle is absent ({BUNDLE}): srsenb and srsEPC of this lab")
    lab = load("cellab.labs", "virtual-android", "embedded lab")(prefix=netns_prefix, ues=2)
    procs: dict[str, subprocess.Popen] = {}
    bridge = None
    try:
        topo = lab.up()
        pty = tmp_path / "atten.pty"
        bridge = start_cell_attenuator(topo.extra["ctl"], pty, 2)
        port, telemetry_port = free_port(), free_port()
        serials = list(topo.extra["phones"])
        path = write_inventory(tmp_path, port, telemetry_port, serials, pty, topo.server.address)
        adb = ("--kind", "android", "--adb-port", str(topo.extra["adb_port"]))
        specs = {"server1": ("server", topo.server.netns, ()),
                 "ue1": ("ue", None, (*adb, "--serial", serials[0])),
                 "ue2": ("ue", None, (*adb, "--serial", serials[1])),
                 "enb1": ("enb", None, ("--srsran-bin", str(BUNDLE / "bin"))),
                 "core1": ("core", None, ("--srsran-bin", str(BUNDLE / "bin"))),
                 "atten1": ("attenuator", None, ())}
        for name, (role, netns, extra) in specs.items():
            procs[name] = start_agent(tmp_path, name, role, netns, port, telemetry_port, *extra)
        yield path, lab, serials, procs
    finally:
        stop_agents(procs, grace_s=15)
        if bridge is not None:
            bridge.terminate()
            bridge.wait(5)
        lab.down()


# beside other tests: the doctor times nothing it can fail on (a clock offset is ok or warn), the lab's cell and
# phones only have to answer, no BPF module is loaded, and the bench lease is the test's own
@pytest.mark.shares_cpu
def test_a_lab_is_green_once_its_phones_are_prepared_and_each_fault_is_named(one_host_lab, tmp_path):
    path, lab, serials, procs = one_host_lab
    phones = [lab.adb_server.phones[s] for s in serials]

    # fresh virtual phones are on Wi-Fi with mobile data off: named, and left as they are without --fix
    code, rows, said = doctor(path, "--connect-timeout", "60")
    assert code == 1, said
    for agent in ("ue1", "ue2"):
        assert status_of(rows, agent, "Wi-Fi")[0] == "fail"
        assert status_of(rows, agent, "mobile data")[0] == "fail"
    assert all(p.state.wifi and not p.state.mobile_data for p in phones)
    for agent in AGENTS:  # the rest of the lab answers
        for check in ("reachable", "key", "version"):
            assert status_of(rows, agent, check)[0] == "ok", (agent, check, said)

    code, rows, said = doctor(path, "--fix", "--connect-timeout", "30")
    assert code == 0, said
    assert status_of(rows, "phone (ue1)", "fix") == ("ok", "prepared: screen on, stay awake, wifi off, mobile data on")
    assert not any(p.state.wifi or not p.state.mobile_data for p in phones)

    code, rows, said = doctor(path, "--connect-timeout", "30")
    assert code == 0, said
    assert not [r for r in rows if r[2] == "fail"], said
    expected = {("phone (ue1)", "serial"), ("phone2 (ue2)", "serial"), ("enb1", "srsenb"), ("enb1", "radio"),
                ("core1", "srsepc"), ("atten1", "box channel 1"), ("atten1", "box channel 2"), ("server1", "ports"),
                ("server1", "cellab-send"), ("ue1", "probe"), ("ue2", "airplane mode")}
    assert expected <= {(r[0], r[1]) for r in rows}, said
    assert all(status_of(rows, a, "clock offset")[0] in ("ok", "warn") for a in AGENTS)
    assert "go" in said.splitlines()[-1]

    # a swapped serial, a key that is not the agent's, Wi-Fi turned on behind the lab's back
    data = yaml.safe_load(path.read_text())
    for ue, serial in zip(data["devices"]["ues"], reversed(serials), strict=True):
        ue["serial"] = serial
    path.write_text(yaml.safe_dump(data))
    other = tmp_path / "other-keys"
    generate_keypair(other, "atten1")
    shutil.copy(tmp_path / "keys" / "atten1.key", tmp_path / "atten1.key.orig")
    shutil.copy(other / "atten1.key", tmp_path / "keys" / "atten1.key")
    phones[0].state.wifi = True
    code, rows, said = doctor(path, "--connect-timeout", "5")
    assert code == 1, said
    status, detail = status_of(rows, "phone (ue1)", "serial")
    assert status == "fail" and f"is phone {serials[1]}, but its agent ue1 drives phone {serials[0]}" in detail
    assert status_of(rows, "phone2 (ue2)", "serial")[0] == "fail"
    status, detail = status_of(rows, "atten1", "key")
    assert status == "fail" and detail.startswith("key mismatch: the controller refused a connection"), detail
    assert status_of(rows, "ue1", "Wi-Fi")[0] == "fail"
    assert status_of(rows, "ue2", "Wi-Fi")[0] == "ok"
    assert phones[0].state.wifi  # no --fix: nothing changed

    # the key back, the server agent stopped
    shutil.copy(tmp_path / "atten1.key.orig", tmp_path / "keys" / "atten1.key")
    procs["server1"].terminate()
    procs["server1"].wait(15)
    code, rows, said = doctor(path, "--connect-timeout", "5")
    assert code == 1, said
    status, detail = status_of(rows, "server1", "reachable")
    assert status == "fail" and "did not connect within 5 s" in detail and "host edge (127.0.0.1)" in detail
    assert status_of(rows, "server1", "key")[1].startswith("key mismatch or not reachable: no connection attempt")
    assert status_of(rows, "atten1", "key")[0] == "ok"


def test_a_bad_inventory_exits_2_naming_the_file_and_field(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    done = run_cellab("doctor", "--lab", str(missing), timeout_s=60)
    assert done.returncode == 2 and str(missing) in " ".join(done.stderr.split()), done.stderr
    path = write_lab(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["agents"][0]["role"] = "router"
    path.write_text(yaml.safe_dump(data))
    done = run_cellab("doctor", "--lab", str(path), timeout_s=60)
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and str(path) in said and "agents[0].role" in said, said
    assert "Traceback" not in done.stderr
    done = run_cellab("doctor", "--fix", timeout_s=60)
    assert done.returncode == 2 and "--lab" in done.stderr
