"""CURVE on the bus: unknown agent keys are denied and logged; an impostor controller gets nothing run."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest
import zmq

from cellab.bus import AgentLost, Controller, wire
from cellab.bus.demo import DemoAgent
from cellab.bus.keys import fingerprint, generate_keypair, load_public_key, load_secret_key
from cellab.bus.testing import make_agent, make_controller, make_keys
from cellab.errors import InputError


def _records(caplog: pytest.LogCaptureFixture, event: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if getattr(r, "event", None) == event]


def _wait_for(predicate, timeout_s: float) -> bool:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_unknown_client_key_gets_no_answer_and_is_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cellab.bus")
    keys = make_keys(tmp_path / "keys", ["ue1"])
    rogue_pub, rogue_sec = generate_keypair(tmp_path / "rogue", "ue1")  # same name, key not on the allowlist
    controller = make_controller(keys)
    ctx = zmq.Context()
    try:
        # A hand-made client speaking the bus envelope, with a key the controller does not know.
        sock = ctx.socket(zmq.DEALER)
        sock.linger = 0
        sock.routing_id = b"ue1"
        sock.curve_publickey, sock.curve_secretkey = load_secret_key(rogue_sec)
        sock.curve_serverkey = load_public_key(keys.controller_public)
        sock.connect(controller.endpoint)
        sock.send_multipart([wire.encode_header({"version": 1, "kind": "hello", "role": "rogue"}), b""])
        sock.send_multipart([wire.encode_header({"version": 1, "kind": "heartbeat", "role": "rogue"}), b""])
        assert sock.poll(1500, zmq.POLLIN) == 0  # no answer, not even a heartbeat
        assert "ue1" not in controller.agents()
        rejected = _records(caplog, "curve_rejected")
        assert rejected, "the controller must log the rejection"
        assert rejected[0].fingerprint == fingerprint(load_public_key(rogue_pub))  # type: ignore[attr-defined]
        # The log names the key by fingerprint only: no key material.
        secret_text = load_secret_key(rogue_sec)[1].decode()
        assert all(secret_text not in r.getMessage() for r in caplog.records)
        sock.close()

        # A real agent with the rogue key: the controller never sees it connect.
        with pytest.raises(AgentLost) as err:
            rogue = DemoAgent("ue1", controller.endpoint, secret_key_file=rogue_sec,
                              controller_public_keys=[keys.controller_public], artifact_dir=tmp_path / "a",
                              heartbeat_s=0.2, controller_lost_s=1.0)
            rogue.start()
            try:
                controller.wait_for_agents(["ue1"], timeout_s=1.0)
            finally:
                rogue.stop()
        assert "ue1" in str(err.value)
        # The agent saw its key refused (ZAP denial) and logged it.
        assert _records(caplog, "refused_by_controller")
    finally:
        controller.close()
        ctx.term()


def test_impostor_controller_gets_nothing_executed(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="cellab.bus")
    keys = make_keys(tmp_path / "keys", ["ue1"])
    real = make_controller(keys)
    # The impostor has its own key pair but allows the agent's key, so only the agent's check protects it.
    _imp_pub, imp_sec = generate_keypair(tmp_path / "impostor", "controller")
    impostor = Controller("tcp://127.0.0.1:*", secret_key_file=imp_sec, allowed_agent_keys=keys.agent_public_keys(),
                          heartbeat_s=0.2, agent_lost_s=1.0)
    agent = DemoAgent("ue1", impostor.endpoint, secret_key_file=keys.agents["ue1"][1],
                      controller_public_keys=[keys.controller_public], artifact_dir=tmp_path / "a",
                      heartbeat_s=0.2, controller_lost_s=1.0)
    agent.start()
    try:
        with pytest.raises(AgentLost):
            impostor.request("ue1", "echo", {"text": "pwned"}, timeout_s=1.0)
        assert "ue1" not in impostor.agents()
        assert list(agent.executed) == []
        assert _wait_for(lambda: bool(_records(caplog, "controller_rejected")), 2.0)
        record = _records(caplog, "controller_rejected")[0]
        assert record.fingerprint == fingerprint(load_public_key(keys.controller_public))  # type: ignore[attr-defined]
    finally:
        agent.stop()
        impostor.close()
        real.close()


def test_agent_tries_each_allowed_controller_key(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["ue1"])
    other_pub, _ = generate_keypair(tmp_path / "old", "controller")
    controller = make_controller(keys)
    agent = DemoAgent("ue1", controller.endpoint, secret_key_file=keys.agents["ue1"][1],
                      controller_public_keys=[other_pub, keys.controller_public], artifact_dir=tmp_path / "a",
                      heartbeat_s=0.2, controller_lost_s=1.0)
    agent.start()
    try:
        controller.wait_for_agents(["ue1"], timeout_s=5)
        assert controller.request("ue1", "echo", {"text": "k2"}) == {"text": "k2"}
    finally:
        agent.stop()
        controller.close()


def test_missing_and_bad_key_files(tmp_path: Path) -> None:
    keys = make_keys(tmp_path / "keys", ["ue1"])
    with pytest.raises(InputError) as err:
        Controller("tcp://127.0.0.1:*", secret_key_file=tmp_path / "nope.key_secret", allowed_agent_keys=[])
    assert "nope.key_secret" in str(err.value) and "secret-key" in str(err.value)
    with pytest.raises(InputError) as err:
        Controller("tcp://127.0.0.1:*", secret_key_file=keys.controller_secret, allowed_agent_keys=[])
    assert "allowed_agent_keys" in str(err.value)
    with pytest.raises(InputError) as err:  # a public key where the secret is needed
        Controller("tcp://127.0.0.1:*", secret_key_file=keys.controller_public,
                   allowed_agent_keys=keys.agent_public_keys())
    assert "secret-key" in str(err.value)
    keys.controller_secret.chmod(0o644)
    with pytest.raises(InputError) as err:
        Controller("tcp://127.0.0.1:*", secret_key_file=keys.controller_secret,
                   allowed_agent_keys=keys.agent_public_keys())
    assert "mode" in str(err.value) and "600" in str(err.value)
    with pytest.raises(InputError) as err:
        Controller("udp://127.0.0.1:1", insecure=True)
    assert "bind_endpoint" in str(err.value) and "tcp://HOST:PORT" in str(err.value)


def test_agent_name_and_endpoint_checked(tmp_path: Path) -> None:
    with pytest.raises(InputError) as err:
        DemoAgent("ue 1; rm -rf /", "tcp://127.0.0.1:1", insecure=True, artifact_dir=tmp_path)
    assert "name" in str(err.value)
    with pytest.raises(InputError) as err:
        DemoAgent("ue1", "127.0.0.1:1", insecure=True, artifact_dir=tmp_path)
    assert "controller_endpoint" in str(err.value)


def test_logs_never_contain_secrets(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    keys = make_keys(tmp_path / "keys", ["ue1"])
    controller = make_controller(keys)
    agent = make_agent(DemoAgent, "ue1", controller, keys, artifact_dir=tmp_path / "a")
    agent.start()
    try:
        controller.wait_for_agents(["ue1"], timeout_s=5)
        controller.request("ue1", "ping")
    finally:
        agent.stop()
        controller.close()
    secrets = [load_secret_key(keys.controller_secret)[1].decode(), load_secret_key(keys.agents["ue1"][1])[1].decode()]
    text = "\n".join(r.getMessage() + json.dumps(vars(r), default=str) for r in caplog.records)
    assert all(s not in text for s in secrets)


def test_a_key_cannot_speak_for_another_agent(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Both keys are allowed, but ue1.key binds the name ue1: ue2's key cannot pose as ue1."""
    caplog.set_level(logging.INFO, logger="cellab.bus")
    keys = make_keys(tmp_path / "keys", ["ue1", "ue2"])
    controller = make_controller(keys, telemetry=True)
    got: list[tuple[str, str]] = []
    controller.subscribe(lambda agent, topic, data: got.append((agent, topic)))
    poser = DemoAgent("ue1", controller.endpoint, telemetry_endpoint=controller.telemetry_endpoint,
                      secret_key_file=keys.agents["ue2"][1], controller_public_keys=[keys.controller_public],
                      artifact_dir=tmp_path / "a", heartbeat_s=0.2, controller_lost_s=1.0)
    honest = make_agent(DemoAgent, "ue2", controller, keys, artifact_dir=tmp_path / "b")
    poser.start()
    honest.start()
    try:
        controller.wait_for_agents(["ue2"], timeout_s=5)
        with pytest.raises(AgentLost):
            controller.wait_for_agents(["ue1"], timeout_s=0.8)
        assert "ue1" not in controller.agents()
        deadline = time.monotonic() + 3
        while ("ue2", "t") not in got and time.monotonic() < deadline:
            poser.publish("t", {"x": 1})
            honest.publish("t", {"x": 2})
            time.sleep(0.05)
        assert ("ue2", "t") in got and ("ue1", "t") not in got
        records = _records(caplog, "agent_impersonation")
        assert records and records[0].agent == "ue1"  # type: ignore[attr-defined]
        assert records[0].fingerprint == fingerprint(load_public_key(keys.agents["ue2"][0]))  # type: ignore[attr-defined]
    finally:
        poser.stop()
        honest.stop()
        controller.close()
