"""`cellab run` says each agent as it connects, and again when it comes back after a loss: one line with its role,
name, host and key fingerprint, from the controller's own `agent_hello` record (the doctor reads the same
records: cellab.inventory.doctor.KeyEvents), so a lab day shows which agent came from where without the doctor."""

from __future__ import annotations

import logging
from collections.abc import Callable

from cellab.inventory.doctor import KeyEvents


def connect_line(record: logging.LogRecord, again: bool) -> str:
    """An `agent_hello` record in words: role, name, host as the agent says it (and the address it came from)."""
    host, peer = getattr(record, "host", None), getattr(record, "peer", None)
    where = " ".join(p for p in (host or "", f"({peer})" if peer else "") if p) or "not said"
    return (f"agent {getattr(record, 'agent', '?')} {'connected again' if again else 'connected'}: role "
            f"{getattr(record, 'role', None) or '?'}, host {where}, key {getattr(record, 'fingerprint', '?')}")


class ConnectLines(KeyEvents):
    """While entered, each agent's hello to any controller of this process is said through `say`."""

    def __init__(self, say: Callable[[str], None]):
        super().__init__()
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "agent_hello":
            self.say(connect_line(record, str(getattr(record, "agent", "?")) in self.hellos))
        super().emit(record)
