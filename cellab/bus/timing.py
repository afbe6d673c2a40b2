"""The bus's liveness timing, without ZeroMQ: campaign checks (a fault shorter than the agent-lost rule) read it
at every `cellab validate`, which must not pay for importing pyzmq."""

from __future__ import annotations

from typing import Final

#: both ends send a heartbeat this often, and declare the other lost after PEER_LOST_S without a message
#: (the controller fails that agent's pending requests with AgentLost; an agent stops what it runs)
HEARTBEAT_S: Final = 1.0
PEER_LOST_S: Final = 5.0
