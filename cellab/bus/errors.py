"""Errors of the bus: what a controller caller or an operation author can raise or catch."""

from __future__ import annotations

from cellab.errors import CellabError


class BusError(CellabError):
    """Base of every bus failure seen by the controller side."""


class AgentTimeout(BusError):
    """No reply before the request's deadline."""

    def __init__(self, agent: str, op: str, timeout_s: float):
        self.agent = agent
        self.op = op
        self.timeout_s = timeout_s
        super().__init__(f"agent {agent}: op {op}: no reply within the deadline of {timeout_s:g} s")


class AgentLost(BusError):
    """An agent is not connected, or has been silent past agent_lost_s."""

    def __init__(self, agents: list[str] | str, reason: str):
        self.agents = [agents] if isinstance(agents, str) else list(agents)
        self.reason = reason
        names = ", ".join(self.agents)
        super().__init__(f"agent {names}: {reason}" if len(self.agents) == 1 else f"agents {names}: {reason}")


class OperationError(BusError):
    """The agent refused or failed the operation (validation error, unknown op, domain failure)."""

    def __init__(self, agent: str, op: str, message: str, *, kind: str = "failed",
                 field: str | None = None, allowed: list[object] | None = None):
        self.agent = agent
        self.op = op
        self.kind = kind
        self.field = field
        self.allowed = allowed
        self.detail = message
        text = f"agent {agent}: op {op}: "
        text += f"{field}: {message}" if field else message
        if allowed:
            text += " (allowed: " + ", ".join(str(a) for a in allowed) + ")"
        super().__init__(text)


class OperationFailed(Exception):
    """Raised by an operation for a domain error; the controller sees it as OperationError.

    fatal=True additionally puts the agent's devices in their safe state; `field` (e.g. "params.name")
    and `allowed` reach the controller's OperationError.
    """

    def __init__(self, message: str, *, fatal: bool = False, field: str | None = None,
                 allowed: list[object] | None = None):
        self.fatal = fatal
        self.field = field
        self.allowed = allowed
        super().__init__(message)


class InvalidParams(OperationFailed):
    """Raised by an operation for parameters only the agent can judge (a name that is a link loop on its disk):
    the controller sees a validation error naming the field, as for parameters its model refuses."""
