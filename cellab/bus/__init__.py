"""ZeroMQ bus: controller, agents, CURVE keys, clock offsets, telemetry.

    from cellab.bus import Agent, operation, OperationFailed, Controller, AgentTimeout, AgentLost, OperationError

The names below load their module on first use (PEP 562): `cellab.bus.keys` (the CLI's `keys` command, key checks
in inventories) needs no ZeroMQ socket code, and importing pyzmq and the agent/controller machinery costs every
`cellab` start.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# the decorator shares its module's name: bound here, first, so that importing cellab.bus.operation (as the agent
# module does) can never leave the package attribute `operation` pointing at the module; it needs only pydantic
from cellab.bus.errors import AgentLost, AgentTimeout, BusError, OperationError, OperationFailed
from cellab.bus.operation import operation

_HOMES = {
    "Agent": "agent", "RawReply": "agent", "ReadArtifactParams": "agent",
    "AgentStatus": "controller", "ClockOffset": "controller", "Controller": "controller",
}
__all__ = [
    "Agent", "AgentLost", "AgentStatus", "AgentTimeout", "BusError", "ClockOffset", "Controller",
    "OperationError", "OperationFailed", "RawReply", "ReadArtifactParams", "operation",
]

if TYPE_CHECKING:
    from cellab.bus.agent import Agent, RawReply, ReadArtifactParams
    from cellab.bus.controller import AgentStatus, ClockOffset, Controller


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'cellab.bus' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"cellab.bus.{home}"), name)
    globals()[name] = value
    return value
