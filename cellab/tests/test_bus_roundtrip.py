"""Bus round trips with CURVE: results, validation errors, unknown ops, domain failures, threads."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from cellab.bus import Agent, AgentTimeout, Controller, OperationError
from cellab.bus.demo import DemoAgent, EchoParams
from cellab.bus.testing import lab_bus


def test_round_trip_over_curve(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        assert controller.request("ue1", "echo", {"text": "ab", "count": 3}) == {"text": "ababab"}
        # A pydantic model is accepted as params too.
        assert controller.request("ue1", "echo", EchoParams(text="z")) == {"text": "z"}
        assert controller.request("ue1", "ping") == {"agent": "ue1", "role": "demo"}
        status = controller.agents()["ue1"]
        assert status.role == "demo" and not status.lost and status.last_seen > time.time() - 5
        described = controller.request("ue1", "describe")
        ops = {op["name"]: op for op in described["operations"]}
        assert {"ping", "clock", "describe", "list_artifacts", "read_artifact", "echo", "sleep"} <= set(ops)
        assert ops["echo"]["params_schema"]["properties"]["count"]["maximum"] == 1000
        assert ops["sleep_concurrent"]["concurrent"] is True
        assert list(agents["ue1"].executed) == ["echo", "echo"]


def test_invalid_params_name_the_field(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "sleep", {"duration_s": 0})
        assert err.value.field == "params.duration_s"
        assert err.value.kind == "validation"
        assert str(err.value).startswith("agent ue1: op sleep: params.duration_s: Input should be greater than 0")

        # The demo models forbid unknown fields, so a typo is an error and not silently ignored.
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "echo", {"text": "x", "colour": "red"})
        assert err.value.field == "params.colour"
        assert list(agents["ue1"].executed) == []  # type: ignore[attr-defined]


def test_invalid_params_missing_and_typed(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "echo", {"count": 2})
        assert err.value.field == "params.text" and "Field required" in str(err.value)
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "echo", {"text": "x", "count": "many"})
        assert err.value.field == "params.count"
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "rm_rf", {"path": "/"})
        assert err.value.field == "op" and err.value.kind == "unknown_op"
        assert "echo" in (err.value.allowed or []) and "rm_rf" not in (err.value.allowed or [])
        assert list(agents["ue1"].executed) == []  # nothing invalid ever ran


def test_operation_failures(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        agent = agents["ue1"]
        assert isinstance(agent, DemoAgent)
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "fail", {"message": "attenuator did not answer"})
        assert err.value.kind == "failed" and "attenuator did not answer" in str(err.value)
        assert agent.safe_states == 0
        with pytest.raises(OperationError):
            controller.request("ue1", "fail", {"message": "device on fire", "fatal": True})
        assert agent.safe_states == 1  # a fatal failure puts the devices in their safe state
        # The agent keeps serving afterwards.
        assert controller.request("ue1", "echo", {"text": "ok"}) == {"text": "ok"}


class CrashingAgent(Agent):
    role = "crashy"

    def __init__(self, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        self.safe_states = 0
        super().__init__(*args, **kwargs)

    def safe_state(self) -> None:
        self.safe_states += 1

    from cellab.bus import operation as _operation

    @_operation
    def crash(self) -> dict:
        raise ZeroDivisionError("bug in the op")


def test_op_that_raises_is_reported_and_safes_the_agent(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"x1": CrashingAgent}) as (controller, agents):
        with pytest.raises(OperationError) as err:
            controller.request("x1", "crash")
        assert err.value.kind == "internal" and "ZeroDivisionError" in str(err.value)
        assert agents["x1"].safe_states == 1  # type: ignore[attr-defined]


def test_concurrent_requests_from_threads(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent, "ue2": DemoAgent}) as (controller, _):
        errors: list[str] = []

        def worker(i: int) -> None:
            agent = "ue1" if i % 2 else "ue2"
            for j in range(25):
                text = f"{i}-{j}"
                reply = controller.request(agent, "echo", {"text": text}, timeout_s=10)
                if reply != {"text": text}:
                    errors.append(f"{agent} {text}: {reply}")

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        assert not any(t.is_alive() for t in threads)
        assert errors == []


def test_long_op_does_not_block_others(tmp_path: Path) -> None:
    """A serial op longer than agent_lost_s: heartbeats, built-ins and concurrent ops keep flowing."""
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, _):
        result: dict = {}
        slow = threading.Thread(target=lambda: result.update(
            controller.request("ue1", "sleep", {"duration_s": 1.6}, timeout_s=5)))
        slow.start()
        time.sleep(0.3)
        start = time.monotonic()
        assert controller.request("ue1", "ping", timeout_s=2)["agent"] == "ue1"
        assert time.monotonic() - start < 0.5
        # Two concurrent ops overlap each other and the serial one.
        start = time.monotonic()
        replies: list[dict] = []
        pair = [threading.Thread(target=lambda: replies.append(
            controller.request("ue1", "sleep_concurrent", {"duration_s": 0.4}, timeout_s=3))) for _ in range(2)]
        for t in pair:
            t.start()
        for t in pair:
            t.join()
        assert len(replies) == 2 and time.monotonic() - start < 0.75
        slow.join(timeout=5)
        assert result["slept_s"] >= 1.6
        assert not controller.agents()["ue1"].lost  # 1.6 s op > agent_lost_s = 1 s


def test_serial_ops_run_in_arrival_order(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        threads = []
        for duration_s in [0.3, 0.05, 0.05]:
            threads.append(threading.Thread(target=controller.request,
                                            args=("ue1", "sleep", {"duration_s": duration_s}, 5)))
            threads[-1].start()
            time.sleep(0.05)
        threads.append(threading.Thread(target=controller.request, args=("ue1", "echo", {"text": "last"}, 5)))
        threads[-1].start()
        for t in threads:
            t.join()
        assert list(agents["ue1"].executed) == ["sleep", "sleep", "sleep", "echo"]  # type: ignore[attr-defined]


def test_deadline_expiry(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("INFO", logger="cellab.bus")
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        start = time.monotonic()
        with pytest.raises(AgentTimeout) as err:
            controller.request("ue1", "sleep", {"duration_s": 1.0}, timeout_s=0.3)
        assert 0.28 <= time.monotonic() - start < 0.6
        assert "agent ue1" in str(err.value) and "op sleep" in str(err.value) and "0.3 s" in str(err.value)
        # The echo queued behind the sleep expires before its turn: the agent must not run it.
        with pytest.raises(AgentTimeout):
            controller.request("ue1", "echo", {"text": "late"}, timeout_s=0.2)
        time.sleep(0.8)
        assert controller.request("ue1", "echo", {"text": "fresh"}, timeout_s=2) == {"text": "fresh"}
        assert list(agents["ue1"].executed) == ["sleep", "echo"]  # type: ignore[attr-defined]
        assert any(getattr(r, "event", "") == "deadline_dropped" for r in caplog.records)


def test_insecure_needs_both_sides(tmp_path: Path) -> None:
    controller = Controller("tcp://127.0.0.1:*", insecure=True, heartbeat_s=0.2, agent_lost_s=1.0)
    agent = DemoAgent("plain1", controller.endpoint, insecure=True, artifact_dir=tmp_path / "a",
                      heartbeat_s=0.2, controller_lost_s=1.0)
    agent.start()
    try:
        controller.wait_for_agents(["plain1"], timeout_s=5)
        assert controller.request("plain1", "echo", {"text": "p"}) == {"text": "p"}
    finally:
        agent.stop()
        controller.close()
