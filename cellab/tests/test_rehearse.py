"""Issue 40: `cellab rehearse` brings up a lab inventory's whole path on this host (the virtual cell, a virtual
phone behind the fake adb server, a virtual UE, an emulated box of a real family bridged to the cell, real agents
over CURVE); `cellab doctor --lab` is go on it without --fix; a campaign on its inventory whose schedule names
channel 1 walks the phone and leaves the virtual UE where it is (read from the cell itself while the run plays);
`rehearse down` leaves no process, namespace or record behind."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
import yaml

from cellab.inventory.rehearse import Rehearsal
from cellab.inventory.rehearse_procs import group
from cellab.labs import instances
from cellab.labs.cellctl import CellControl, CellControlError
from cellab.testkit.helpers import free_port, only_folder, result_rows, run_cellab

WIDE = {**os.environ, "COLUMNS": "600"}  # one doctor row per line
# 1 dB steps: JFW's own step
WALK = "channels: [1]\nupdate_interval_s: 0.5\nsegments:\n  - {kind: ramp, from_db: 10, to_db: 40, duration_s: 3}\n"


def doctor_rows(inventory: str) -> tuple[int, list[list[str]], str]:
    done = run_cellab("doctor", "--lab", inventory, "--connect-timeout", "30", timeout_s=120, env=WIDE)
    rows = [cells for line in done.stdout.splitlines()
            if len(cells := [c.strip() for c in line.split("│")[1:-1]]) == 4 and cells[2] in ("ok", "warn", "fail")]
    return done.returncode, rows, done.stdout + done.stderr


def up(root: Path, name: str, *args: str) -> Rehearsal:
    done = run_cellab("rehearse", "up", name, "--root", str(root), *args, timeout_s=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return Rehearsal.load(root / name)


def assert_down(root: Path, rehearsal: Rehearsal) -> None:
    done = run_cellab("rehearse", "down", rehearsal.name, "--root", str(root), timeout_s=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not [p.name for p in rehearsal.processes if group(p)]  # nor any of their children
    assert not instances.namespaces_of(rehearsal.prefix)
    assert not instances.is_live(rehearsal.prefix)
    assert "no rehearsals are up" in run_cellab("rehearse", "list", "--root", str(root)).stdout


class CellWatch:
    """The cell's own attenuation of UE 0 and UE 1, read every 0.1 s while a campaign runs."""

    def __init__(self, endpoint: str):
        self.samples: list[tuple[float, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(endpoint,), daemon=True)

    def _watch(self, endpoint: str) -> None:
        cell = CellControl(endpoint, 2000)
        try:
            while not self._stop.is_set():
                try:
                    self.samples.append(tuple(cell.get_attenuation(ue)["attenuation_db"] for ue in (0, 1)))
                except CellControlError:  # a busy host: a late reply is a sample missed, not the end of the watch
                    cell.close()
                    cell = CellControl(endpoint, 2000)
                time.sleep(0.1)
        finally:
            cell.close()

    def __enter__(self) -> CellWatch:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(5)


def test_a_rehearsal_is_go_runs_a_campaign_that_walks_only_the_phone_and_goes_down_clean(require_root, tmp_path):
    root = tmp_path / "rehearse"
    started = time.monotonic()
    rehearsal = up(root, "walk", "--phones", "1", "--virtual-ues", "1", "--atten-family", "jfw")
    up_s = time.monotonic() - started
    try:
        assert len(rehearsal.start_lines) == 4 and all(" key " in line for line in rehearsal.start_lines)
        code, rows, said = doctor_rows(rehearsal.inventory)
        assert code == 0, said
        assert not [r for r in rows if r[2] == "fail"], said
        checked = {(r[0], r[1]) for r in rows if r[2] == "ok"}
        assert {("phone1", "Wi-Fi"), ("phone1", "mobile data"), ("atten1", "box1 channel 1"),
                ("atten1", "box1 channel 2"), ("ue1", "namespace"), ("server1", "ports")} <= checked, said
        # each agent's start line, and the controller's line for it, are the same
        for line in rehearsal.start_lines:
            agent = line.split(":")[0].removeprefix("agent ")
            (reach,) = [r for r in rows if r[:2] == [agent, "reachable"]]
            assert reach[3].endswith(f"the controller saw: {line}"), (reach, line)
        # one host, one clock: its sync row once, naming the controller and every agent on it
        (clock,) = [r for r in rows if r[1] == "clock sync"]
        assert clock[0] == "host here" and "controller, server1, atten1, phone1, ue1" in clock[3], said

        (tmp_path / "walk.yaml").write_text(WALK)
        campaign = tmp_path / "c.yaml"
        campaign.write_text(textwrap.dedent(f"""
            name: walk-phone
            lab: {rehearsal.inventory}
            fixed: {{schedule: walk, attenuation_db: 10}}
            schedules: {{walk: {{file: walk.yaml}}}}
            workload: {{tool: iperf3, duration_s: 4}}
            timeouts: {{run_s: 90, request_s: 20}}
        """))
        with CellWatch(rehearsal.cell_ctl) as watch:
            result = run_cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--no-report", timeout_s=300)
        assert result.returncode == 0, result.stdout + result.stderr
        folder = only_folder(tmp_path / "out")
        (run_id, status, *_), = result_rows(folder)
        assert status == "ok"
        run_dir = folder / "runs" / run_id
        played = [json.loads(line) for line in (run_dir / "attenuation.jsonl").read_text().splitlines()]
        points = [p for p in played if "planned_s" in p]
        assert {p["channel"] for p in points} == {1} and max(p["db"] for p in points) == 40.0, played
        # the cell itself: while the phone's channel walked, the virtual UE's stayed at the run's 10 dB
        walking = [(phone, other) for phone, other in watch.samples if 10.0 < phone <= 40.0]
        assert len({phone for phone, _ in walking}) >= 4, watch.samples
        assert {other for _, other in walking} == {10.0}, watch.samples
        samples = [json.loads(line) for line in (run_dir / "telemetry" / "phone1.jsonl").read_text().splitlines()]
        rsrp = [s["rsrp_dbm"] for s in samples if s.get("topic") == "signal"]
        assert rsrp and max(rsrp) - min(rsrp) >= 10, rsrp  # the phone saw its walk
        # Wi-Fi turned on behind the lab's back: named, with the adb command for this adb server (-P)
        serial = f"vphone-{rehearsal.name}-1"
        subprocess.run(["adb", "-P", str(rehearsal.adb_port), "-s", serial, "shell", "svc", "wifi", "enable"],
                       check=True, timeout=30)
        code, rows, said = doctor_rows(rehearsal.inventory)
        (wifi,) = [r for r in rows if r[:2] == ["phone1", "Wi-Fi"]]
        assert code == 1 and wifi[2] == "fail", said
        assert f"`adb -P {rehearsal.adb_port} -s {serial} shell svc wifi disable`" in wifi[3], said
    finally:
        assert_down(root, rehearsal)
    print(f"rehearse up took {up_s:.1f} s ({rehearsal.up_s:.1f} s after the CLI started)")


def test_the_host_doctor_stops_the_adb_server_it_started_and_leaves_a_running_one(tmp_path):
    """`cellab doctor` lists phones through adb; an adb server it had to start is stopped again, one that was
    running (here the fake adb server) is left running."""
    if shutil.which("adb") is None:
        pytest.skip("needs Debian's adb client (make setup)")
    port = free_port()
    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(port)}  # not 5037: another adb server may be there
    done = run_cellab("doctor", env=env, timeout_s=180)
    assert "adb devices" in done.stdout, done.stdout + done.stderr
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
    fake = subprocess.Popen([sys.executable, "-m", "cellab", "ue", "android", "fake-adb", "--port", str(port),
                             "--storage", str(tmp_path)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and fake.poll() is None
                time.sleep(0.2)
        done = run_cellab("doctor", env=env, timeout_s=180)
        assert "3A4B5C6D" in done.stdout, done.stdout  # one of the fake server's default phones, listed
        assert fake.poll() is None  # still serving: the doctor did not kill a server it found running
    finally:
        fake.terminate()
        fake.wait(15)


# one family in `make test`, the other two in `make bench BENCH=extended` (each a whole rehearsal: ~10 s)
@pytest.mark.parametrize("family", ["minicircuits", pytest.param("adaura", marks=pytest.mark.extended),
                                    pytest.param("virtual", marks=pytest.mark.extended)])
def test_every_family_of_box_is_go_without_fix_and_a_killed_agent_restarts(require_root, tmp_path, family):
    root = tmp_path / "rehearse"
    rehearsal = up(root, family, "--phones", "0", "--virtual-ues", "2", "--atten-family", family)
    try:
        (atten,) = [p for p in rehearsal.processes if p.name == "atten1"]
        os.kill(atten.pid, signal.SIGKILL)
        deadline = time.monotonic() + 10
        while group(atten) and time.monotonic() < deadline:
            time.sleep(0.1)
        listed = run_cellab("rehearse", "list", "--root", str(root)).stdout
        assert f"1 of {len(rehearsal.processes)} processes gone (atten1)" in listed, listed
        done = run_cellab("rehearse", "restart", family, "atten1", "--root", str(root))
        assert done.returncode == 0 and "atten1 started again" in done.stdout, done.stdout + done.stderr
        again = run_cellab("rehearse", "restart", family, "atten1", "--root", str(root))
        assert again.returncode == 2 and "atten1 of rehearsal" in again.stderr and "is running" in again.stderr
        rehearsal = Rehearsal.load(root / family)  # the restarted agent's new pid, for down's checks
        code, rows, said = doctor_rows(rehearsal.inventory)
        assert code == 0 and not [r for r in rows if r[2] == "fail"], said
        assert {("atten1", "box1 channel 1"), ("atten1", "box1 channel 2")} <= {(r[0], r[1]) for r in rows}, said
    finally:
        assert_down(root, rehearsal)


def test_a_name_taken_down_comes_up_again_fresh(require_root, tmp_path):
    """The folder of a rehearsal that went down is reused: new keys, ports and logs, never the old ones' lines."""
    root = tmp_path / "rehearse"
    first = up(root, "again", "--phones", "0", "--atten-family", "virtual")
    assert_down(root, first)
    again = up(root, "again", "--phones", "0", "--atten-family", "virtual")
    try:
        bind = yaml.safe_load(Path(again.inventory).read_text())["controller"]["bind"]
        assert all(f"controller {bind}," in line for line in again.start_lines), (bind, again.start_lines)
        assert not set(again.start_lines) & set(first.start_lines)  # new keys: no line of the first one read
        code, rows, said = doctor_rows(again.inventory)
        assert code == 0, said
    finally:
        assert_down(root, again)


@pytest.mark.parametrize("args, says", [
    (["--atten-family", "keysight"], "--atten-family: unknown or not rehearsable 'keysight'"),
    (["--radio", "srsran-zmq", "--phones", "1"], "--phones: 1: the virtual phones live on the virtual cell"),
    (["--radio", "srsran-zmq", "--virtual-ues", "5"], "--virtual-ues: 5 srsue"),
    (["--radio", "srsran-zmq", "--atten-family", "virtual"], "--atten-family: virtual is the virtual cell's own"),
    (["--phones", "0", "--virtual-ues", "0"], "1..16 UEs in all"),
])
def test_a_bad_rehearsal_is_refused_before_anything_starts(tmp_path, args, says):
    done = run_cellab("rehearse", "up", "x", "--root", str(tmp_path), *args)
    assert done.returncode == 2 and says in done.stderr, done.stderr
    assert not (tmp_path / "x").exists()


def test_srsran_zmq_without_the_bundle_is_refused_naming_the_folder(tmp_path):
    empty = tmp_path / "nobin"
    empty.mkdir()
    (empty / "srsue").write_text("")  # one of the three: the refusal names the two missing
    done = run_cellab("rehearse", "up", "x", "--root", str(tmp_path), "--radio", "srsran-zmq",
                      env={**WIDE, "CELLAB_SRSRAN_BIN": str(empty)})
    said = " ".join(done.stderr.split())
    assert done.returncode == 2 and f"srsran-zmq runs srsRAN 4G from {empty}, which has no srsenb, srsepc" in said, said
    assert not (tmp_path / "x").exists()


def test_down_of_a_rehearsal_that_is_not_up_names_it(tmp_path):
    done = run_cellab("rehearse", "down", "nothere", "--root", str(tmp_path))
    assert done.returncode == 2 and "no rehearsal 'nothere' is up" in done.stderr, done.stderr
