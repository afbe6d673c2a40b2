"""Controller: one ROUTER (CURVE server with an allowlist of agent keys) that sends typed requests.

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
import re
import select
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

import zmq
import zmq.auth.thread
from pydantic import BaseModel

from cellab.bus import wire
from cellab.bus.agent import check_endpoint, check_name
from cellab.bus.errors import AgentLost, AgentTimeout, BusError, OperationError
from cellab.bus.keys import PUBLIC_SUFFIX, default_keys_dir, fingerprint, load_public_key, load_secret_key
from cellab.errors import InputError

log = logging.getLogger("cellab.bus.controller")

_REJECT_LOG_EVERY_S = 10.0
_OP_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
# Upper bound on the background thread's wait, in case a descriptor edge was consumed elsewhere.
_BG_MAX_WAIT_S = 0.25
# After a caller led the socket this recently, the background thread only checks in every _BUSY_S.
_BUSY_S = 0.05
# How often a request for an agent without a route checks whether the agent has (re)connected.
_CONTACT_POLL_S = 0.02
# A leader first waits this long for its reply in a blocking read of the socket alone (its RCVTIMEO):
# 10 us of CPU and latency cheaper per round trip than zmq_poll on the socket and the yield pipe
# (issue 18). A caller that wants the socket meanwhile waits at most this long for it.
_FIRST_WAIT_MS = 1


class AgentStatus(BaseModel):
    name: str
    role: str
    version: str
    last_seen: float  # wall-clock time (s since the epoch) of the last message from the agent
    lost: bool


class ClockOffset(BaseModel):
    """agent clock - controller clock, from the sample with the smallest round trip (NTP's rule)."""

    agent: str
    offset_s: float
    rtt_s: float
    samples: int
    measured_at_s: float  # controller wall-clock time of the chosen sample


@dataclass
class _AgentState:
    name: str
    role: str = "unknown"
    version: str = ""
    last_seen_mono: float = 0.0
    lost: bool = False


@dataclass(slots=True)
class _Pending:
    agent: str
    op: str
    done: bool = False
    header: dict[str, Any] | None = None
    body: bytes = b""
    failure: BaseException | None = None

    def finish(self, header: dict[str, Any] | None, body: bytes, failure: BaseException | None = None) -> None:
        """Call with _state_lock held, then notify _state_changed."""
        self.header, self.body, self.failure = header, body, failure
        self.done = True


class _Allowlist:
    """ZAP callback: only allowed agent keys pass; rejections are logged by fingerprint, rate-limited."""

    def __init__(self, keys: set[bytes]):
        self.keys = keys
        self._last_log: dict[bytes, float] = {}
        self._counts: dict[bytes, int] = {}

    def callback(self, domain: str, key: bytes) -> bool:
        if key in self.keys:
            return True
        self._counts[key] = self._counts.get(key, 0) + 1
        now = time.monotonic()
        if now - self._last_log.get(key, -1e9) >= _REJECT_LOG_EVERY_S:
            self._last_log[key] = now
            fp = fingerprint(key)
            log.warning("rejected a connection with an unknown CURVE key %s (%d attempts)", fp, self._counts[key],
                        extra={"event": "curve_rejected", "fingerprint": fp, "attempts": self._counts[key]})
        return False


class Controller:
    def __init__(self, bind_endpoint: str, *, telemetry_endpoint: str | None = None,
                 secret_key_file: Path | None = None, allowed_agent_keys: list[Path] | None = None,
                 insecure: bool = False, heartbeat_s: float = 1.0, agent_lost_s: float = 5.0):
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
        allow: set[bytes] = set()
        self._name_keys: dict[str, str] = {}
        self._impostor_logged: dict[tuple[str, str], float] = {}
        if not insecure:
            keys_dir = default_keys_dir()
            keys = load_secret_key(Path(secret_key_file) if secret_key_file else keys_dir / "controller.key_secret")
            paths = (allowed_agent_keys if allowed_agent_keys is not None
                     else sorted(p for p in keys_dir.glob("*.key") if p.name != "controller.key"))
            if not paths:
                raise InputError(source, "allowed_agent_keys", "empty allowlist: no agent could connect")
            allow = set()
            for path in map(Path, paths):
                key = load_public_key(path)
                allow.add(key)
                if path.name.endswith(PUBLIC_SUFFIX):
                    # NAME.key: only this key may speak as agent NAME (see _on_message).
                    self._name_keys[path.name.removesuffix(PUBLIC_SUFFIX)] = key.decode()

        self._ctx = zmq.Context()
        self._auth: zmq.auth.thread.ThreadAuthenticator | None = None
        if not insecure:
            self._allowlist = _Allowlist(allow)
            self._auth = zmq.auth.thread.ThreadAuthenticator(self._ctx, log=logging.getLogger("cellab.bus.zap"))
            self._auth.start()
            self._auth.configure_curve_callback("*", credentials_provider=self._allowlist)

        self._sock = self._ctx.socket(zmq.ROUTER)
        self._sock.router_mandatory = 1
        self._sock.router_handover = 1  # a restarted agent with the same name takes over its route
        self._sock.linger = 0
        self._sock.heartbeat_ivl = int(heartbeat_s * 1000)
        self._sock.heartbeat_timeout = int(agent_lost_s * 1000)
        self._sock.rcvtimeo = _FIRST_WAIT_MS  # the one blocking read, in _lead; all others are NOBLOCK
        self._curve_server(self._sock, keys)
        self._sock.bind(bind_endpoint)
        self.endpoint: str = self._sock.last_endpoint.decode()

        self._sub: zmq.Socket | None = None
        self.telemetry_endpoint: str | None = None
        if telemetry_endpoint:
            self._sub = self._ctx.socket(zmq.SUB)
            self._sub.linger = 0
            self._curve_server(self._sub, keys)
            self._sub.subscribe(b"")
            self._sub.bind(telemetry_endpoint)
            self.telemetry_endpoint = self._sub.last_endpoint.decode()

        self._io_lock = threading.Lock()
        self._state_lock = threading.Lock()
        # Notified when an agent appears or comes back, a reply lands, or a leader lets go of the socket.
        self._state_changed = threading.Condition(self._state_lock)
        self._agents: dict[str, _AgentState] = {}
        self._pending: dict[int, _Pending] = {}
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

    @staticmethod
    def _curve_server(sock: zmq.Socket, keys: tuple[bytes, bytes] | None) -> None:
        if keys is None:
            return
        sock.curve_server = True
        sock.curve_publickey, sock.curve_secretkey = keys

    # ----- public API --------------------------------------------------------------------------
    def request(self, agent: str, op: str, params: dict | BaseModel | None = None, timeout_s: float = 10.0) -> dict:
        """Run `op` on `agent` and return its result; raises AgentTimeout, AgentLost or OperationError."""
        header, body = self._call(agent, op, params, timeout_s)
        if header.get("raw"):
            return {**header.get("meta", {}), "data": body}
        return wire.decode_json(body) if body else {}

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
                self._state_changed.wait(min(left, _BG_MAX_WAIT_S))

    def measure_clock_offset(self, agent: str, samples: int = 8, timeout_s: float = 5.0) -> ClockOffset:
        if samples < 1:
            raise InputError("measure_clock_offset", "samples", f"{samples} is not a count", [">= 1"])
        best: tuple[float, float, float] | None = None  # (rtt, offset, wall time)
        for _ in range(samples):
            sent_wall = time.time()
            sent = time.perf_counter()
            reply = self.request(agent, "clock", timeout_s=timeout_s)
            rtt_s = time.perf_counter() - sent
            # The agent read its clock at some point in the round trip; the midpoint is the best guess.
            offset_s = float(reply["t_s"]) - (sent_wall + rtt_s / 2)
            if best is None or rtt_s < best[0]:
                best = (rtt_s, offset_s, sent_wall)
        assert best is not None
        return ClockOffset(agent=agent, offset_s=best[1], rtt_s=best[0], samples=samples, measured_at_s=best[2])

    def measure_clock_offsets(self, agents: list[str], samples: int = 8) -> dict[str, ClockOffset]:
        """Offsets of several agents, for a run's manifest: {name: ClockOffset.model_dump()} is JSON-able."""
        return {name: self.measure_clock_offset(name, samples) for name in agents}

    def fetch_artifact(self, agent: str, name: str, dest: Path, *, chunk_bytes: int = wire.DEFAULT_CHUNK_BYTES,
                       timeout_s: float = 30.0) -> Path:
        """Copy an artifact of `agent` to `dest` (a file, or a directory to put it in) atomically."""
        dest = Path(dest)
        if dest.is_dir():
            dest = dest / Path(name).name
        tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}-{threading.get_ident()}")
        offset = 0
        try:
            with tmp.open("wb") as out:
                while True:
                    header, data = self._call(agent, "read_artifact",
                                              {"name": name, "offset_bytes": offset, "length_bytes": chunk_bytes},
                                              timeout_s)
                    out.write(data)
                    offset += len(data)
                    if header.get("meta", {}).get("eof") or not data:
                        break
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return dest

    def agents(self) -> dict[str, AgentStatus]:
        wall_minus_mono = time.time() - time.monotonic()
        with self._state_lock:
            return {a.name: AgentStatus(name=a.name, role=a.role, version=a.version,
                                        last_seen=a.last_seen_mono + wall_minus_mono, lost=a.lost)
                    for a in self._agents.values()}

    def subscribe(self, callback: Callable[[str, str, dict], None]) -> None:
        """Call `callback(agent, topic, data)` for every telemetry sample (on the telemetry thread)."""
        if self._sub is None:
            raise InputError("controller", "telemetry_endpoint", "telemetry is off: no telemetry_endpoint given")
        self._subscribers.append(callback)

    def close(self) -> None:
        if self._closed.is_set():
            return
        self._closed.set()
        self._poke(self._bg_w)
        self._poke(self._yield_w)
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

    # ----- request path ------------------------------------------------------------------------
    def _call(self, agent: str, op: str, params: dict | BaseModel | None, timeout_s: float) -> tuple[dict, bytes]:
        if self._closed.is_set():
            raise BusError("controller closed")
        if (agent, op) not in self._checked:
            check_name(agent, "controller.request")
            if not isinstance(op, str) or not _OP_RE.match(op):
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
        rid = next(self._ids)
        deadline = time.monotonic() + timeout_s
        # Built by hand on the hot path: op is checked against _OP_RE, rid is an int, timeout_s a number.
        header = (f'{{"version":{wire.VERSION},"kind":"request","id":{rid},"op":"{op}",'
                  f'"deadline":{float(timeout_s)!r}}}').encode()
        pending = _Pending(agent, op)
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
                self._acquire_io()
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
            try:
                err = wire.decode_json(pending.body)
            except ValueError:
                err = None
            if not isinstance(err, dict):
                err = {"message": "unreadable error reply"}
            raise OperationError(agent, op, str(err.get("message")), kind=str(err.get("kind", "failed")),
                                 field=err.get("field"), allowed=err.get("allowed"))
        return pending.header, pending.body

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

    def _acquire_io(self) -> None:
        """Take the socket as the leader (asking the current leader to yield if there is one)."""
        if not self._io_lock.acquire(blocking=False):
            with self._state_lock:
                self._waiters += 1
            self._poke(self._yield_w)
            try:
                self._io_lock.acquire()
            finally:
                with self._state_lock:
                    self._waiters -= 1
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

    def _lead(self, pending: _Pending, deadline: float) -> None:
        """Read the socket until our reply comes, the deadline passes, or another caller wants the socket."""
        poll = self._lead_poller.poll
        sock = self._sock
        if not self._waiters:
            message = wire.recv_message(sock, 0)  # the first wait, see _FIRST_WAIT_MS
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
                    self._drain_pipe(self._yield_r)

    # ----- I/O (caller holds _io_lock) ---------------------------------------------------------
    def _drain_socket(self) -> None:
        sock = self._sock
        # EVENTS rather than a recv that raises Again: no exception on the usual empty socket.
        while sock.getsockopt(wire.EVENTS) & wire.POLLIN:
            message = wire.recv_message(sock)
            if message is not None:
                self._on_message(*message)

    def _speaks_for(self, name: str, frame: zmq.Frame) -> bool:
        """False when `name` has its own key file (NAME.key) and the message came with another key.

        `frame` is any frame of the message: all carry its metadata."""
        expected = self._name_keys.get(name)
        if expected is None:
            return True
        presented = frame.get("User-Id")  # the z85 client key, set by the ZAP handler
        if presented == expected:
            return True
        now = time.monotonic()
        if now - self._impostor_logged.get((name, presented), -1e9) >= _REJECT_LOG_EVERY_S:
            self._impostor_logged[(name, presented)] = now
            log.warning("dropped a message from a key %s speaking as agent %s (whose key is %s)",
                        fingerprint(presented.encode()), name, fingerprint(expected.encode()),
                        extra={"event": "agent_impersonation", "agent": name,
                               "fingerprint": fingerprint(presented.encode())})
        return False

    def _on_message(self, frames: list[bytes], first: zmq.Frame) -> None:
        if len(frames) != 3:
            log.warning("dropped a message with %d frames", len(frames), extra={"event": "bad_message"})
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
            else:
                header = wire.decode_header(frames[1])
        except (ValueError, AttributeError) as exc:
            log.warning("dropped a message with a bad header: %s", exc, extra={"event": "bad_message"})
            return
        kind = header.get("kind")
        with self._state_lock:
            state = self._agents.get(name)
            if state is None:
                state = self._agents[name] = _AgentState(name)
                log.info("agent %s connected", name, extra={"event": "agent_connected", "agent": name})
                self._state_changed.notify_all()
            elif state.lost:
                log.info("agent %s back", name, extra={"event": "agent_back", "agent": name})
                self._state_changed.notify_all()
            state.lost = False
            state.last_seen_mono = time.monotonic()
            if kind in (wire.HELLO, wire.HEARTBEAT):
                state.role = str(header.get("role", state.role))
                if kind == wire.HELLO:
                    state.version = str(header.get("agent_version", ""))
            pending = self._pending.get(header.get("id")) if kind in (wire.REPLY, wire.ERROR) else None
            matched = pending is not None and pending.agent == name and not pending.done
            if matched:
                pending.finish(header, frames[2])
                if self._followers:
                    self._state_changed.notify_all()
            elif kind == wire.BYE:
                # The agent stopped: it will answer nothing more, so fail its requests now.
                state.lost = True
                for p in self._pending.values():
                    if p.agent == name and not p.done:
                        p.finish(None, b"", AgentLost(name, f"stopped (said bye) during op {p.op}"))
                self._state_changed.notify_all()
        if kind in (wire.REPLY, wire.ERROR):
            if not matched:
                log.debug("late or unknown reply %s from %s", header.get("id"), name,
                          extra={"event": "late_reply", "agent": name})
        elif kind == wire.BYE:
            log.info("agent %s said bye", name, extra={"event": "agent_bye", "agent": name})

    def _housekeeping(self) -> None:
        now = time.monotonic()
        if now < self._next_heartbeat:
            return
        self._next_heartbeat = now + self.heartbeat_s
        beat = wire.encode_header({"version": wire.VERSION, "kind": wire.HEARTBEAT})
        failed: list[_Pending] = []
        with self._state_lock:
            agents = list(self._agents.values())
            for state in agents:
                if not state.lost and now - state.last_seen_mono > self.agent_lost_s:
                    state.lost = True
                    log.warning("agent %s lost: silent for %.1f s", state.name, now - state.last_seen_mono,
                                extra={"event": "agent_lost", "agent": state.name})
                    failed += [p for p in self._pending.values() if p.agent == state.name and not p.done]
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

    # ----- threads -----------------------------------------------------------------------------
    def _background(self) -> None:
        """Read the socket and send heartbeats when no caller is leading.

        While callers are busy (led in the last _BUSY_S) they read the socket themselves, so this
        thread only checks in now and then instead of waking on every reply and contending for the lock.
        """
        while not self._closed.is_set():
            now = time.monotonic()
            if self._leading or now - self._last_lead_end < _BUSY_S:
                if self._closed.wait(_BUSY_S):
                    return
                if self._io_lock.acquire(blocking=False):
                    try:
                        self._drain_socket()
                        self._housekeeping()
                    finally:
                        self._io_lock.release()
                continue
            wait_s = min(_BG_MAX_WAIT_S, max(0.0, self._next_heartbeat - now))
            try:
                ready, _, _ = select.select([self._sock_fd, self._bg_r], [], [], wait_s)
            except OSError:
                return
            if self._bg_r in ready:
                self._drain_pipe(self._bg_r)
            if self._closed.is_set():
                return
            with self._io_lock:
                if self._closed.is_set():
                    return
                self._drain_socket()
                self._housekeeping()

    def _telemetry_loop(self) -> None:
        assert self._sub is not None
        poller = zmq.Poller()
        poller.register(self._sub, zmq.POLLIN)
        while not self._closed.is_set():
            if not poller.poll(int(_BG_MAX_WAIT_S * 1000)):
                continue
            while True:
                try:
                    msg = self._sub.recv_multipart(flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                self._on_telemetry(msg)

    def _on_telemetry(self, msg: list[zmq.Frame]) -> None:
        try:
            header = wire.decode_header(msg[0].bytes)
            agent, topic = str(header["agent"]), str(header["topic"])
            data = wire.decode_json(msg[1].bytes) if len(msg) > 1 else {}
        except (ValueError, KeyError, IndexError) as exc:
            log.warning("dropped a bad telemetry message: %s", exc, extra={"event": "bad_telemetry"})
            return
        if self._name_keys and not self._speaks_for(agent, msg[0]):
            return
        if isinstance(data, dict):
            data.setdefault("agent_time_s", header.get("t_s"))  # the agent's clock; see measure_clock_offset
        for callback in list(self._subscribers):
            try:
                callback(agent, topic, data)
            except Exception:
                log.exception("telemetry subscriber failed", extra={"event": "subscriber_failed", "agent": agent})

    @staticmethod
    def _poke(fd: int) -> None:
        try:
            os.write(fd, b"\0")
        except (BlockingIOError, OSError):
            pass

    @staticmethod
    def _drain_pipe(fd: int) -> None:
        try:
            while os.read(fd, 4096):
                pass
        except (BlockingIOError, OSError):
            pass
