"""The bus's liveness timing, without ZeroMQ: campaign checks (a fault shorter than the agent-lost rule) read it
at every `cellab validate`, which must not pay for importing pyzmq."""

from __future__ import annotations

from typing import Final

#: both ends send a heartbeat this often, and declare the other lost after PEER_LOST_S without a message
#: (the controller fails that agent's pending requests with AgentLost; an agent stops what it runs)
HEARTBEAT_S: Final = 1.0
PEER_LOST_S: Final = 5.0
#: what an agent may say of its UE in its heartbeats (Agent.set_ue_state): its radio link up, lost (out of
#: coverage, radio off), or its host paused; the agent's own liveness is its heartbeats, whatever its UE says
UE_STATES: Final = ("in", "out", "paused")
