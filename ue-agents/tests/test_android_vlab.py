"""A transfer through the virtual LTE cell started from the phone agent: the virtual phone sits in the
lab's UE namespace, runs the aarch64 probe there (qemu-aarch64-static), and its dumpsys reports the
emulated cell's signal. Needs root (namespaces)."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.registry import load
from cellab.labs.cellctl import CellControl
from cellab.paths import BUILD_BIN, PROJECT_ROOT
from cellab.labs.proc import ManagedProcess
from cellab.ue.android.agent import AndroidUEAgent
from cellab.ue.android.testing import phone_farm

SEND_PORT = 5301
pytestmark = [pytest.mark.root,
              pytest.mark.skipif(shutil.which("adb") is None, reason="needs Debian's adb client (make setup)"),
              pytest.mark.skipif(shutil.which("qemu-aarch64-static") is None, reason="needs qemu-user-static")]


@pytest.fixture(scope="module", autouse=True)
def bins() -> None:
    subprocess.run(["make", "-s", str(BUILD_BIN / "cellab-probe-aarch64"), str(BUILD_BIN / "cellab-send"),
                    str(BUILD_BIN / "cellab-cell")], cwd=PROJECT_ROOT, check=True, capture_output=True, timeout=600)


def _wait_listening(netns: str, port: int) -> None:
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        out = subprocess.run(["ip", "netns", "exec", netns, "ss", "-ltn"], capture_output=True, text=True).stdout
        if f":{port}" in out:
            return
        time.sleep(0.05)
    raise RuntimeError("cellab-send did not listen")


def test_transfer_through_the_virtual_cell_from_the_phone_agent(tmp_path: Path, require_root, netns_prefix) -> None:
    virtual_lab = load("cellab.labs", "virtual", "embedded lab")  # rooms meet through entry points
    lab = virtual_lab(prefix=netns_prefix, params={"core_delay_ms": 10.0, "ul_policy": "sr-strict"})
    sender = None
    try:
        topo = lab.up()
        sender = ManagedProcess([str(BUILD_BIN / "cellab-send"), "serve", "--bind", topo.server.address,
                                 "--port", str(SEND_PORT), "--sample-ms", "0"], tmp_path / "send.log",
                                topo.server.netns)
        _wait_listening(topo.server.netns, SEND_PORT)
        with phone_farm(tmp_path, {"VLAB01": "android13"}, netns=topo.ues[0].netns,
                        cell_ctl=topo.extra["ctl"], cell_ue=0) as farm, \
                lab_bus(tmp_path, {"phone": AndroidUEAgent},
                        agent_kwargs={"phone": {"serial": "VLAB01", "adb_port": farm.port}}) as (controller, agents):
            with CellControl(topo.extra["ctl"]) as cell:
                cell_rsrp = cell.ue_stats(0)["rsrp_dbm"]
            first = controller.request("phone", "signal")
            assert first["rsrp_dbm"] == pytest.approx(cell_rsrp, abs=1.0)  # the cell's value, rounded by "the modem"
            assert first["rsrq_db"] is None  # the cell models no RSRQ: 2147483647 → unavailable
            with CellControl(topo.extra["ctl"]) as cell:
                base_db = float(cell.get_attenuation(0)["attenuation_db"])
                cell.set_attenuation(0, base_db + 10)
            time.sleep(0.3)
            assert controller.request("phone", "signal")["rsrp_dbm"] == pytest.approx(first["rsrp_dbm"] - 10, abs=1.5)
            with CellControl(topo.extra["ctl"]) as cell:
                cell.set_attenuation(0, base_db)

            reply = controller.request("phone", "fetch", {
                "server": topo.server.address, "port": SEND_PORT, "tag": "cell", "control": "none",
                "flows": [{"size_bytes": 1_000_000, "cc": "cubic"}], "timeout_s": 30}, timeout_s=120)
            assert reply["status"] in ("ok", "partial")  # qemu-user: no AF_PACKET, socket timestamps
            request = reply["summary"]["requests"][0]
            assert request["complete"] and request["bytes_read"] == 1_000_000, (request, reply["summary"]["errors"])
            flow = reply["summary"]["flows"][0]
            assert flow["local"].split(":")[0] == topo.ues[0].address  # it ran in the UE namespace
            # the cell carried it: far below loopback rates (the cell's capacity at this signal)
            assert flow["throughput_bps"] < 200e6
            assert "cell-signal.jsonl" in reply["artifacts"]
            assert (agents["phone"].artifact_dir / "cell-summary.json").is_file()
    finally:
        if sender is not None:
            sender.stop()
        lab.down()
