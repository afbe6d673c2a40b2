"""Helpers for tests (of the bus and of every room's agent): keys, and a controller + agents on loopback
with CURVE on, always torn down.

    with lab_bus(tmp_path, {"att1": MyAttenuatorAgent}) as (controller, agents):
        controller.request("att1", "set_attenuation", {...})
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import zmq

from cellab.bus.agent import Agent
from cellab.bus.controller import Controller
from cellab.bus.keys import generate_keypair, load_public_key, load_secret_key

# Short heartbeats so loss and reconnection show up within a test's patience.
TEST_HEARTBEAT_S = 0.2
TEST_LOST_S = 1.0


@dataclass
class KeySet:
    directory: Path
    controller_public: Path
    controller_secret: Path
    agents: dict[str, tuple[Path, Path]] = field(default_factory=dict)  # name -> (public, secret)

    def agent_public_keys(self) -> list[Path]:
        return [pub for pub, _ in self.agents.values()]


def make_keys(directory: Path, agent_names: list[str]) -> KeySet:
    c_pub, c_sec = generate_keypair(directory, "controller")
    keys = KeySet(Path(directory), c_pub, c_sec)
    for name in agent_names:
        keys.agents[name] = generate_keypair(directory, name)
    return keys


def make_controller(keys: KeySet, *, telemetry: bool = False, **kwargs: Any) -> Controller:
    kwargs.setdefault("heartbeat_s", TEST_HEARTBEAT_S)
    kwargs.setdefault("agent_lost_s", TEST_LOST_S)
    return Controller("tcp://127.0.0.1:*", telemetry_endpoint="tcp://127.0.0.1:*" if telemetry else None,
                      secret_key_file=keys.controller_secret, allowed_agent_keys=keys.agent_public_keys(), **kwargs)


def make_agent(cls: type[Agent], name: str, controller: Controller, keys: KeySet, **kwargs: Any) -> Agent:
    kwargs.setdefault("heartbeat_s", TEST_HEARTBEAT_S)
    kwargs.setdefault("controller_lost_s", TEST_LOST_S)
    return cls(name, controller.endpoint, telemetry_endpoint=controller.telemetry_endpoint,
               secret_key_file=keys.agents[name][1], controller_public_keys=[keys.controller_public], **kwargs)


@contextlib.contextmanager
def lab_bus(directory: Path, agents: dict[str, type[Agent]], *, telemetry: bool = False,
            agent_kwargs: dict[str, dict[str, Any]] | None = None,
            connect_timeout_s: float = 10.0) -> Iterator[tuple[Controller, dict[str, Agent]]]:
    """A CURVE controller and started agents (background threads); stops all of them on exit."""
    keys = make_keys(Path(directory) / "keys", list(agents))
    controller = make_controller(keys, telemetry=telemetry)
    started: dict[str, Agent] = {}
    try:
        for name, cls in agents.items():
            extra = dict((agent_kwargs or {}).get(name, {}))
            extra.setdefault("artifact_dir", Path(directory) / "artifacts" / name)
            agent = make_agent(cls, name, controller, keys, **extra)
            agent.start()
            started[name] = agent
        controller.wait_for_agents(list(agents), timeout_s=connect_timeout_s)
        yield controller, started
    finally:
        for agent in started.values():
            agent.stop()
        controller.close()


class RawController:
    """A hand-made controller for tests of what agents do with hostile input: a CURVE ROUTER holding the
    controller's key (so agents trust it) that sends any frames at all and hands back whatever comes."""

    def __init__(self, keys: KeySet, endpoint: str = "tcp://127.0.0.1:*"):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.ROUTER)
        self.sock.linger = 0
        self.sock.curve_server = True
        self.sock.curve_publickey, self.sock.curve_secretkey = load_secret_key(keys.controller_secret)
        self.sock.bind(endpoint)
        self.endpoint: str = self.sock.last_endpoint.decode()
        self.telemetry_endpoint: str | None = None

    def send(self, agent: str, frames: list[bytes]) -> None:
        self.sock.send_multipart([agent.encode(), *frames])

    def recv(self, timeout_s: float) -> list[bytes] | None:
        """The next message (identity first), or None after timeout_s."""
        if not self.sock.poll(int(timeout_s * 1000)):
            return None
        return self.sock.recv_multipart()

    def wait_for(self, agent: str, timeout_s: float = 10.0) -> None:
        """Until any message of `agent` (its hello or a heartbeat) came."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            message = self.recv(0.05)
            if message is not None and message[0] == agent.encode():
                return
        raise TimeoutError(f"agent {agent} did not connect within {timeout_s:g} s")

    def replies_until(self, agent: str, rid: int, timeout_s: float = 10.0) -> list[list[bytes]]:
        """Every reply or error of `agent` (header, body, ...) up to and including the one with id `rid`;
        heartbeats and hellos are skipped. TimeoutError when that reply does not come within timeout_s."""
        deadline = time.monotonic() + timeout_s
        got: list[list[bytes]] = []
        while True:
            left = deadline - time.monotonic()
            message = self.recv(max(left, 0.0)) if left > 0 else None
            if message is None:
                raise TimeoutError(f"no reply {rid} from {agent} within {timeout_s:g} s (got {got!r:.400})")
            if message[0] != agent.encode():
                continue
            header = json.loads(message[1])
            if header.get("kind") in ("heartbeat", "hello"):
                continue
            got.append(message[1:])
            if header.get("id") == rid:
                return got

    def call(self, agent: str, op: str, params: dict | None = None, rid: int = 1,
             timeout_s: float = 10.0) -> tuple[dict, Any]:
        """A well-formed request; the (header, body) of its reply (earlier replies are skipped)."""
        header = json.dumps({"version": 1, "kind": "request", "id": rid, "op": op, "deadline": timeout_s})
        self.send(agent, [header.encode(), json.dumps(params or {}).encode()])
        reply = self.replies_until(agent, rid, timeout_s)[-1]
        return json.loads(reply[0]), json.loads(reply[1]) if reply[1] else None

    def close(self) -> None:
        self.sock.close(linger=0)
        self.ctx.term()


class RawAgent:
    """A hand-made agent for tests of what the controller does with hostile input: a DEALER named `name`
    holding that agent's key (so the controller lets it in), and a PUB to the telemetry endpoint."""

    def __init__(self, keys: KeySet, name: str, controller: Controller):
        self.ctx = zmq.Context()
        self.name = name
        pair = load_secret_key(keys.agents[name][1])
        server_key = load_public_key(keys.controller_public)
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.linger = 0
        self.sock.routing_id = name.encode()
        self.sock.curve_publickey, self.sock.curve_secretkey = pair
        self.sock.curve_serverkey = server_key
        self.sock.connect(controller.endpoint)
        self.pub: Any = None
        if controller.telemetry_endpoint:
            self.pub = self.ctx.socket(zmq.PUB)
            self.pub.linger = 0
            self.pub.curve_publickey, self.pub.curve_secretkey = pair
            self.pub.curve_serverkey = server_key
            self.pub.connect(controller.telemetry_endpoint)

    def hello(self) -> None:
        self.send([b'{"version":1,"kind":"hello","role":"raw"}', b""])

    def send(self, frames: list[bytes]) -> None:
        self.sock.send_multipart(frames)

    def publish(self, frames: list[bytes]) -> None:
        assert self.pub is not None
        self.pub.send_multipart(frames)

    def recv(self, timeout_s: float) -> list[bytes] | None:
        if not self.sock.poll(int(timeout_s * 1000)):
            return None
        return self.sock.recv_multipart()

    def next_request(self, timeout_s: float = 10.0) -> dict:
        """The header of the next request (heartbeats skipped); TimeoutError if none comes."""
        deadline = time.monotonic() + timeout_s
        while (left := deadline - time.monotonic()) > 0:
            message = self.recv(left)
            if message is None:
                break
            header = json.loads(message[0])
            if header.get("kind") == "request":
                return header
        raise TimeoutError(f"no request for {self.name} within {timeout_s:g} s")

    def close(self) -> None:
        self.sock.close(linger=0)
        if self.pub is not None:
            self.pub.close(linger=0)
        self.ctx.term()


@contextlib.contextmanager
def controller_with_raw_agent(folder: Path) -> Iterator[tuple[Any, RawAgent, Any]]:
    """A controller with two agents: `ue1` a raw socket the test writes frames on, `ue2` an honest DemoAgent
    (whether the controller still serves honest agents is what hostile-input tests check)."""
    from cellab.bus.demo import DemoAgent

    keys = make_keys(folder / "keys", ["ue1", "ue2"])
    controller = make_controller(keys, telemetry=True)
    raw = RawAgent(keys, "ue1", controller)
    honest = make_agent(DemoAgent, "ue2", controller, keys, artifact_dir=folder / "b")
    honest.start()
    try:
        raw.hello()
        controller.wait_for_agents(["ue1", "ue2"], timeout_s=10)
        yield controller, raw, honest
    finally:
        honest.stop()
        raw.close()
        controller.close()
