"""The real Debian `adb` client against the fake adb server (host protocol, shell v1/v2, sync)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from cellab.ue.android.phones import VirtualPhone
from cellab.ue.android.testing import DEFAULT_PHONES, phone_farm

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")


def adb(port: int, *args: str, timeout_s: float = 20) -> subprocess.CompletedProcess:
    return subprocess.run(["adb", "-P", str(port), *args], capture_output=True, text=True, timeout=timeout_s)


@pytest.fixture
def farm(tmp_path: Path):
    with phone_farm(tmp_path) as server:
        yield server


def test_devices_long_lists_every_phone_with_model_and_transport(farm) -> None:
    done = adb(farm.port, "devices", "-l")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "List of devices attached"
    rows = {line.split()[0]: line for line in lines[1:] if line.strip()}
    assert set(rows) == set(DEFAULT_PHONES)
    assert "model:Pixel_4a" in rows["0A1B2C3D4E"] and "device:sunfish" in rows["0A1B2C3D4E"]
    assert "model:SM-G960F" in rows["R58M12ABCDE"]
    assert all(" device " in row and "transport_id:" in row for row in rows.values())
    assert "host:version" in farm.requests and "host:devices-l" in farm.requests


def test_shell_v2_passes_output_and_exit_code(farm) -> None:
    done = adb(farm.port, "-s", "1C2D3E4F", "shell", "getprop", "ro.build.version.release")
    assert (done.returncode, done.stdout) == (0, "13\n")
    missing = adb(farm.port, "-s", "1C2D3E4F", "shell", "busybox")
    assert missing.returncode == 127 and "busybox: inaccessible or not found" in missing.stderr
    assert any(r.startswith("shell,v2,") for r in farm.requests)
    assert any(r.startswith("host:tport:serial:") for r in farm.requests)


def test_shell_v1_when_the_phone_has_no_shell_v2(tmp_path: Path) -> None:
    with phone_farm(tmp_path, {"OLD1": "android9"}, shell_v2=False) as server:
        done = adb(server.port, "-s", "OLD1", "shell", "getprop", "ro.product.model")
        assert done.stdout.strip() == "SM-G960F"
        assert any(r.startswith("shell:getprop") for r in server.requests)
        assert not any(r.startswith("shell,v2") for r in server.requests)


def test_shell_runs_no_shell_strings(farm) -> None:
    # one argument with an operator: a real sh would run `id` too; the phone refuses the whole line
    done = adb(farm.port, "-s", "0A1B2C3D4E", "shell", "getprop ro.product.model; id")
    assert done.returncode == 2 and "operators are not supported" in done.stderr
    outside = adb(farm.port, "-s", "0A1B2C3D4E", "shell", "rm", "-f", "/etc/passwd")
    assert outside.returncode == 1 and "Permission denied" in outside.stderr


def test_push_and_pull_round_trip_several_chunks(farm, tmp_path: Path) -> None:
    payload = os.urandom(300_000)  # > 4 DATA chunks of 64 KiB
    local = tmp_path / "blob.bin"
    local.write_bytes(payload)
    push = adb(farm.port, "-s", "3A4B5C6D", "push", str(local), "/data/local/tmp/blob.bin")
    assert push.returncode == 0, push.stderr
    stored = farm.phones["3A4B5C6D"].host_path("/data/local/tmp/blob.bin")
    assert stored is not None and stored.read_bytes() == payload
    back = tmp_path / "back.bin"
    pull = adb(farm.port, "-s", "3A4B5C6D", "pull", "/data/local/tmp/blob.bin", str(back))
    assert pull.returncode == 0, pull.stderr
    assert back.read_bytes() == payload
    gone = adb(farm.port, "-s", "3A4B5C6D", "pull", "/data/local/tmp/nothing", str(tmp_path / "x"))
    assert gone.returncode != 0 and "does not exist" in gone.stdout + gone.stderr  # adb prints this one on stdout


def test_unknown_serial_and_dropped_phone(farm) -> None:
    done = adb(farm.port, "-s", "NOPE123", "shell", "id")
    assert done.returncode != 0 and "device 'NOPE123' not found" in done.stderr
    farm.drop("1C2D3E4F")
    assert "1C2D3E4F" not in adb(farm.port, "devices").stdout
    assert "not found" in adb(farm.port, "-s", "1C2D3E4F", "shell", "id").stderr
    farm.restore("1C2D3E4F")
    assert adb(farm.port, "-s", "1C2D3E4F", "shell", "id", "-u").stdout == "2000\n"


def test_unknown_model_is_refused_with_the_catalog(tmp_path: Path) -> None:
    from cellab.errors import InputError

    with pytest.raises(InputError, match="android9"):
        VirtualPhone("X1", "android8", tmp_path)
