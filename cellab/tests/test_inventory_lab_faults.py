"""An inventory lab's faults go to the agent of their device as typed operations of its role's contract (issue 41),
here against a recording stand-in of the controller: srsepc killed as the core agent's `epc` and started again,
srsenb stopped and configured with the run's radio parameters, a phone's radio off and on, the server's link cut
and restored; the state after the run from the agents (srsenb, the core, each UE's state in its heartbeats)."""

from __future__ import annotations

import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.contracts.enb import RadioOverrides
from cellab.errors import CellabError
from cellab.faults.spec import FaultStep
from cellab.inventory.lab import InventoryLab
from cellab.inventory.model import load_inventory
from cellab.testkit.helpers import write_lab

RAN_EXAMPLES = Path(__file__).resolve().parents[2] / "ran-config" / "examples"

CORE_STATUS = {"flavour": "srsepc", "run_dir": "r", "daemons": [], "ok": True}
REPLIES = {
    ("core1", "kill"): {"daemon": "epc", "pid": 42, "exit_code": -9, "waited_s": 0.01},
    ("core1", "start"): CORE_STATUS, ("core1", "status"): CORE_STATUS,
    ("enb1", "safe_state"): {"stopped": True},
    ("enb1", "configure"): {"restarted": True, "restart_reasons": ["srsenb was not running"], "state": "running",
                            "pid": 7, "rendered": []},
    ("enb1", "status"): {"state": "running", "pid": 7, "uptime_s": 1.0, "exit_code": None, "error_line": None,
                         "restarts": 2, "connected_rntis": [70], "ground_truth": None, "last_metrics": [],
                         "n_prb": 50, "sr_period_ms": 20, "dl_earfcn": None},
    ("ue2", "set_radio"): "echo",
    ("server1", "set_link"): {"up": False, "device": "eth1"},
}


class Recorder:
    """The controller's request(), recorded; its agents() with what each UE agent said of its UE."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def request(self, agent: str, op: str, params: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        self.calls.append((agent, op, params))
        reply = REPLIES[(agent, op)]
        return {"on": params["on"], "how": "airplane"} if reply == "echo" else reply

    def agents(self) -> dict[str, Any]:
        return {"ue1": SimpleNamespace(ue_state="in"), "ue2": SimpleNamespace(ue_state="out"),
                "server1": SimpleNamespace(ue_state=None)}


@pytest.fixture
def lab(tmp_path) -> tuple[InventoryLab, Recorder]:
    data = yaml.safe_load(write_lab(tmp_path, enb=True, ues=2).read_text())
    shutil.copyfile(RAN_EXAMPLES / "zmq-25prb.yaml", tmp_path / "enb.yaml")  # its radio is the device's rf: zmq
    data["devices"]["enb"][0]["profile"] = "enb.yaml"
    generate_keypair(tmp_path / "keys", "core1")  # an agent's own key pair: two agents never share one
    data["agents"].append({"name": "core1", "role": "core", "host": "edge", "public_key": "keys/core1.key"})
    data["devices"]["core"] = [{"name": "epc", "flavour": "srsepc", "agent": "core1"}]
    (tmp_path / "lab.yaml").write_text(yaml.safe_dump(data))
    recorder = Recorder()
    inventory_lab = InventoryLab(load_inventory(tmp_path / "lab.yaml"), recorder, ["ue1", "ue2"])  # type: ignore[arg-type]
    inventory_lab.overrides = RadioOverrides(n_prb=50)  # the run's, as configure() left them
    return inventory_lab, recorder


def test_each_fault_is_its_devices_agents_typed_operation(lab):
    inventory_lab, recorder = lab
    assert inventory_lab.fault_kinds == {"enb_restart", "core_daemon", "ue_pause", "sgi_cut"}  # no attenuator
    for kind, extra in (("core_daemon", {"daemon": "srsepc"}), ("enb_restart", {}), ("ue_pause", {"ue": 1}),
                        ("sgi_cut", {})):
        for active in (True, False):
            inventory_lab.inject_fault(FaultStep(kind=kind, active=active, **extra))
    ops = [(agent, op) for agent, op, _ in recorder.calls]
    assert ops == [("core1", "kill"), ("core1", "start"), ("enb1", "safe_state"), ("enb1", "configure"),
                   ("ue2", "set_radio"), ("ue2", "set_radio"), ("server1", "set_link"), ("server1", "set_link")]
    params = [p for _, _, p in recorder.calls]
    assert params[0] == {"daemon": "epc"} and params[1]["daemons"] == ["epc"]  # srsepc is the agent's `epc`
    assert params[3]["overrides"]["n_prb"] == 50  # srsenb back with the run's radio parameters
    assert [p["on"] for p in params[4:6]] == [False, True]
    assert [p["up"] for p in params[6:]] == [False, True] and params[6]["address"] == "10.90.1.1"
    with pytest.raises(CellabError, match="injects no s1_cut fault"):
        inventory_lab.inject_fault(FaultStep(kind="s1_cut", active=True))


def test_the_state_after_a_faulted_run_comes_from_the_agents(lab):
    inventory_lab, _ = lab
    state = inventory_lab.fault_state()
    assert state == {"enb_up": True, "core_problems": [], "rrc_state": {"0": "connected", "1": "out"}}
