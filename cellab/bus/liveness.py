"""The controller's view of its agents: who is connected, heartbeats both ways, agents declared lost
after agent_lost_s of silence (their pending requests fail with AgentLost), and the background thread
that reads the socket when no caller does."""

from __future__ import annotations

import logging
import os
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import zmq
from pydantic import BaseModel

from cellab.bus import wire
from cellab.bus.errors import AgentLost
from cellab.bus.start_options import check_host, check_start_options
from cellab.bus.timing import UE_STATES

if TYPE_CHECKING:
    from cellab.bus.routing import Pending

log = logging.getLogger("cellab.bus.controller")

# Upper bound on the background thread's wait, in case a descriptor edge was consumed elsewhere.
BG_MAX_WAIT_S = 0.25
# After a caller led the socket this recently, the background thread only checks in every _BUSY_S.
_BUSY_S = 0.05
# How often a request for an agent without a route checks whether the agent has (re)connected.
_CONTACT_POLL_S = 0.02


class AgentStatus(BaseModel):
    name: str
    role: str
    version: str
    last_seen: float  # wall-clock time (s since the epoch) of the last message from the agent
    lost: bool
    #: what the agent's heartbeats say of its UE (timing.UE_STATES; None: nothing said): an agent whose UE is out
    #: is alive, not lost
    ue_state: str | None = None
    host: str | None = None  # the host name the agent's hello said
    #: the host-only options it was started with, as its hello said (None: an agent whose hello says none)
    start_options: dict[str, str] | None = None


@dataclass
class AgentState:
    name: str
    role: str = "unknown"
    version: str = ""
    last_seen_mono: float = 0.0
    lost: bool = False
    ue_state: str | None = None
    host: str | None = None  # the host name its hello says
    start_options: dict[str, str] | None = None  # the host-only options its hello says (None: it says none)

    def note_hello(self, header: dict[str, Any]) -> None:
        """A hello's host and start options, each kept only when it passes its check (cellab.bus.start_options)."""
        self.host = check_host(header.get("host"))
        said = header.get("start_options")
        self.start_options = None if said is None else check_start_options(said)

    def note_ue_state(self, said: Any, endpoint: str) -> None:
        """A heartbeat's `ue_state`: kept when it is one of UE_STATES, the change logged (an agent whose UE went
        out stays alive: only its silence makes it lost)."""
        if said is None or said == self.ue_state or said not in UE_STATES:
            return
        log.info("agent %s says its UE is %s", self.name, said,
                 extra={"event": "agent_ue_state", "agent": self.name, "ue_state": said, "endpoint": endpoint})
        self.ue_state = said


class Liveness:
    """Mixed into Controller."""

    heartbeat_s: float
    agent_lost_s: float
    endpoint: str
    _sock: zmq.Socket
    _sock_fd: int
    _agents: dict[str, AgentState]
    _pending: dict[int, Pending]
    _state_lock: threading.Lock
    _state_changed: threading.Condition
    _io_lock: threading.Lock
    _closed: threading.Event
    _leading: bool
    _last_lead_end: float
    _next_heartbeat: float
    _bg_r: int
    _drain_socket: Callable[[], None]  # routing.py

    def wait_for_agents(self, names: list[str], timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self._state_changed:
            while True:
                missing = [n for n in names if n not in self._agents or self._agents[n].lost]
                left = deadline - time.monotonic()
                if not missing:
                    return
                if left <= 0:
                    raise AgentLost(missing, f"not connected within {timeout_s:g} s")
                self._state_changed.wait(min(left, BG_MAX_WAIT_S))

    def agents(self) -> dict[str, AgentStatus]:
        wall_minus_mono = time.time() - time.monotonic()
        with self._state_lock:
            return {a.name: AgentStatus(name=a.name, role=a.role, version=a.version,
                                        last_seen=a.last_seen_mono + wall_minus_mono, lost=a.lost,
                                        ue_state=a.ue_state, host=a.host,
                                        start_options=None if a.start_options is None else dict(a.start_options))
                    for a in self._agents.values()}

    def _wait_for_contact(self, agent: str, since: float, deadline: float, timeout_s: float) -> None:
        while not self._closed.is_set():
            with self._state_lock:
                state = self._agents.get(agent)
                if state is not None and state.last_seen_mono > since:
                    return
            left = deadline - time.monotonic()
            if left <= 0:
                break
            time.sleep(min(left, _CONTACT_POLL_S))
        raise AgentLost(agent, f"not connected to the controller (waited {timeout_s:g} s)")

    # ----- caller holds _io_lock ---------------------------------------------------------------
    def _housekeeping(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.heartbeat_s
        beat = wire.encode_header({"version": wire.VERSION, "kind": wire.HEARTBEAT})
        failed: list[Pending] = []
        with self._state_lock:
            agents = list(self._agents.values())
            for state in agents:
                if not state.lost and now - state.last_seen_mono > self.agent_lost_s:
                    state.lost = True
                    log.warning("agent %s lost: silent for %.1f s", state.name, now - state.last_seen_mono,
                                extra={"event": "agent_lost", "agent": state.name, "endpoint": self.endpoint})
                    # Requests still waiting for a route wait on until their deadline (a restart).
                    failed += [p for p in self._pending.values() if p.agent == state.name and p.sent and not p.done]
        # finish() under the state lock, below
        if failed:
            with self._state_changed:
                for p in failed:
                    p.finish(None, b"", AgentLost(p.agent, f"silent for more than {self.agent_lost_s:g} s (op {p.op})"))
                self._state_changed.notify_all()
        for state in agents:
            if state.lost:
                continue
            try:
                self._sock.send_multipart([state.name.encode(), beat, b""], flags=zmq.NOBLOCK)
            except zmq.ZMQError:
                pass  # not connected right now; the lost check above decides

    # ----- the background thread ---------------------------------------------------------------
    def _background(self) -> None:
        """Read the socket and send heartbeats when no caller is leading.

        While callers are busy (led in the last _BUSY_S) they read the socket themselves, so this
        thread only checks in now and then instead of waking on every reply and contending for the lock.
        poll(2), not select(2): a process with several controllers (one per lab) may hold descriptors
        past select's limit of 1024.
        """
        poller = select.poll()
        poller.register(self._sock_fd, select.POLLIN)
        poller.register(self._bg_r, select.POLLIN)
        while not self._closed.is_set():
            try:
                if self._background_turn(poller):
                    return
            except Exception:  # a bug of ours: log it, and keep the heartbeats going
                log.exception("controller background turn failed", extra={"event": "controller_bug",
                                                                           "endpoint": self.endpoint})
                self._closed.wait(_BUSY_S)

    def _background_turn(self, poller: Any) -> bool:
        """One wait and read; True when the controller closed."""
        now = time.monotonic()
        if self._leading or now - self._last_lead_end < _BUSY_S:
            if self._closed.wait(_BUSY_S):
                return True
            if self._io_lock.acquire(blocking=False):
                try:
                    self._drain_socket()
                    self._housekeeping()
                finally:
                    self._io_lock.release()
            return False
        wait_s = min(BG_MAX_WAIT_S, max(0.0, self._next_heartbeat - now))
        try:
            ready = poller.poll(int(wait_s * 1000) + 1)
        except OSError:
            return True
        if any(fd == self._bg_r for fd, _ in ready):
            drain_pipe(self._bg_r)
        if self._closed.is_set():
            return True
        with self._io_lock:
            if self._closed.is_set():
                return True
            self._drain_socket()
            self._housekeeping()
        return False


def poke(fd: int) -> None:
    try:
        os.write(fd, b"\0")
    except (BlockingIOError, OSError):
        pass


def drain_pipe(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except (BlockingIOError, OSError):
        pass
