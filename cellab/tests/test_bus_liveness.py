"""Heartbeats, loss detection on both sides, a SIGKILLed agent process, reconnection."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cellab.bus import AgentLost, AgentTimeout
from cellab.bus.demo import DemoAgent
from cellab.bus.testing import KeySet, lab_bus, make_agent, make_controller, make_keys


def _spawn_agent(name: str, endpoint: str, keys: KeySet, tmp: Path, log_name: str) -> subprocess.Popen:
    log = (tmp / log_name).open("wb")
    return subprocess.Popen(
        [sys.executable, "-m", "cellab.bus.agent_main", "--name", name, "--controller", endpoint,
         "--secret-key", str(keys.agents[name][1]), "--controller-key", str(keys.controller_public),
         "--artifact-dir", str(tmp / "art"), "--heartbeat-s", "0.2", "--controller-lost-s", "1.0"],
        stderr=log, stdout=subprocess.DEVNULL)


def _kill(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def test_killed_agent_times_out_and_restarted_agent_reconnects(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["sub1"])
    controller = make_controller(keys, agent_lost_s=3.0)
    first = _spawn_agent("sub1", controller.endpoint, keys, tmp_path, "first.log")
    second: subprocess.Popen | None = None
    try:
        controller.wait_for_agents(["sub1"], timeout_s=15)
        assert controller.request("sub1", "ping", timeout_s=5)["agent"] == "sub1"
        outcome: dict[str, BaseException] = {}

        def long_request() -> None:
            try:
                controller.request("sub1", "sleep", {"duration_s": 10}, timeout_s=1.5)
            except BaseException as exc:  # noqa: BLE001 - handed to the test thread
                outcome["error"] = exc

        t = threading.Thread(target=long_request)
        t.start()
        time.sleep(0.4)
        os.kill(first.pid, signal.SIGKILL)  # mid-request
        t.join(timeout=5)
        error = outcome.get("error")
        assert isinstance(error, AgentTimeout), error
        assert "agent sub1" in str(error) and "op sleep" in str(error)

        second = _spawn_agent("sub1", controller.endpoint, keys, tmp_path, "second.log")
        start = time.monotonic()
        reply = controller.request("sub1", "echo", {"text": "again"}, timeout_s=15)
        assert reply == {"text": "again"}
        assert time.monotonic() - start < 15
        assert not controller.agents()["sub1"].lost
        # The second process's log says it connected (JSON lines).
        second.send_signal(signal.SIGTERM)
        second.wait(timeout=10)
        log_text = (tmp_path / "second.log").read_text()
        events = [json.loads(line).get("event") for line in log_text.splitlines() if line.startswith("{")]
        assert "controller_connected" in events and "safe_state" in events and "agent_stop" in events, log_text
    finally:
        _kill(first)
        if second is not None:
            _kill(second)
        controller.close()


def test_silent_agent_is_declared_lost(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["sub2"])
    controller = make_controller(keys)  # agent_lost_s = 1
    proc = _spawn_agent("sub2", controller.endpoint, keys, tmp_path, "a.log")
    try:
        controller.wait_for_agents(["sub2"], timeout_s=15)
        os.kill(proc.pid, signal.SIGSTOP)  # alive but silent: only heartbeats can tell
        time.sleep(1.6)
        assert controller.agents()["sub2"].lost
        with pytest.raises(AgentLost) as err:
            controller.wait_for_agents(["sub2"], timeout_s=0.3)
        assert "sub2" in str(err.value)
        os.kill(proc.pid, signal.SIGCONT)
        controller.wait_for_agents(["sub2"], timeout_s=5)
        assert not controller.agents()["sub2"].lost
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        _kill(proc)
        controller.close()


def test_pending_request_fails_when_agent_is_lost(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["sub3"])
    controller = make_controller(keys)  # agent_lost_s = 1
    proc = _spawn_agent("sub3", controller.endpoint, keys, tmp_path, "a.log")
    try:
        controller.wait_for_agents(["sub3"], timeout_s=15)
        threading.Timer(0.2, os.kill, args=(proc.pid, signal.SIGSTOP)).start()
        start = time.monotonic()
        with pytest.raises(AgentLost) as err:
            controller.request("sub3", "sleep", {"duration_s": 0.5}, timeout_s=10)
        assert time.monotonic() - start < 3  # well before the 10 s deadline
        assert "sub3" in str(err.value) and "sleep" in str(err.value)
    finally:
        os.kill(proc.pid, signal.SIGCONT)
        _kill(proc)
        controller.close()


def test_agent_goes_safe_when_controller_is_lost_and_reconnects(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["ue1"])
    controller = make_controller(keys)
    endpoint = controller.endpoint
    agent = make_agent(DemoAgent, "ue1", controller, keys, artifact_dir=tmp_path / "a")
    assert isinstance(agent, DemoAgent)
    agent.start()
    try:
        controller.wait_for_agents(["ue1"], timeout_s=5)
        assert agent.safe_states == 0
        controller.close()
        deadline = time.monotonic() + 3
        while agent.safe_states == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert agent.safe_states == 1  # controller_lost_s = 1
        # A new controller on the same endpoint: the agent finds it by itself.
        from cellab.bus import Controller

        controller = Controller(endpoint, secret_key_file=keys.controller_secret,
                                allowed_agent_keys=keys.agent_public_keys(), heartbeat_s=0.2, agent_lost_s=1.0)
        controller.wait_for_agents(["ue1"], timeout_s=5)
        assert controller.request("ue1", "echo", {"text": "back"}) == {"text": "back"}
    finally:
        agent.stop()
        controller.close()


def test_stop_calls_safe_state_and_says_bye(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"ue1": DemoAgent, "ue2": DemoAgent}) as (controller, agents):
        agents["ue2"].stop()
        assert agents["ue2"].safe_states == 1  # type: ignore[attr-defined]
        deadline = time.monotonic() + 0.5  # well before agent_lost_s: the bye says it
        while not controller.agents()["ue2"].lost and time.monotonic() < deadline:
            time.sleep(0.01)
        assert controller.agents()["ue2"].lost and not controller.agents()["ue1"].lost
        with pytest.raises(AgentLost):
            controller.wait_for_agents(["ue1", "ue2"], timeout_s=0.2)
        offsets = controller.measure_clock_offsets(["ue1"], samples=2)
        assert set(offsets) == {"ue1"} and offsets["ue1"].samples == 2
    assert agents["ue1"].safe_states == 1  # type: ignore[attr-defined]


def test_request_waiting_for_a_restart_outlives_the_loss_of_the_old_agent(tmp_path: Path) -> None:
    """An agent dies without a bye; a request for it waits for the restart. The old agent's silence
    passing agent_lost_s meanwhile must not fail that request, which was never sent: it waits on until
    its deadline (this raced with a slow restart in test_killed_agent_times_out_and_restarted_agent_reconnects)."""
    from cellab.bus.testing import RawAgent

    keys = make_keys(tmp_path / "keys", ["ue1"])
    controller = make_controller(keys)  # agent_lost_s = 1
    raw = RawAgent(keys, "ue1", controller)
    agent = None
    try:
        raw.hello()
        controller.wait_for_agents(["ue1"], timeout_s=10)
        raw.close()  # gone, no bye
        outcome: dict[str, object] = {}

        def call() -> None:
            try:
                outcome["reply"] = controller.request("ue1", "echo", {"text": "late"}, timeout_s=8)
            except Exception as exc:  # noqa: BLE001 - judged below
                outcome["error"] = exc

        caller = threading.Thread(target=call)
        caller.start()
        time.sleep(1.8)  # the old agent is declared lost meanwhile
        assert controller.agents()["ue1"].lost
        agent = make_agent(DemoAgent, "ue1", controller, keys, artifact_dir=tmp_path / "a")
        agent.start()
        caller.join(timeout=10)
        assert outcome == {"reply": {"text": "late"}}
    finally:
        if agent is not None:
            agent.stop()
        controller.close()


def test_an_agent_whose_ue_is_out_stays_alive_through_a_long_request_and_says_so(tmp_path: Path) -> None:
    """Issue 41: an agent whose UE is out (or frozen) keeps its heartbeats, with the UE's state in them. A request
    five times agent_lost_s long ends with its reply, the agent never lost, the controller knowing its UE is out;
    only silence (SIGSTOP of the agent itself) makes it lost."""
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):  # agent_lost_s = 1, heartbeats 0.2 s
        agent = agents["ue1"]
        assert controller.agents()["ue1"].ue_state is None  # nothing said yet
        agent.set_ue_state("out", "radio off")
        deadline = time.monotonic() + 1
        while controller.agents()["ue1"].ue_state != "out" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert controller.agents()["ue1"].ue_state == "out"
        started = time.monotonic()
        assert controller.request("ue1", "sleep", {"duration_s": 5.0}, timeout_s=10) is not None
        assert time.monotonic() - started >= 5.0
        status = controller.agents()["ue1"]
        assert not status.lost and status.ue_state == "out"
        agent.set_ue_state("in")
        deadline = time.monotonic() + 1
        while controller.agents()["ue1"].ue_state != "in" and time.monotonic() < deadline:
            time.sleep(0.02)
        assert controller.agents()["ue1"].ue_state == "in"
        with pytest.raises(ValueError, match="allowed: in, out, paused"):
            agent.set_ue_state("gone")
