"""The attenuator agent over the real bus: typed operations, background playback, telemetry, safe state."""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellab.attenuator.agent import AttenuatorAgent
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.emulators.minicircuits import MiniCircuitsDevice

from cellab.bus import Controller, OperationError


@pytest.fixture
def lab(mc_device: MiniCircuitsDevice, mc_serial_config: AttenuatorConfig, tmp_path: Path) -> Iterator[tuple]:
    sock_dir = Path(tempfile.mkdtemp(prefix="catt-", dir="/tmp"))  # ipc paths must stay short
    ctl_ep, tel_ep = f"ipc://{sock_dir}/ctl", f"ipc://{sock_dir}/tel"
    controller = Controller(ctl_ep, telemetry_endpoint=tel_ep, insecure=True)
    telemetry: list[tuple[str, str, dict]] = []
    controller.subscribe(lambda agent, topic, data: telemetry.append((agent, topic, data)))
    agent = AttenuatorAgent("att1", ctl_ep, telemetry_endpoint=tel_ep, insecure=True,
                            artifact_dir=tmp_path / "artifacts", attenuators=[mc_serial_config])
    agent.start()
    try:
        controller.wait_for_agents(["att1"], timeout_s=10)
        yield controller, agent, telemetry
    finally:
        agent.stop()
        controller.close()
        shutil.rmtree(sock_dir, ignore_errors=True)


def _wait_idle(controller: Controller, timeout_s: float = 10) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        st = controller.request("att1", "status", {})["attenuators"][0]
        if not st["playing"] and st["last_result"] is not None:
            return st
        time.sleep(0.05)
    raise AssertionError("schedule did not finish")


def test_set_get_info_over_the_bus(lab: tuple, mc_device: MiniCircuitsDevice) -> None:
    controller, _agent, _tel = lab
    assert controller.request("att1", "set", {"channel": 1, "db": 33.3}) == {"attenuator": "box1", "channel": 1, "applied_db": 33.25}
    assert mc_device.att_db == [33.25]
    assert controller.request("att1", "get", {"channel": 1})["applied_db"] == 33.25
    assert controller.request("att1", "info", {})["model"] == "RCDAT-6000-110"


def test_bad_requests_are_refused_with_reasons(lab: tuple, mc_device: MiniCircuitsDevice) -> None:
    controller, _agent, _tel = lab
    with pytest.raises(OperationError, match="lab limits"):
        controller.request("att1", "set", {"channel": 1, "db": 5})  # below min_db 10
    with pytest.raises(OperationError):
        controller.request("att1", "set", {"channel": 1, "db": "rm -rf /"})
    with pytest.raises(OperationError):
        controller.request("att1", "set", {"channel": 1, "db": 20, "command": "x"})  # unknown field
    with pytest.raises(OperationError, match="unknown"):
        controller.request("att1", "set", {"attenuator": "nope", "channel": 1, "db": 20})
    with pytest.raises(OperationError, match=r"row 3.db"):
        controller.request("att1", "play_schedule", {"schedule_csv": "t_s,channel,db\n0,1,20\n1,1,200\n"})
    assert not any("SETATT" in c for c in mc_device.commands)


def test_play_schedule_in_background_with_log_and_telemetry(lab: tuple, mc_device: MiniCircuitsDevice, tmp_path: Path) -> None:
    controller, _agent, telemetry = lab
    started = controller.request("att1", "play_schedule", {
        "schedule_yaml": "update_interval_s: 0.05\nsegments:\n  - {kind: ramp, from_db: 20, to_db: 25, duration_s: 0.25}\n",
        "name": "ramp1",
    })
    assert started["points"] == 6 and started["log_file"].startswith("attenuation-box1-ramp1-")
    st = _wait_idle(controller)
    assert st["last_result"]["status"] == "completed" and st["last_result"]["applied"] == 6
    assert mc_device.att_db == [25.0]
    got = controller.fetch_artifact("att1", started["log_file"], tmp_path)
    rows = [line for line in got.read_text().splitlines() if '"planned_s"' in line]
    assert len(rows) == 6
    deadline = time.monotonic() + 3
    while time.monotonic() < deadline and not any(t == "attenuation.done" for _a, t, _d in telemetry):
        time.sleep(0.05)
    applied = [d["db"] for a, t, d in telemetry if t == "attenuation" and a == "att1"]
    assert applied == [20, 21, 22, 23, 24, 25]


def test_stop_schedule_and_agent_stop_go_safe(lab: tuple, mc_device: MiniCircuitsDevice) -> None:
    controller, agent, _tel = lab
    controller.request("att1", "play_schedule", {"points": [{"t_s": 0, "channel": 1, "db": 30},
                                                            {"t_s": 600, "channel": 1, "db": 40}]})
    time.sleep(0.3)
    st = controller.request("att1", "stop_schedule", {})
    assert st["last_result"]["status"] == "stopped" and st["playing"] is False
    assert mc_device.att_db == [100.0]
    controller.request("att1", "set", {"channel": 1, "db": 50})
    agent.stop()  # the agent exits: its attenuators go to their safe value
    assert mc_device.att_db == [100.0]


def test_calibrate_through_the_virtual_lab_bridge(cell, tmp_path: Path) -> None:
    from cellab.attenuator.bridge import AttenuatorBridge, virtual_lab_attenuator

    sock_dir = Path(tempfile.mkdtemp(prefix="catt-", dir="/tmp"))
    ctl_ep = f"ipc://{sock_dir}/ctl"
    controller = Controller(ctl_ep, insecure=True)
    link = sock_dir / "att0"
    with AttenuatorBridge(cell.endpoint, link, ues=1):
        agent = AttenuatorAgent("att1", ctl_ep, insecure=True, artifact_dir=tmp_path / "art",
                                attenuators=[virtual_lab_attenuator(link, ues=1, max_db=90)])
        agent.start()
        try:
            controller.wait_for_agents(["att1"], timeout_s=10)
            controller.request("att1", "calibrate", {
                "shield_box": "vbox", "ue": "vue0", "earfcn": 3350, "start_db": 10, "stop_db": 60, "step_db": 10,
                "settle_s": 0, "samples": 1, "cell_ctl": cell.endpoint, "ue_index": 0})
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                st = controller.request("att1", "status", {})["attenuators"][0]
                if not st["calibrating"]:
                    break
                time.sleep(0.05)
            assert st["calibration_error"] == ""
            cal = st["calibration"]
            assert (cal["a_dbm"], cal["b_db_per_db"], cal["residual_rms_db"]) == (-47.0, 1.0, 0.0)
            assert (tmp_path / "art" / "calibrations" / "vbox__vue0__3350.json").exists()
            assert cell.att[0] == 90.0  # after the sweep the channel is back in its safe state
        finally:
            agent.stop()
            controller.close()
            shutil.rmtree(sock_dir, ignore_errors=True)


def test_configure_over_the_bus_and_its_limits(lab: tuple, mc_pty, tmp_path: Path) -> None:
    controller, _agent, _tel = lab
    entry = {"name": "box2", "model": "minicircuits-rcdat", "transport": "serial", "address": mc_pty.port,
             "min_db": 0, "max_db": 90}
    assert controller.request("att1", "configure", {"attenuators": [entry]}) == {"attenuators": ["box1", "box2"]}
    assert controller.request("att1", "set", {"attenuator": "box2", "channel": 1, "db": 12})["applied_db"] == 12
    with pytest.raises(OperationError):  # two attenuators now: the name is required
        controller.request("att1", "set", {"channel": 1, "db": 12})
    lib = {**entry, "name": "lda", "model": "vaunix-lda", "transport": "sdk", "options": {"library": "/tmp/x.so"}}
    with pytest.raises(OperationError, match="only be set in the agent's local config"):
        controller.request("att1", "configure", {"attenuators": [lib]})
    with pytest.raises(OperationError, match="transport"):
        controller.request("att1", "configure", {"attenuators": [{**entry, "transport": "visa"}]})


def test_hid_path_must_be_a_character_device(tmp_path: Path) -> None:
    from cellab.attenuator.driver import AttenuatorError
    from cellab.attenuator.transport import HidLink

    target = tmp_path / "precious.txt"
    target.write_text("keep me")
    with pytest.raises(AttenuatorError, match="not a character device"):
        HidLink.open_path(str(target), 1.0)
    assert target.read_text() == "keep me"
