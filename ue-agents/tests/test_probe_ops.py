"""ProbeOps over the real bus (CURVE on, loopback): typed, validated operations; artifacts; safe state."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import pytest
from cellab.ue.probe_ops import ProbeOps
from cellab.ue.probe_synth import SynthConfig, simulate, write_pcap

from cellab.bus import Agent, OperationError
from cellab.bus.testing import lab_bus
from cellab.paths import BUILD_BIN, PROJECT_ROOT
from cellab.testkit.helpers import free_port


class _UE(ProbeOps, Agent):
    role = "ue"
    netns = None  # loopback: the probe runs in this namespace


@pytest.fixture(scope="module", autouse=True)
def bins() -> None:
    subprocess.run(["make", "-s", str(BUILD_BIN / "cellab-probe"), str(BUILD_BIN / "cellab-send")],
                   cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=300)


def test_fetch_and_analyze_through_the_bus(tmp_path, sender):
    with lab_bus(tmp_path, {"ue0": _UE}) as (controller, agents):
        reply = controller.request("ue0", "fetch", {
            "server": "127.0.0.1", "port": sender, "tag": "run-1", "ms_log": True,
            "flows": [{"size_bytes": 2_000_000, "cc": "cubic"}]}, timeout_s=60)
        assert reply["status"] == "ok" and reply["summary"]["requests"][0]["bytes_read"] == 2_000_000
        assert reply["artifacts"] == ["run-1-ms.csv", "run-1-packets.csv", "run-1-summary.json"]
        artifact_dir = agents["ue0"].artifact_dir
        assert json.loads((artifact_dir / "run-1-summary.json").read_text())["status"] == "ok"

        write_pcap(simulate(SynthConfig(sr_period_ms=40, duration_s=1.5)), artifact_dir / "phone.pcap")
        analyzed = controller.request("ue0", "analyze_pcap", {"name": "phone.pcap", "tag": "phone"}, timeout_s=60)
        assert analyzed["summary"]["sr_estimate"]["period_ms"] == 40
        assert "phone-summary.json" in analyzed["artifacts"]


@pytest.mark.parametrize("op, params, field", [
    ("fetch", {"server": "127.0.0.1; reboot", "flows": [{"size_bytes": 1}]}, "params.server"),
    ("fetch", {"server": "127.0.0.1", "flows": []}, "params.flows"),
    ("fetch", {"server": "127.0.0.1", "flows": [{"size_bytes": 1}], "control": "bbr"}, "params.control"),
    ("fetch", {"server": "127.0.0.1", "flows": [{"size_bytes": 1}], "tag": "../up"}, "params.tag"),
    ("fetch", {"server": "127.0.0.1", "flows": [{"size_bytes": 1, "cc": "cubic;ls"}]}, "params.flows[0].cc"),
    ("analyze_pcap", {"name": "../../etc/passwd"}, "params.name"),
    ("analyze_pcap", {"name": "/etc/passwd"}, "params.name"),
])
def test_invalid_requests_are_refused_before_anything_runs(tmp_path, op, params, field):
    with lab_bus(tmp_path, {"ue0": _UE}) as (controller, agents):
        with pytest.raises(OperationError) as err:
            controller.request("ue0", op, params)
        assert err.value.kind == "validation" and err.value.field == field
        assert not list(agents["ue0"].artifact_dir.glob("*-summary.json"))


def test_unreachable_server_fails_and_keeps_the_summary(tmp_path):
    closed_port = free_port()  # nothing listens there
    with lab_bus(tmp_path, {"ue0": _UE}) as (controller, agents):
        with pytest.raises(OperationError, match="Connection refused"):
            controller.request("ue0", "fetch", {"server": "127.0.0.1", "port": closed_port, "tag": "dead",
                                                "flows": [{"size_bytes": 1000}]}, timeout_s=30)
        kept = json.loads((agents["ue0"].artifact_dir / "dead-summary.json").read_text())
        assert kept["status"] == "error" and kept["missing"]


def test_safe_state_stops_a_running_probe_with_a_partial_summary(tmp_path, sender):
    with lab_bus(tmp_path, {"ue0": _UE}) as (controller, agents):
        replies: list = []

        def long_fetch() -> None:
            try:
                replies.append(controller.request("ue0", "fetch", {
                    "server": "127.0.0.1", "port": sender, "tag": "long",
                    "flows": [{"duration_s": 60}]}, timeout_s=90))
            except OperationError as exc:
                replies.append(exc)

        worker = threading.Thread(target=long_fetch)
        worker.start()
        time.sleep(1.5)
        started = time.monotonic()
        agents["ue0"].safe_state()
        worker.join(30)
        assert time.monotonic() - started < 10 and replies
        summary = json.loads((agents["ue0"].artifact_dir / "long-summary.json").read_text())
        assert summary["interrupted"] and summary["status"] == "partial"
        assert summary["requests"][0]["bytes_read"] > 0
