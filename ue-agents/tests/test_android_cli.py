"""`cellab ue android fake-adb` as a process, used by the real adb client and by `cellab ue record` / `phones`."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from cellab.testkit.helpers import free_port

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")
CELLAB = [sys.executable, "-m", "cellab"]


@pytest.fixture
def fake_adb(tmp_path: Path):
    port = free_port()
    proc = subprocess.Popen([*CELLAB, "ue", "android", "fake-adb", "--port", str(port), "--storage",
                             str(tmp_path / "phones"), "--phone", "S9TEST=android9", "--phone", "P8TEST=android14"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.1)
    yield port
    proc.terminate()
    proc.wait(10)
    subprocess.run(["adb", "-P", str(port), "kill-server"], capture_output=True, timeout=10)


def test_record_writes_a_1hz_drive_log(fake_adb: int, tmp_path: Path) -> None:
    out = tmp_path / "drive.jsonl"
    done = subprocess.run([*CELLAB, "ue", "record", "--serial", "S9TEST", "--out", str(out), "--adb-port",
                           str(fake_adb), "--duration-s", "3.2"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(rows) in (3, 4, 5)
    assert all(row["rsrp_dbm"] == -95 and isinstance(row["time_ms"], int) for row in rows)
    assert rows[-1]["time_ms"] - rows[0]["time_ms"] == pytest.approx(1000 * (len(rows) - 1), abs=400)


def test_record_unknown_serial_exits_2_naming_it(fake_adb: int, tmp_path: Path) -> None:
    done = subprocess.run([*CELLAB, "ue", "record", "--serial", "NOPE", "--out", str(tmp_path / "x.jsonl"),
                           "--adb-port", str(fake_adb), "--duration-s", "1"], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2
    assert "no phone 'NOPE'" in done.stdout + done.stderr and "S9TEST" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


def test_phones_lists_model_android_root_and_signal(fake_adb: int) -> None:
    done = subprocess.run([*CELLAB, "ue", "phones", "--json", "--adb-port", str(fake_adb)], capture_output=True,
                          text=True, timeout=60)
    rows = {r["serial"]: r for r in map(json.loads, done.stdout.splitlines())}
    assert rows["S9TEST"] == {"serial": "S9TEST", "state": "device", "model": "SM-G960F", "android": "9",
                                   "rooted": False, "rsrp_dbm": -95.0}
    assert rows["P8TEST"]["rooted"] is True and rows["P8TEST"]["android"] == "14"


def test_doctor_lists_the_phones(fake_adb: int) -> None:
    import os

    env = {**os.environ, "ANDROID_ADB_SERVER_PORT": str(fake_adb), "COLUMNS": "200"}
    done = subprocess.run([*CELLAB, "doctor"], capture_output=True, text=True, timeout=120, env=env)
    text = done.stdout + done.stderr
    assert "phone S9TEST" in text and "SM-G960F, Android 9, not rooted, RSRP -95 dBm" in text
    assert "phone P8TEST" in text and "Pixel 8, Android 14, rooted" in text


def test_agent_command_refuses_an_unknown_serial(fake_adb: int, tmp_path: Path) -> None:
    done = subprocess.run([*CELLAB, "agent", "--role", "ue", "--kind", "android", "--serial", "GHOST9",
                           "--adb-port", str(fake_adb), "--name", "ue0", "--controller", "tcp://127.0.0.1:9",
                           "--key", str(tmp_path / "k"), "--controller-key", str(tmp_path / "c")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stderr
    assert "no phone 'GHOST9'" in done.stdout + done.stderr and "Traceback" not in done.stderr
