"""Helpers for tests (of the bus and of every room's agent): keys, and a controller + agents on loopback
with CURVE on, always torn down.

    with lab_bus(tmp_path, {"att1": MyAttenuatorAgent}) as (controller, agents):
        controller.request("att1", "set_attenuation", {...})
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellab.bus.agent import Agent
from cellab.bus.controller import Controller
from cellab.bus.keys import generate_keypair

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
