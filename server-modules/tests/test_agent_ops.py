"""The server agent's operations over the real bus (CURVE on, loopback): typed, validated, and safe."""

from __future__ import annotations

import pytest
from cellab.server import flowclient, modules
from cellab.server.agent_ops import ModuleOps

from cellab.bus import Agent, OperationError
from cellab.bus.testing import lab_bus


class _ServerAgent(ModuleOps, Agent):
    role = "server"


def test_modules_and_sender_through_the_bus(tmp_path, host_clean):
    with lab_bus(tmp_path, {"srv": _ServerAgent}) as (controller, agents):
        reply = controller.request("srv", "load_modules", {"names": ["c2tcp", "scubic"]}, timeout_s=60)
        assert {"c2tcp", "scubic"} <= set(reply["available_cc"])
        controller.request("srv", "set_module_param", {"module": "c2tcp", "param": "target_ms", "value": 80})
        listed = {m["name"]: m for m in controller.request("srv", "list_modules")["modules"]}
        assert listed["c2tcp"]["params"]["target_ms"] == 80
        started = controller.request("srv", "start_sender", {"bind": "127.0.0.1", "port": 0, "run_id": "run-1"})
        got = flowclient.fetch("127.0.0.1", started["port"], amount=500_000, cc_name="c2tcp")
        assert got.bytes_received == 500_000
        stopped = controller.request("srv", "stop_sender", timeout_s=30)
        assert "run-1/flows.jsonl" in stopped["files"] and stopped["flows"] == 1
        assert (agents["srv"].artifact_dir / "run-1" / f"flow-{got.flow_id}.jsonl").exists()
        assert controller.request("srv", "unload_modules", {}, timeout_s=60)["unloaded"] == ["c2tcp", "scubic"]
    assert "c2tcp" not in modules.available_congestion_controls()


@pytest.mark.parametrize("op, params, field", [
    ("load_modules", {"names": ["c3tcp"]}, "params.names[0]"),
    ("load_modules", {"names": []}, "params.names"),
    ("set_module_param", {"module": "c2tcp", "param": "target_ms; rm -rf /", "value": 1}, "params.param"),
    ("set_module_param", {"module": "c2tcp", "param": "target_ms", "value": 5, "dst": "not-a-prefix"}, "params.dst"),
    ("start_sender", {"run_id": "../escape"}, "params.run_id"),
    ("start_sender", {"cc": "cubic --evil"}, "params.cc"),
])
def test_invalid_requests_are_refused_before_anything_runs(tmp_path, op, params, field):
    with lab_bus(tmp_path, {"srv": _ServerAgent}) as (controller, _):
        with pytest.raises(OperationError) as err:
            controller.request("srv", op, params)
        assert err.value.kind == "validation" and err.value.field == field


def test_domain_errors_and_safe_state(tmp_path, host_clean):
    with lab_bus(tmp_path, {"srv": _ServerAgent}) as (controller, agents):
        with pytest.raises(OperationError, match="out of range"):
            controller.request("srv", "set_module_param", {"module": "c2tcp", "param": "target_ms", "value": -5})
        with pytest.raises(OperationError, match="no sender is running|is not running"):
            controller.request("srv", "stop_sender")
        controller.request("srv", "load_modules", {"names": ["exll"]}, timeout_s=60)
        controller.request("srv", "start_sender", {"bind": "127.0.0.1", "port": 0})
        agents["srv"].safe_state()
        assert "exll" not in modules.available_congestion_controls()
        with pytest.raises(OperationError, match="no sender is running|is not running"):
            controller.request("srv", "stop_sender")
