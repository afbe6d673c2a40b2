"""The controller's request path: send a request, read the ROUTER for its reply (leading the socket,
or following while another caller leads), and sort out every message that arrives.

A malformed message from an authenticated agent (issue 27) is dropped and logged, rate-limited; a
malformed reply to a request ends it with OperationError (`kind: bad_reply`). Nothing an agent sends
raises anything else in a caller or stops one of the controller's threads.
"""

from __future__ import annotations

import itertools
import logging
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import zmq
from pydantic import BaseModel

from cellab.bus import wire
from cellab.bus.errors import AgentLost, AgentTimeout, BusError, OperationError
from cellab.bus.liveness import AgentState, drain_pipe, poke
from cellab.bus.keys import agent_line, fingerprint
from cellab.bus.names import check_name, is_name, short
from cellab.bus.throttle import Throttle
from cellab.errors import InputError

log = logging.getLogger("cellab.bus.controller")

_OP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# The longest role and version string kept of an agent's hello or heartbeat.
_TEXT_KEPT = 64
# The longest error message and `allowed` list kept of an agent's error reply.
_MESSAGE_KEPT = 4000
_ALLOWED_KEPT = 100
# A follower that finds the socket taken waits this long for it, then follows the new leader again.
_FOLLOW_RETRY_S = 0.005


@dataclass(slots=True)
class Pending:
    agent: str
    op: str
    sent: bool = False  # handed to ZeroMQ with a route: loss of the agent now fails it
    done: bool = False
    header: dict[str, Any] | None = None
    body: bytes = b""
    failure: BaseException | None = None

    def finish(self, header: dict[str, Any] | None, body: bytes, failure: BaseException | None = None) -> None:
        """Call with _state_lock held, then notify _state_changed."""
        self.header, self.body, self.failure = header, body, failure
        self.done = True


def bad_reply(agent: str, op: str, message: str) -> OperationError:
    return OperationError(agent, op, message, kind="bad_reply")


def operation_error(agent: str, op: str, body: bytes) -> OperationError:
    """The OperationError an error reply's body describes; any body at all gives one."""
    try:
        err = wire.decode_json(body)
    except ValueError as exc:
        return bad_reply(agent, op, f"unreadable error reply: {exc}")
    if type(err) is not dict:
        return bad_reply(agent, op, f"unreadable error reply: {short(err)}")
    kind, message, field, allowed = err.get("kind"), err.get("message"), err.get("field"), err.get("allowed")
    return OperationError(agent, op, message[:_MESSAGE_KEPT] if type(message) is str else short(message),
                          kind=kind[:_TEXT_KEPT] if type(kind) is str else "failed",
                          field=field[:_TEXT_KEPT] if type(field) is str else None,
                          allowed=allowed[:_ALLOWED_KEPT] if type(allowed) is list else None)


class Routing:
    """Mixed into Controller."""

    endpoint: str
    _sock: zmq.Socket
    _agents: dict[str, AgentState]
    _pending: dict[int, Pending]
    _ids: itertools.count
    _checked: set[tuple[str, str]]
    _name_keys: dict[str, str]
    _state_lock: threading.Lock
    _state_changed: threading.Condition
    _io_lock: threading.Lock
    _closed: threading.Event
    _waiters: int
    _followers: int
    _leading: bool
    _last_lead_end: float
    _next_heartbeat: float
    _lead_poller: zmq.Poller
    _yield_r: int
    _yield_w: int
    _throttle: Throttle
    _speaks_for: Callable[[str, zmq.Frame], bool]  # auth.py
    _housekeeping: Callable[[], None]  # liveness.py
    _wait_for_contact: Callable[[str, float, float, float], None]  # liveness.py

    def request(self, agent: str, op: str, params: dict | BaseModel | None = None, timeout_s: float = 10.0) -> dict:
        """Run `op` on `agent` and return its result; raises AgentTimeout, AgentLost or OperationError."""
        header, body = self._call(agent, op, params, timeout_s)
        if header.get("raw") is True:
            meta = header.get("meta", {})
            if type(meta) is not dict:
                raise bad_reply(agent, op, f"a raw reply whose meta is not an object: {short(meta)}")
            return {**meta, "data": body}
        if not body:
            return {}
        try:
            return wire.decode_json(body)
        except ValueError as exc:
            raise bad_reply(agent, op, f"the reply is not JSON: {exc}") from None

    # ----- request path ------------------------------------------------------------------------
    def _call(self, agent: str, op: str, params: dict | BaseModel | None, timeout_s: float) -> tuple[dict, bytes]:
        if self._closed.is_set():
            raise BusError("controller closed")
        if (agent, op) not in self._checked:
            check_name(agent, "controller.request")
            if not isinstance(op, str) or not _OP_RE.fullmatch(op):
                raise InputError("controller.request", "op", f"{op!r} is not an operation name",
                                 ["letters, digits and '_', starting with a letter or '_'"])
            self._checked.add((agent, op))
        if not timeout_s > 0:
            raise InputError("controller.request", "timeout_s", f"{timeout_s} is not a duration", ["> 0"])
        if params is None:
            body = b""
        elif type(params) is dict:  # the usual case, before pydantic's slower isinstance hook
            body = wire.encode_body(params)
        elif isinstance(params, BaseModel):
            body = params.model_dump_json().encode()
        else:
            body = wire.encode_body(params)
        if len(body) > wire.MAX_FRAME_BYTES:
            raise InputError("controller.request", "params", f"{len(body)} bytes of params, over the bus's limit "
                             f"of {wire.MAX_FRAME_BYTES}")
        rid = next(self._ids)
        deadline = time.monotonic() + timeout_s
        # Built by hand on the hot path: op is checked against _OP_RE, rid is an int, timeout_s a number.
        header = (f'{{"version":{wire.VERSION},"kind":"request","id":{rid},"op":"{op}",'
                  f'"deadline":{float(timeout_s)!r}}}').encode()
        pending = Pending(agent, op)
        with self._state_lock:
            self._pending[rid] = pending
        try:
            while True:
                unreachable_at = None
                self._acquire_io()
                try:
                    try:
                        # Three plain sends: the first one either queues the whole message or fails.
                        sock = self._sock
                        sock.send(agent.encode(), wire.SNDMORE_NOBLOCK)
                        sock.send(header, wire.SNDMORE_NOBLOCK)
                        sock.send(body, wire.NOBLOCK)
                    except zmq.ZMQError as exc:
                        if exc.errno == zmq.EHOSTUNREACH:
                            unreachable_at = time.monotonic()
                        elif exc.errno == zmq.EAGAIN:
                            raise AgentLost(agent, "not reading: its send queue is full") from None
                        else:
                            raise
                    else:
                        pending.sent = True
                        self._lead(pending, deadline)
                finally:
                    self._release_io()
                if unreachable_at is None:
                    break
                # No route (not yet connected, or reconnecting after a restart): wait for it to speak.
                self._wait_for_contact(agent, unreachable_at, deadline, timeout_s)
            while not pending.done and time.monotonic() < deadline and not self._closed.is_set():
                # Follow: wait while someone else leads; when nobody does, lead again ourselves.
                with self._state_changed:
                    self._followers += 1
                    try:
                        while not pending.done and self._leading and not self._closed.is_set():
                            left = deadline - time.monotonic()
                            if left <= 0:
                                break
                            self._state_changed.wait(left)
                    finally:
                        self._followers -= 1
                if pending.done or time.monotonic() >= deadline:
                    break
                # Lead without asking anyone to yield: a follower only waits for a reply, which any leader reads
                # for it. (Poking made waiting callers hand the socket round without end when three or more
                # waited: 100 % of a core, and no leader lasted long enough to send heartbeats, so agents
                # declared the controller lost mid-run.) The lock held by another: follow it again.
                if not self._io_lock.acquire(timeout=_FOLLOW_RETRY_S):
                    continue
                self._take_lead()
                try:
                    self._lead(pending, deadline)
                finally:
                    self._release_io()
        finally:
            with self._state_lock:
                self._pending.pop(rid, None)
        if pending.failure is not None:
            raise pending.failure
        if pending.header is None:
            raise AgentTimeout(agent, op, timeout_s)
        if pending.header.get("kind") == wire.ERROR:
            raise operation_error(agent, op, pending.body)
        return pending.header, pending.body

    def _acquire_io(self) -> None:
        """Take the socket as the leader to send (asking the current leader to yield if there is one)."""
        if not self._io_lock.acquire(blocking=False):
            with self._state_lock:
                self._waiters += 1
            poke(self._yield_w)
            try:
                self._io_lock.acquire()
            finally:
                with self._state_lock:
                    self._waiters -= 1
        self._take_lead()

    def _take_lead(self) -> None:
        """The lock is ours: lead, unless the controller closed meanwhile."""
        if self._closed.is_set():
            self._io_lock.release()
            raise BusError("controller closed")
        self._leading = True

    def _release_io(self) -> None:
        self._drain_socket()
        self._leading = False
        self._last_lead_end = time.monotonic()
        self._io_lock.release()
        if self._followers:
            with self._state_changed:
                self._state_changed.notify_all()

    def _lead(self, pending: Pending, deadline: float) -> None:
        """Read the socket until our reply comes, the deadline passes, or another caller wants the socket."""
        poll = self._lead_poller.poll
        sock = self._sock
        if time.monotonic() >= self._next_heartbeat:  # every leader, however short its lead
            self._housekeeping()
        if not self._waiters:
            message = wire.recv_message(sock, 0)  # the first wait, see controller._FIRST_WAIT_MS
            if message is not None:
                self._on_message(*message)
        while not pending.done and not self._waiters and not self._closed.is_set():
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                return
            if now >= self._next_heartbeat:
                self._housekeeping()
            wait_s = min(left, max(self._next_heartbeat - now, 0.0) + 0.001)
            for item, _ in poll(int(wait_s * 1000) + 1):
                if item is sock:
                    message = wire.recv_message(sock)
                    if message is not None:
                        self._on_message(*message)
                else:
                    drain_pipe(self._yield_r)

    # ----- I/O (caller holds _io_lock) ---------------------------------------------------------
    def _drain_socket(self) -> None:
        sock = self._sock
        # EVENTS rather than a recv that raises Again: no exception on the usual empty socket.
        while sock.getsockopt(wire.EVENTS) & wire.POLLIN:
            message = wire.recv_message(sock)
            if message is not None:
                self._on_message(*message)


    def _on_message(self, frames: list[bytes], first: zmq.Frame) -> None:
        if len(frames) != 3:
            self._bad_message("frames", f"{len(frames)} frames (expected 3: identity, header, body)")
            return
        try:
            name = frames[0].decode()
            expected = self._name_keys.get(name)
            # The name's own key, checked here; any other key goes to _speaks_for, which logs it.
            if expected is not None and first.get("User-Id") != expected and not self._speaks_for(name, first):
                return
            rid = wire.reply_id(frames[1])
            if rid is not None:  # the usual reply: no JSON parse
                header: dict[str, Any] = {"version": wire.VERSION, "kind": wire.REPLY, "id": rid}
                kind: Any = wire.REPLY
            else:
                header = wire.decode_header(frames[1])
                kind = header.get("kind")
                if type(kind) is not str:
                    raise ValueError(f"kind {short(kind)} is not a string")
                rid = header.get("id")
                if type(rid) is not int:
                    rid = None  # the controller's ids are integers: no request of ours
            with self._state_lock:
                state = self._agents.get(name)
                if state is None:
                    if not is_name(name):
                        raise ValueError(f"{short(name)} is not an agent name")
                    state = self._agents[name] = AgentState(name)
                    log.info("agent %s connected", name, extra={"event": "agent_connected", "agent": name,
                                                                "endpoint": self.endpoint})
                    self._state_changed.notify_all()
                elif state.lost:
                    log.info("agent %s back", name, extra={"event": "agent_back", "agent": name,
                                                           "endpoint": self.endpoint})
                    self._state_changed.notify_all()
                state.lost = False
                state.last_seen_mono = time.monotonic()
                if kind == wire.HELLO or kind == wire.HEARTBEAT:
                    role = header.get("role")
                    if type(role) is str:
                        state.role = role[:_TEXT_KEPT]
                    state.note_ue_state(header.get("ue_state"), self.endpoint)
                    if kind == wire.HELLO:  # the agent's own start line, as the controller sees it
                        try:
                            key = first.get("User-Id")  # the z85 client key (CURVE), none on a plain socket
                        except zmq.ZMQError:
                            key = None
                        state.note_hello(header)
                        key_fp = fingerprint(str(key).encode()) if key else "none (insecure)"
                        said = agent_line(name, state.role or "?", self.endpoint, key_fp)
                        log.info("%s", said, extra={"event": "agent_hello", "agent": name, "role": state.role,
                                                    "host": state.host, "peer": _peer(first), "fingerprint": key_fp,
                                                    "pid": pid if type(pid := header.get("pid")) is int else None})
                    version = header.get("agent_version")
                    if kind == wire.HELLO and type(version) is str:
                        state.version = version[:_TEXT_KEPT]
                pending = self._pending.get(rid) if kind == wire.REPLY or kind == wire.ERROR else None
                matched = pending is not None and pending.agent == name and not pending.done
                if matched:
                    pending.finish(header, frames[2])
                    if self._followers:
                        self._state_changed.notify_all()
                elif kind == wire.BYE:
                    # The agent stopped: it will answer nothing more, so fail its requests now.
                    state.lost = True
                    for p in self._pending.values():
                        if p.agent == name and p.sent and not p.done:
                            p.finish(None, b"", AgentLost(name, f"stopped (said bye) during op {p.op}"))
                    self._state_changed.notify_all()
        except (ValueError, AttributeError) as exc:
            self._bad_message("header", str(exc))
            return
        except Exception as exc:  # a bug of ours: whatever an agent sends must not stop a controller thread
            log.exception("failed to handle a message", extra={"event": "controller_bug", "endpoint": self.endpoint})
            self._bad_message("bug", f"{type(exc).__name__}: {exc}")
            return
        if kind == wire.REPLY or kind == wire.ERROR:
            if not matched:
                log.debug("late or unknown reply %s from %s", short(header.get("id")), name,
                          extra={"event": "late_reply", "agent": name})
        elif kind == wire.BYE:
            log.info("agent %s said bye", name, extra={"event": "agent_bye", "agent": name, "endpoint": self.endpoint})

    def _bad_message(self, what: str, message: str) -> None:
        self._throttle.warn(("bad_message", what), "dropped a malformed message from an agent: %s", message,
                            event="bad_message", endpoint=self.endpoint)


def _peer(frame: Any) -> str | None:
    """The address a message came from (a TCP peer's IP; None where the transport has none)."""
    try:
        address = frame.get("Peer-Address")
    except (zmq.ZMQError, AttributeError):
        return None
    return str(address) if address else None
