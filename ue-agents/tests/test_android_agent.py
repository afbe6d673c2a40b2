"""The Android UE agent over the real bus (CURVE, loopback), driving virtual phones through the real adb
client: discovery, preparation, signal, the probe pushed/run (qemu-aarch64-static)/pulled, a phone that
disappears mid-run, refusals (unrooted tcpdump and cc, no iperf3, unknown serial)."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import threading
import time
from pathlib import Path

import pytest

from cellab.testkit.helpers import free_port
from cellab.bus import OperationError
from cellab.bus.testing import lab_bus
from cellab.errors import InputError
from cellab.paths import BUILD_BIN, PROJECT_ROOT
from cellab.labs.proc import ManagedProcess
from cellab.ue.android.agent import AndroidUEAgent
from cellab.ue.android.testing import phone_farm

pytestmark = pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)")
ROOTED, UNROOTED = "3A4B5C6D", "1C2D3E4F"  # Android 14 rooted with iperf3; Android 13 unrooted without


@pytest.fixture(scope="module", autouse=True)
def bins() -> None:
    subprocess.run(["make", "-s", str(BUILD_BIN / "cellab-probe-aarch64"), str(BUILD_BIN / "cellab-send")],
                   cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=600)


@pytest.fixture
def farm(tmp_path: Path):
    with phone_farm(tmp_path) as server:
        yield server


def _bus(tmp_path: Path, farm, serial: str):
    return lab_bus(tmp_path, {"phone": AndroidUEAgent}, telemetry=True,
                   agent_kwargs={"phone": {"serial": serial, "adb_port": farm.port}})


def test_info_prepare_signal_and_refusals_on_an_unrooted_phone(tmp_path: Path, farm) -> None:
    with _bus(tmp_path, farm, UNROOTED) as (controller, _):
        info = controller.request("phone", "phone_info")
        assert (info["model"], info["android"], info["rooted"]) == ("Pixel 6", "13", False)
        farm.phones[UNROOTED].state.mobile_data = False
        prepared = controller.request("phone", "prepare", {"airplane_hold_s": 0}, timeout_s=30)
        assert "airplane toggled" in prepared["steps"] and farm.phones[UNROOTED].state.mobile_data
        assert prepared["signal"]["rsrp_dbm"] == -95
        assert controller.request("phone", "signal")["earfcn"] == 3350
        with pytest.raises(OperationError, match="phone 1C2D3E4F .*tcpdump needs a rooted phone"):
            controller.request("phone", "tcpdump_start", {"tag": "t1"})
        with pytest.raises(OperationError, match="congestion control needs a rooted phone"):
            controller.request("phone", "set_cc", {"cc": "bbr"})
        with pytest.raises(OperationError, match="no iperf3 on this phone"):
            controller.request("phone", "iperf3_client", {"server": "127.0.0.1", "duration_s": 1})
        with pytest.raises(OperationError, match="cc"):  # validation: no shell words through a parameter
            controller.request("phone", "set_cc", {"cc": "bbr; reboot"})
        farm.phones[UNROOTED].dumpsys_drop = {"mSignalStrength"}
        with pytest.raises(OperationError, match="phone 1C2D3E4F: .*no mSignalStrength"):
            controller.request("phone", "signal")


def test_rooted_phone_sets_cc(tmp_path: Path, farm) -> None:
    with _bus(tmp_path, farm, ROOTED) as (controller, _):
        controller.request("phone", "set_cc", {"cc": "bbr"})
        assert farm.phones[ROOTED].state.sysctl["net.ipv4.tcp_congestion_control"] == "bbr"


def test_unknown_serial_is_refused_before_connecting(tmp_path: Path, farm) -> None:
    with pytest.raises(InputError, match="no phone 'GHOST1'.*allowed: .*3A4B5C6D"):
        AndroidUEAgent("phone", "tcp://127.0.0.1:1", serial="GHOST1", adb_port=farm.port, insecure=True,
                       artifact_dir=tmp_path)


@pytest.mark.skipif(shutil.which("qemu-aarch64-static") is None, reason="needs qemu-user-static (make setup)")
def test_fetch_pushes_runs_and_pulls_the_aarch64_probe(tmp_path: Path, farm, sender: int) -> None:
    with _bus(tmp_path, farm, ROOTED) as (controller, agents):
        samples: list[tuple[str, str, dict]] = []
        controller.subscribe(lambda agent, topic, data: samples.append((agent, topic, data)))
        reply = controller.request("phone", "fetch", {
            "server": "127.0.0.1", "port": sender, "tag": "run-1", "control": "exll",
            # 500 kB, 2 s into the run (the signal log's 1 Hz needs two samples), not a 2.5 s timed flow:
            # the probe under qemu took 20 s to read what the sender queued in those 2.5 s (4 MiB)
            "flows": [{"size_bytes": 500_000, "start_ms": 2000, "cc": "cubic"}]}, timeout_s=120)
        assert reply["status"] in ("ok", "partial")
        assert reply["summary"]["requests"][0]["bytes_read"] > 100_000
        assert {"run-1-summary.json", "run-1-packets.csv", "run-1-signal.jsonl"} <= set(reply["artifacts"])
        artifacts = agents["phone"].artifact_dir
        stored = farm.phones[ROOTED].host_path("/data/local/tmp/cellab-probe")
        assert stored is not None and stored.read_bytes() == (BUILD_BIN / "cellab-probe-aarch64").read_bytes()
        lines = [json.loads(line) for line in (artifacts / "run-1-signal.jsonl").read_text().splitlines()]
        assert len(lines) >= 2 and all(line["rsrp_dbm"] == -95 for line in lines)  # 1 Hz over ~2.5 s
        assert all(b["time_ms"] - a["time_ms"] == pytest.approx(1000, abs=300) for a, b in zip(lines, lines[1:], strict=False))
        signal_samples = [d for agent, topic, d in samples if agent == "phone" and topic == "signal"]
        assert signal_samples and all(d["rsrp_dbm"] == -95 for d in signal_samples)  # published as telemetry


@pytest.mark.skipif(shutil.which("qemu-aarch64-static") is None, reason="needs qemu-user-static (make setup)")
def test_phone_that_disappears_mid_run_fails_naming_it_then_works_again(tmp_path: Path, farm, sender: int) -> None:
    with _bus(tmp_path, farm, ROOTED) as (controller, agents):
        errors: list[str] = []

        def run() -> None:
            try:
                controller.request("phone", "fetch", {"server": "127.0.0.1", "port": sender, "tag": "lost",
                                                      "flows": [{"duration_s": 8}]}, timeout_s=120)
            except OperationError as exc:
                errors.append(str(exc))

        worker = threading.Thread(target=run)
        worker.start()
        time.sleep(4)  # push done, probe running
        farm.drop(ROOTED)
        worker.join(90)
        assert not worker.is_alive()
        assert len(errors) == 1 and "phone 3A4B5C6D: disconnected" in errors[0], errors
        assert "kept: lost-signal.jsonl" in errors[0]
        assert (agents["phone"].artifact_dir / "lost-signal.jsonl").stat().st_size > 0
        assert not farm.shells[ROOTED].running or all(e.proc.poll() is not None for e in farm.shells[ROOTED].running)
        started = time.monotonic()
        agents["phone"].safe_state()  # with the phone gone: stops its own children, does not hang
        assert time.monotonic() - started < 5 and not agents["phone"]._loggers
        farm.restore(ROOTED)
        reply = controller.request("phone", "fetch", {"server": "127.0.0.1", "port": sender, "tag": "back",
                                                      "flows": [{"size_bytes": 500_000}]}, timeout_s=120)
        # qemu-user has no AF_PACKET: the probe falls back to socket reads and says so ("partial")
        assert reply["status"] in ("ok", "partial"), json.dumps(reply["summary"])[:1500]
        assert reply["summary"]["requests"][0]["bytes_read"] == 500_000


@pytest.mark.skipif(shutil.which("iperf3") is None, reason="needs iperf3 (make setup)")
def test_iperf3_from_a_phone_that_has_it(tmp_path: Path, farm) -> None:
    port = free_port()
    server = ManagedProcess(["iperf3", "-s", "-B", "127.0.0.1", "-p", str(port)], tmp_path / "iperf3-server.log")
    try:
        time.sleep(0.5)
        with _bus(tmp_path, farm, ROOTED) as (controller, agents):
            reply = controller.request("phone", "iperf3_client", {"server": "127.0.0.1", "port": port,
                                                                  "duration_s": 2, "tag": "ip"}, timeout_s=60)
            assert set(reply["artifacts"]) == {"ip-iperf3.json", "ip-signal.jsonl", "ip-ping.txt"}
            result = json.loads((agents["phone"].artifact_dir / "ip-iperf3.json").read_text())
            assert result["end"]["sum_received"]["bytes"] > 1_000_000
            assert "bytes from 127.0.0.1" in (agents["phone"].artifact_dir / "ip-ping.txt").read_text()
    finally:
        server.stop()


@pytest.mark.skipif(shutil.which("tcpdump") is None, reason="needs tcpdump (make setup)")
def test_tcpdump_on_a_rooted_phone(tmp_path: Path, farm, require_root) -> None:
    with _bus(tmp_path, farm, ROOTED) as (controller, agents):
        controller.request("phone", "tcpdump_start", {"interface": "lo", "tag": "cap"})
        time.sleep(1.0)
        for _ in range(5):  # traffic on lo for the capture
            with socket.socket() as s:
                s.connect_ex(("127.0.0.1", farm.port))
        time.sleep(0.5)
        reply = controller.request("phone", "tcpdump_stop", {"tag": "cap"}, timeout_s=30)
        assert reply["artifacts"] == ["cap-phone.pcap"]
        pcap = (agents["phone"].artifact_dir / "cap-phone.pcap").read_bytes()
        assert pcap[:4] in (b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\xc3\xd4") and len(pcap) > 24 + 16
        with pytest.raises(OperationError, match="no capture running with tag 'cap'"):
            controller.request("phone", "tcpdump_stop", {"tag": "cap"})
