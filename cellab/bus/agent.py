"""Agent base class: a DEALER that connects to the controller and runs typed operations.

This module holds the agent's life and its threads; the other concerns live beside it: the connection
to the controller (link.py), checking messages and running operations (serving.py), the built-in
operations (builtin_ops.py).

Threads and the one socket: the DEALER (and its monitor) belong to whoever holds `_io_lock`. The
serve thread holds it while idle, receives a request, releases it while the operation runs and takes
it back to send the reply, so a short operation costs no thread hand-off. If an operation runs longer
than `_TAKEOVER_S`, the keeper thread takes the lock and keeps heartbeats, built-ins and concurrent
operations flowing until the serve thread asks for the socket back (flag + wake pipe). A lock gives
the full memory barrier libzmq asks for when a socket moves between threads; it is never used by
two threads at once. The telemetry PUB belongs to whoever holds `_pub_lock`.
"""

from __future__ import annotations

import collections
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar

import zmq

import cellab
from cellab.bus import wire
from cellab.bus.builtin_ops import BuiltinOps, RawReply, ReadArtifactParams
from cellab.bus.keys import agent_line, default_keys_dir, fingerprint, load_public_key, load_secret_key
from cellab.bus.link import Link
from cellab.bus.names import check_endpoint, check_name
from cellab.bus.operation import collect_operations
from cellab.bus.serving import Request, Serving
from cellab.bus.start_options import START_OPTIONS, check_start_options
from cellab.bus.throttle import Throttle
from cellab.bus.timing import UE_STATES
from cellab.errors import InputError

__all__ = ["Agent", "RawReply", "ReadArtifactParams", "check_endpoint", "check_name"]

log = logging.getLogger("cellab.bus.agent")

# How long an operation may hold the serve thread before the keeper takes over the socket.
_TAKEOVER_S = 0.05
# After a request, the serve thread waits this long for the next one in a blocking read of the socket
# alone (its RCVTIMEO), cheaper than zmq_poll on the socket and the wake pipe (issue 18); then it polls.
_FIRST_WAIT_MS = 1
# A handshake with the controller must end within this (or controller_lost_s if longer).
_HANDSHAKE_MIN_S = 2.0


class Agent(BuiltinOps, Serving):
    """Base class of every agent; rooms subclass it and mix in classes of `@operation` methods."""

    role: ClassVar[str] = "generic"
    version: ClassVar[str] = cellab.__version__

    def __init__(self, name: str, controller_endpoint: str, *, telemetry_endpoint: str | None = None,
                 secret_key_file: Path | None = None, controller_public_keys: list[Path] | None = None,
                 artifact_dir: Path | None = None, insecure: bool = False, heartbeat_s: float = wire.HEARTBEAT_S,
                 controller_lost_s: float = wire.PEER_LOST_S, clock: Callable[[], float] = time.time):
        self.name = check_name(name)
        self.start_options: dict[str, str] = {}  # said in each hello (set_start_options)
        source = f"agent {name}"
        self.controller_endpoint = check_endpoint(controller_endpoint, source, "controller_endpoint")
        self.telemetry_endpoint = (check_endpoint(telemetry_endpoint, source, "telemetry_endpoint")
                                   if telemetry_endpoint else None)
        if not heartbeat_s > 0 or not controller_lost_s > heartbeat_s:
            raise InputError(source, "controller_lost_s", "need 0 < heartbeat_s < controller_lost_s")
        self.heartbeat_s = heartbeat_s
        self.controller_lost_s = controller_lost_s
        self.insecure = insecure
        self._clock = clock
        self.artifact_dir = Path(artifact_dir) if artifact_dir else Path(tempfile.mkdtemp(prefix=f"cellab-{name}-"))
        self.artifact_dir.mkdir(parents=True, exist_ok=True)
        self._ops = collect_operations(self)

        self._keys: tuple[bytes, bytes] | None = None
        self._controller_keys: list[bytes] = []
        if not insecure:
            keys_dir = default_keys_dir()
            self._keys = load_secret_key(Path(secret_key_file) if secret_key_file else keys_dir / f"{name}.key_secret")
            paths = controller_public_keys if controller_public_keys is not None else [keys_dir / "controller.key"]
            if not paths:
                raise InputError(source, "controller_public_keys", "empty allowlist: no controller could be trusted")
            self._controller_keys = [load_public_key(Path(p)) for p in paths]

        self._ctx = zmq.Context()
        self._io_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._want_io = False
        self._busy_since: float | None = None
        self._serial_q: collections.deque[Request] = collections.deque()
        self._done_q: collections.deque[list[bytes]] = collections.deque()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._serve_thread: threading.Thread | None = None
        self._keeper: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._safe_lock = threading.Lock()
        self._throttle = Throttle(log)
        self._last_from_controller = time.monotonic()
        self._controller_lost = False
        self._next_heartbeat = 0.0
        self._ue_state: str | None = None  # what the agent says of its UE in each heartbeat (set_ue_state)
        handshake_s = max(_HANDSHAKE_MIN_S, controller_lost_s)
        self._link = Link(self._ctx, zmq.DEALER, self.controller_endpoint, agent=name, what="controller",
                          configure=self._configure_dealer, keys=self._keys, server_keys=self._controller_keys,
                          handshake_s=handshake_s)
        self._sock: zmq.Socket = self._link.sock
        self._poller = self._new_poller()

        self._pub_link: Link | None = None
        self._pub: zmq.Socket | None = None
        self._pub_lock = threading.Lock()
        self._warned_no_telemetry = False
        if self.telemetry_endpoint:
            self._pub_link = Link(self._ctx, zmq.PUB, self.telemetry_endpoint, agent=name, what="telemetry",
                                  configure=self._configure_pub, keys=self._keys, server_keys=self._controller_keys,
                                  handshake_s=handshake_s)
            self._pub = self._pub_link.sock

    # ----- sockets -----------------------------------------------------------------------------
    def _configure_dealer(self, sock: zmq.Socket) -> None:
        sock.routing_id = self.name.encode()
        sock.linger = 200
        sock.heartbeat_ivl = int(self.heartbeat_s * 1000)
        sock.heartbeat_timeout = int(self.controller_lost_s * 1000)
        sock.maxmsgsize = wire.MAX_FRAME_BYTES
        sock.rcvtimeo = _FIRST_WAIT_MS  # the one blocking read, in serve_forever; all others are NOBLOCK

    @staticmethod
    def _configure_pub(sock: zmq.Socket) -> None:
        sock.linger = 0
        sock.maxmsgsize = wire.MAX_SUBSCRIPTION_BYTES

    def _new_poller(self) -> zmq.Poller:
        # The monitor is not polled: its events (connect, handshake) are read whenever the loop is idle
        # and at every heartbeat, which keeps the request path to one socket and the wake pipe.
        poller = zmq.Poller()
        poller.register(self._sock, zmq.POLLIN)
        poller.register(self._wake_r, zmq.POLLIN)
        return poller

    # ----- public API --------------------------------------------------------------------------
    @property
    def key_fingerprint(self) -> str:
        """This agent's public key as the controller's log names it (`cellab keys` prints the same)."""
        return fingerprint(self._keys[0]) if self._keys else "none (insecure)"

    def start_line(self) -> str:
        """What the agent says when it starts; the controller logs the same line when it connects."""
        return agent_line(self.name, self.role, self.controller_endpoint, self.key_fingerprint)

    def set_start_options(self, options: dict[str, str | None]) -> None:
        """The host-only options this agent was started with (cellab.bus.start_options), said in each hello so a
        controller that loses it can print the whole command that starts it again; unset ones are left out."""
        given = {key: value for key, value in options.items() if value is not None}
        checked = check_start_options(given)
        if checked != given:
            raise InputError(f"agent {self.name}", "start_options", f"{sorted(set(given) - set(checked))} are not "
                             "options to say, or not printable", list(START_OPTIONS))
        self.start_options = checked

    def safe_state(self) -> None:
        """Put this agent's devices in a safe state. Override in rooms; must be idempotent."""

    def publish(self, topic: str, data: dict) -> None:
        """Send one telemetry sample (lossy, like any PUB/SUB: samples before the connection are dropped)."""
        if self._pub is None:
            if not self._warned_no_telemetry:
                self._warned_no_telemetry = True
                log.warning("telemetry dropped: no telemetry_endpoint", extra={"event": "telemetry_off", "agent": self.name})
            return
        header = wire.encode_header({"version": wire.VERSION, "kind": wire.TELEMETRY, "agent": self.name,
                                     "topic": topic, "t_s": self._clock()})
        body = wire.encode_body(data)
        if len(body) > wire.MAX_TELEMETRY_BYTES:
            self._throttle.warn("telemetry_too_big", "telemetry sample %s dropped: %d bytes, over the limit of %d",
                                topic, len(body), wire.MAX_TELEMETRY_BYTES, event="telemetry_too_big", agent=self.name)
            return
        with self._pub_lock:
            try:
                self._pub.send_multipart([header, body], flags=zmq.NOBLOCK)
            except zmq.Again:
                pass  # high-water mark: telemetry is best effort

    def set_ue_state(self, state: str | None, detail: str = "") -> None:
        """What this agent's UE is now (`in`, `out`, `paused`: a UE role's; None: nothing to say), sent in every
        heartbeat from now on and published once as `ue_state` telemetry when it changes. The agent's heartbeats
        go on whatever its UE does, so the controller tells "the host is alive and its UE is out" (minutes of
        outage) from "the agent is gone" (silent for PEER_LOST_S)."""
        if state is not None and state not in UE_STATES:
            raise ValueError(f"ue state {state!r} (allowed: {', '.join(UE_STATES)})")
        if state == self._ue_state:
            return
        self._ue_state = state
        self._next_heartbeat = 0.0  # the change goes out with the next turn, not a heartbeat later
        self._wake()
        if state is not None:
            self.publish("ue_state", {"state": state, "detail": detail[:200]})

    def start(self) -> None:
        """Serve in a background thread (tests, embedded labs)."""
        if self._thread is not None:
            raise RuntimeError(f"agent {self.name} already started")
        self._thread = threading.Thread(target=self.serve_forever, name=f"agent-{self.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Ask the serve loop to end; waits for it unless called from the serve thread (e.g. a signal handler)."""
        self._stop.set()
        self._wake()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=10)
        elif self._serve_thread is not None and self._serve_thread is not threading.current_thread():
            self._stopped.wait(timeout=10)

    def serve_forever(self) -> None:
        """Serve until stop(); puts the devices in their safe state on the way out."""
        self._serve_thread = threading.current_thread()
        self._keeper = threading.Thread(target=self._keep, name=f"agent-{self.name}-keeper", daemon=True)
        self._io_lock.acquire()
        try:
            self._keeper.start()
            log.info("agent started", extra={"event": "agent_start", "agent": self.name, "role": self.role,
                                             "endpoint": self.controller_endpoint,
                                             "fingerprint": self.key_fingerprint})
            self._send_hello()
            busy = False  # a message came in the last turn: the next one may follow at once
            while not self._stop.is_set():
                if self._serial_q:
                    self._run_serial(self._serial_q.popleft())
                elif busy:
                    message = wire.recv_message(self._sock, 0)  # see _FIRST_WAIT_MS
                    busy = message is not None
                    if busy:
                        self._on_message(message[0])
                    while self._done_q:  # concurrent ops' replies (their wake-up is read at the next poll)
                        self._send(self._done_q.popleft())
                    if time.monotonic() >= self._next_heartbeat:
                        self._housekeeping()
                else:
                    busy = self._poll_once(self._poll_timeout_ms())
        finally:
            try:
                self._on_monitor()  # log what the connection did, even for a short life
                self._send([wire.encode_header({"version": wire.VERSION, "kind": wire.BYE}), b""], quiet=True)
            finally:
                self._io_lock.release()
                self._keeper.join(timeout=5)
                if self._pool is not None:
                    self._pool.shutdown(wait=True, cancel_futures=True)
                self._call_safe_state("stop")
                self._link.close(linger_ms=200)  # the bye goes out if the controller is there
                if self._pub_link is not None:
                    with self._pub_lock:
                        self._pub_link.close()
                        self._pub = None
                self._ctx.term()
                os.close(self._wake_r)
                os.close(self._wake_w)
                self._stopped.set()
                log.info("agent stopped", extra={"event": "agent_stop", "agent": self.name})

    # ----- I/O (caller holds _io_lock) ---------------------------------------------------------
    def _poll_timeout_ms(self) -> int:
        return max(0, int((self._next_heartbeat - time.monotonic()) * 1000)) + 1

    def _poll_once(self, timeout_ms: int) -> bool:
        """Wait for one message (or a wake-up, or the next heartbeat) and handle it; True if a message came."""
        events = self._poller.poll(timeout_ms)
        handled = False
        for item, _ in events:
            if item is self._sock:
                message = wire.recv_message(self._sock)
                if message is None:
                    continue
                handled = True
                self._on_message(message[0])
            else:
                self._drain_wake()
                while self._done_q:
                    self._send(self._done_q.popleft())
        if not handled:
            self._on_monitor()
        if time.monotonic() >= self._next_heartbeat:
            self._housekeeping()
        return handled

    def _send(self, frames: list[bytes], *, quiet: bool = False) -> None:
        sock = self._sock
        try:
            sock.send(frames[0], wire.SNDMORE_NOBLOCK)
            sock.send(frames[1], wire.NOBLOCK)
        except zmq.Again:
            # Only after a long disconnection (1000 queued messages); heartbeats are dropped quietly.
            if not quiet:
                log.warning("reply dropped: send queue full", extra={"event": "send_full", "agent": self.name})

    def _send_hello(self) -> None:
        self._send([wire.encode_header({"version": wire.VERSION, "kind": wire.HELLO, "role": self.role,
                                        "agent_version": self.version, "pid": os.getpid(),
                                        "host": socket.gethostname()[:253], "start_options": self.start_options}),
                    b""], quiet=True)

    def _on_monitor(self) -> None:
        """The link's events: a hello after each handshake, and the new socket when it replaced one."""
        link = self._link
        hello = link.check()
        if link.sock is not self._sock:
            self._sock = link.sock
            self._poller = self._new_poller()
        if hello:
            self._send_hello()

    def _housekeeping(self) -> None:
        self._on_monitor()
        if self._pub_link is not None:
            with self._pub_lock:
                self._pub_link.check()
                self._pub = self._pub_link.sock
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self.heartbeat_s
            beat = {"version": wire.VERSION, "kind": wire.HEARTBEAT, "role": self.role}
            if self._ue_state is not None:
                beat["ue_state"] = self._ue_state
            self._send([wire.encode_header(beat), b""], quiet=True)
        if not self._controller_lost and now - self._last_from_controller > self.controller_lost_s:
            self._controller_lost = True
            log.warning("controller lost: silent for %.1f s, going to safe state", now - self._last_from_controller,
                        extra={"event": "controller_lost", "agent": self.name})
            self._call_safe_state("controller lost")

    # ----- the keeper thread -------------------------------------------------------------------
    def _take_io_back(self) -> None:
        if self._io_lock.acquire(blocking=False):
            return
        self._want_io = True
        self._wake()
        self._io_lock.acquire()
        self._want_io = False

    def _wake(self) -> None:
        try:
            os.write(self._wake_w, b"\0")
        except (BlockingIOError, OSError):
            pass  # pipe full (a wake is already pending) or closed at shutdown

    def _drain_wake(self) -> None:
        try:
            while os.read(self._wake_r, 4096):
                pass
        except BlockingIOError:
            pass

    def _keep(self) -> None:
        """Hold the socket while a serial operation runs long, so the agent stays responsive."""
        while not self._stop.wait(_TAKEOVER_S):
            since = self._busy_since
            if since is None or time.monotonic() - since < _TAKEOVER_S:
                continue
            if not self._io_lock.acquire(timeout=_TAKEOVER_S):
                continue
            try:
                since = self._busy_since
                if since is None or time.monotonic() - since < _TAKEOVER_S:
                    continue
                while not self._want_io and self._busy_since is not None and not self._stop.is_set():
                    self._poll_once(min(self._poll_timeout_ms(), 100))
            finally:
                self._io_lock.release()
