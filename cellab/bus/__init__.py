"""ZeroMQ bus: controller, agents, CURVE keys, clock offsets, telemetry.

    from cellab.bus import Agent, operation, OperationFailed, Controller, AgentTimeout, AgentLost, OperationError
"""

from cellab.bus.agent import Agent, RawReply, ReadArtifactParams
from cellab.bus.controller import AgentStatus, ClockOffset, Controller
from cellab.bus.errors import AgentLost, AgentTimeout, BusError, OperationError, OperationFailed
from cellab.bus.operation import operation

__all__ = [
    "Agent", "AgentLost", "AgentStatus", "AgentTimeout", "BusError", "ClockOffset", "Controller",
    "OperationError", "OperationFailed", "RawReply", "ReadArtifactParams", "operation",
]
