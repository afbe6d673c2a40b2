"""Controller: one ROUTER (CURVE server with an allowlist of agent keys) that sends typed requests.

This module builds the controller and tears it down; its concerns live beside it: the request path and
the sorting of what arrives (routing.py), agents' liveness and the background thread (liveness.py),
telemetry (telemetry.py), clock offsets and artifacts (transfer.py), keys and names (auth.py).
A controller holds nothing process-wide (its own ZeroMQ context, ZAP handler, pipes and threads), so a
process may run several, one per lab.

Threads and the one socket: the ROUTER belongs to whoever holds `_io_lock`. A caller of request()
takes the lock, sends, and polls for its own reply itself (no thread hand-off on the fast path); if
another caller wants the socket it writes the yield pipe, and the current one lets go and waits for
its reply on an Event. A background thread waits on the socket's file descriptor *without* the lock
and, when it fires, takes the lock briefly to read what arrived (hellos, heartbeats, replies of
callers that let go) and to send heartbeats. Every holder drains the socket before letting go, so
the descriptor's edge is never lost. A lock gives the memory barrier libzmq asks for when a socket
moves between threads; the socket is never used by two threads at once.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Self

import zmq
import zmq.auth.thread

from cellab.bus import wire
from cellab.bus.auth import Allowlist, Auth, curve_server, load_controller_keys
from cellab.bus.errors import BusError
from cellab.bus.liveness import AgentState, AgentStatus, Liveness, poke
from cellab.bus.names import check_endpoint
from cellab.bus.routing import Pending, Routing
from cellab.bus.telemetry import Telemetry
from cellab.bus.throttle import Throttle
from cellab.bus.transfer import ClockOffset, Transfer
from cellab.errors import InputError

__all__ = ["AgentStatus", "ClockOffset", "Controller"]

log = logging.getLogger("cellab.bus.controller")

# A leader first waits this long for its reply in a blocking read of the socket alone (its RCVTIMEO):
# 10 us of CPU and latency cheaper per round trip than zmq_poll on the socket and the yield pipe
# (issue 18). A caller that wants the socket meanwhile waits at most this long for it.
_FIRST_WAIT_MS = 1


class Controller(Routing, Liveness, Telemetry, Transfer, Auth):
    def __init__(self, bind_endpoint: str, *, telemetry_endpoint: str | None = None,
                 secret_key_file: Path | None = None, allowed_agent_keys: list[Path] | None = None,
                 insecure: bool = False, heartbeat_s: float = wire.HEARTBEAT_S,
                 agent_lost_s: float = wire.PEER_LOST_S):
        source = "controller"
        check_endpoint(bind_endpoint, source, "bind_endpoint")
        if telemetry_endpoint:
            check_endpoint(telemetry_endpoint, source, "telemetry_endpoint")
        if not heartbeat_s > 0 or not agent_lost_s > heartbeat_s:
            raise InputError(source, "agent_lost_s", "need 0 < heartbeat_s < agent_lost_s")
        self.heartbeat_s = heartbeat_s
        self.agent_lost_s = agent_lost_s
        self.insecure = insecure
        keys: tuple[bytes, bytes] | None = None
        self._name_keys: dict[str, str] = {}
        self._impostor_logged: dict[tuple[str, str], float] = {}
        self._throttle = Throttle(log)
        if not insecure:
            keys, allow, self._name_keys = load_controller_keys(secret_key_file, allowed_agent_keys)

        self._ctx = zmq.Context()
        self._auth: zmq.auth.thread.ThreadAuthenticator | None = None
        if not insecure:
            self._allowlist = Allowlist(allow)
            self._auth = zmq.auth.thread.ThreadAuthenticator(self._ctx, log=logging.getLogger("cellab.bus.zap"))
            self._auth.start()
            self._auth.configure_curve_callback("*", credentials_provider=self._allowlist)

        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.router_mandatory = 1
        self._sock.router_handover = 1  # a restarted agent with the same name takes over its route
        self._sock.linger = 0
        self._sock.heartbeat_ivl = int(heartbeat_s * 1000)
        self._sock.heartbeat_timeout = int(agent_lost_s * 1000)
        self._sock.maxmsgsize = wire.MAX_FRAME_BYTES
        self._sock.rcvtimeo = _FIRST_WAIT_MS  # the one blocking read, in _lead; all others are NOBLOCK
        curve_server(self._sock, keys)
        self._sock.bind(bind_endpoint)
        self.endpoint: str = self._sock.last_endpoint.decode()

        self._sub: zmq.Socket | None = None
        self.telemetry_endpoint: str | None = None
        if telemetry_endpoint:
            self._sub = self._ctx.socket(zmq.SUB)
            self._sub.linger = 0
            self._sub.maxmsgsize = wire.MAX_TELEMETRY_BYTES
            curve_server(self._sub, keys)
            self._sub.subscribe(b"")
            self._sub.bind(telemetry_endpoint)
            self.telemetry_endpoint = self._sub.last_endpoint.decode()

        self._io_lock = threading.Lock()
        self._state_lock = threading.Lock()
        # Notified when an agent appears or comes back, a reply lands, or a leader lets go of the socket.
        self._state_changed = threading.Condition(self._state_lock)
        self._agents: dict[str, AgentState] = {}
        self._pending: dict[int, Pending] = {}
        self._ids = itertools.count(1)
        self._checked: set[tuple[str, str]] = set()  # (agent, op) pairs whose names passed the checks
        self._waiters = 0  # callers blocked on _io_lock (the leader yields to them)
        self._followers = 0  # callers waiting for a reply while someone else leads
        self._leading = False
        self._last_lead_end = 0.0
        self._yield_r, self._yield_w = os.pipe()
        self._bg_r, self._bg_w = os.pipe()
        for fd in (self._yield_r, self._yield_w, self._bg_r, self._bg_w):
            os.set_blocking(fd, False)
        self._lead_poller = zmq.Poller()
        self._lead_poller.register(self._sock, zmq.POLLIN)
        self._lead_poller.register(self._yield_r, zmq.POLLIN)
        self._sock_fd: int = self._sock.getsockopt(zmq.FD)
        self._next_heartbeat = 0.0
        self._subscribers: list[Callable[[str, str, dict], None]] = []
        self._closed = threading.Event()
        self._bg = threading.Thread(target=self._background, name="controller-io", daemon=True)
        self._bg.start()
        self._tel: threading.Thread | None = None
        if self._sub is not None:
            self._tel = threading.Thread(target=self._telemetry_loop, name="controller-telemetry", daemon=True)
            self._tel.start()
        log.info("controller listening", extra={"event": "controller_start", "endpoint": self.endpoint,
                                                "telemetry": self.telemetry_endpoint, "curve": not insecure})

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        poke(self._bg_w)
        poke(self._yield_w)
        self._bg.join(timeout=5)
        if self._tel is not None:
            self._tel.join(timeout=5)
        with self._io_lock:
            with self._state_changed:
                for p in self._pending.values():
                    if not p.done:
                        p.finish(None, b"", BusError("controller closed"))
                self._state_changed.notify_all()
            self._sock.close(linger=0)
            if self._sub is not None:
                self._sub.close(linger=0)
        if self._auth is not None:
            self._auth.stop()
        self._ctx.term()
        for fd in (self._yield_r, self._yield_w, self._bg_r, self._bg_w):
            os.close(fd)
        log.info("controller closed", extra={"event": "controller_stop", "endpoint": self.endpoint})

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
