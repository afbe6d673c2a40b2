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
    """While entered, each agent's connection to any controller of this process is said through `say`: its first
    hello, and a hello after the controller had it lost or from another process (an agent says hello after every
    handshake, so one connection may say it twice: said once)."""

    def __init__(self, say: Callable[[str], None]):
        super().__init__()
        self.say = say
        self._said: dict[str, tuple[object, object]] = {}  # agent -> (pid, host) of the hello last said
        self._back: set[str] = set()  # agents the controller had lost and heard again

    def emit(self, record: logging.LogRecord) -> None:
        event, name = getattr(record, "event", None), str(getattr(record, "agent", "?"))
        if event == "agent_back":
            self._back.add(name)
        elif event == "agent_hello":
            who = (getattr(record, "pid", None), getattr(record, "host", None))
            if name not in self._said or name in self._back or self._said[name] != who:
                self.say(connect_line(record, name in self._said))
            self._said[name] = who
            self._back.discard(name)
        super().emit(record)
