"""Agent base class: a DEALER that connects to the controller and runs typed operations.

Threads and the one socket: the DEALER (and its monitor) belong to whoever holds `_io_lock`. The
serve thread holds it while idle, receives a request, releases it while the operation runs and takes
it back to send the reply, so a short operation costs no thread hand-off. If an operation runs longer
than `_TAKEOVER_S`, the keeper thread takes the lock and keeps heartbeats, built-ins and concurrent
operations flowing until the serve thread asks for the socket back (flag + wake pipe). A lock gives
the full memory barrier libzmq asks for when a socket moves between threads; it is never used by
two threads at once.
"""

from __future__ import annotations

import collections
import logging
import os
import re
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import zmq
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from zmq.utils.monitor import recv_monitor_message

import cellab
from cellab.bus import wire
from cellab.bus.errors import OperationFailed
from cellab.bus.keys import default_keys_dir, fingerprint, load_public_key, load_secret_key
from cellab.bus.operation import BoundOperation, collect_operations, operation
from cellab.errors import InputError, from_validation_error

log = logging.getLogger("cellab.bus.agent")

_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_ENDPOINT_RE = re.compile(r"^(tcp|ipc|inproc)://.+$")
# How long an operation may hold the serve thread before the keeper takes over the socket.
_TAKEOVER_S = 0.05
# After a request, the serve thread waits this long for the next one in a blocking read of the socket
# alone (its RCVTIMEO), cheaper than zmq_poll on the socket and the wake pipe (issue 18); then it polls.
_FIRST_WAIT_MS = 1
# Repeated handshake failures are logged at most this often (the socket retries every 100 ms).
_REJECT_LOG_EVERY_S = 10.0
_MONITOR_EVENTS = (zmq.EVENT_CONNECTED | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED
                   | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL
                   | zmq.EVENT_HANDSHAKE_FAILED_AUTH)


def check_name(name: str, source: str = "agent") -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InputError(source, "name", f"{name!r} is not a valid agent name",
                         ["1-64 of letters, digits, '_', '.', '-', starting with a letter or digit"])
    return name


def check_endpoint(endpoint: str, source: str, field: str) -> str:
    if not isinstance(endpoint, str) or not _ENDPOINT_RE.match(endpoint):
        raise InputError(source, field, f"{endpoint!r} is not a ZeroMQ endpoint",
                         ["tcp://HOST:PORT", "ipc://PATH", "inproc://NAME"])
    return endpoint


class ReadArtifactParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=4096)
    offset_bytes: int = Field(0, ge=0)
    length_bytes: int = Field(wire.DEFAULT_CHUNK_BYTES, gt=0, le=wire.MAX_CHUNK_BYTES)

    @field_validator("name")
    @classmethod
    def _relative_inside(cls, value: str) -> str:
        # Cheap lexical checks; symlinks are checked against the resolved path in the operation.
        if "\0" in value or value.startswith("/") or ".." in Path(value).parts:
            raise ValueError("must be a relative path inside artifact_dir (no '/' prefix, no '..')")
        return value


@dataclass(frozen=True)
class RawReply:
    """An operation result sent as raw bytes, with a small JSON meta in the header."""

    meta: dict[str, Any]
    data: bytes


@dataclass(slots=True)
class _Request:
    op: BoundOperation
    header: dict[str, Any]
    body: bytes
    expires: float  # local monotonic time


class Agent:
    """Base class of every agent; rooms subclass it and mix in classes of `@operation` methods."""

    role: ClassVar[str] = "generic"
    version: ClassVar[str] = cellab.__version__

    def __init__(self, name: str, controller_endpoint: str, *, telemetry_endpoint: str | None = None,
                 secret_key_file: Path | None = None, controller_public_keys: list[Path] | None = None,
                 artifact_dir: Path | None = None, insecure: bool = False, heartbeat_s: float = 1.0,
                 controller_lost_s: float = 5.0, clock: Callable[[], float] = time.time):
        self.name = check_name(name)
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
        self._key_index = 0

        self._ctx = zmq.Context()
        self._io_lock = threading.Lock()
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)
        self._want_io = False
        self._busy_since: float | None = None
        self._serial_q: collections.deque[_Request] = collections.deque()
        self._done_q: collections.deque[list[bytes]] = collections.deque()
        self._stop = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._serve_thread: threading.Thread | None = None
        self._keeper: threading.Thread | None = None
        self._pool: ThreadPoolExecutor | None = None
        self._safe_lock = threading.Lock()
        self._last_from_controller = time.monotonic()
        self._controller_lost = False
        self._next_heartbeat = 0.0
        self._handshaken = False
        self._connected = False
        self._reject_logged_at = -1e9
        self._rejects = 0
        self._sock: zmq.Socket | None = None
        self._mon: zmq.Socket | None = None
        self._poller = zmq.Poller()
        self._open_dealer()

        self._pub: zmq.Socket | None = None
        self._pub_lock = threading.Lock()
        self._warned_no_telemetry = False
        if self.telemetry_endpoint:
            pub = self._ctx.socket(zmq.PUB)
            pub.linger = 0
            self._curve_client(pub, self._controller_keys[0] if self._controller_keys else None)
            pub.connect(self.telemetry_endpoint)
            self._pub = pub

    # ----- sockets -----------------------------------------------------------------------------
    def _curve_client(self, sock: zmq.Socket, server_key: bytes | None) -> None:
        if self.insecure or self._keys is None or server_key is None:
            return
        sock.curve_publickey, sock.curve_secretkey = self._keys
        sock.curve_serverkey = server_key

    def _open_dealer(self) -> None:
        sock = self._ctx.socket(zmq.DEALER)
        sock.routing_id = self.name.encode()
        sock.linger = 200
        sock.reconnect_ivl = 100
        sock.reconnect_ivl_max = 2000
        sock.heartbeat_ivl = int(self.heartbeat_s * 1000)
        sock.heartbeat_timeout = int(self.controller_lost_s * 1000)
        sock.rcvtimeo = _FIRST_WAIT_MS  # the one blocking read, in serve_forever; all others are NOBLOCK
        server_key = self._controller_keys[self._key_index] if self._controller_keys else None
        self._curve_client(sock, server_key)
        mon = sock.get_monitor_socket(_MONITOR_EVENTS)
        sock.connect(self.controller_endpoint)
        self._sock, self._mon = sock, mon
        # The monitor is not polled: its events (connect, handshake) are read whenever the loop is idle
        # and at every heartbeat, which keeps the request path to one socket and the wake pipe.
        self._poller = zmq.Poller()
        self._poller.register(sock, zmq.POLLIN)
        self._poller.register(self._wake_r, zmq.POLLIN)

    def _close_dealer(self) -> None:
        assert self._sock is not None and self._mon is not None
        self._sock.disable_monitor()
        self._mon.close(linger=0)
        self._sock.close()

    # ----- public API --------------------------------------------------------------------------
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
        with self._pub_lock:
            try:
                self._pub.send_multipart([header, body], flags=zmq.NOBLOCK)
            except zmq.Again:
                pass  # high-water mark: telemetry is best effort

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
                                             "endpoint": self.controller_endpoint})
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
                self._send([wire.encode_header({"version": wire.VERSION, "kind": wire.BYE}), b""])
            finally:
                self._io_lock.release()
                self._keeper.join(timeout=5)
                if self._pool is not None:
                    self._pool.shutdown(wait=True, cancel_futures=True)
                self._call_safe_state("stop")
                self._close_dealer()
                if self._pub is not None:
                    self._pub.close(linger=0)
                self._ctx.term()
                os.close(self._wake_r)
                os.close(self._wake_w)
                self._stopped.set()
                log.info("agent stopped", extra={"event": "agent_stop", "agent": self.name})

    # ----- built-in operations -----------------------------------------------------------------
    @operation(_inline=True)
    def ping(self) -> dict:
        return {"agent": self.name, "role": self.role}

    @operation(_inline=True)
    def clock(self) -> dict:
        return {"t_s": self._clock()}

    @operation(_inline=True)
    def describe(self) -> dict:
        return {"name": self.name, "role": self.role, "version": self.version,
                "operations": [{"name": op.name, "concurrent": op.spec.concurrent, "params_schema": op.schema()}
                               for op in sorted(self._ops.values(), key=lambda o: o.name)]}

    @operation(_inline=True)
    def list_artifacts(self) -> dict:
        root = self.artifact_dir.resolve()
        items = []
        for path in sorted(root.rglob("*")):
            if path.is_file() and not path.is_symlink():
                st = path.stat()
                items.append({"name": str(path.relative_to(root)), "size_bytes": st.st_size, "mtime_s": st.st_mtime})
        return {"artifacts": items}

    @operation(_inline=True)
    def read_artifact(self, params: ReadArtifactParams) -> RawReply:
        root = self.artifact_dir.resolve()
        path = (root / params.name).resolve()
        if not path.is_relative_to(root):
            raise OperationFailed("resolves outside artifact_dir", field="params.name")
        if not path.is_file():
            raise OperationFailed(f"no artifact {params.name!r}", field="params.name",
                                  allowed=[a["name"] for a in self.list_artifacts()["artifacts"]][:20])
        with path.open("rb") as src:
            size = os.fstat(src.fileno()).st_size
            src.seek(params.offset_bytes)
            data = src.read(params.length_bytes)
        return RawReply({"size_bytes": size, "offset_bytes": params.offset_bytes,
                         "eof": params.offset_bytes + len(data) >= size}, data)

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
        assert sock is not None
        try:
            sock.send(frames[0], wire.SNDMORE_NOBLOCK)
            sock.send(frames[1], wire.NOBLOCK)
        except zmq.Again:
            # Only after a long disconnection (1000 queued messages); heartbeats are dropped quietly.
            if not quiet:
                log.warning("reply dropped: send queue full", extra={"event": "send_full", "agent": self.name})

    def _send_hello(self) -> None:
        self._send([wire.encode_header({"version": wire.VERSION, "kind": wire.HELLO, "role": self.role,
                                        "agent_version": self.version, "pid": os.getpid()}), b""])

    def _housekeeping(self) -> None:
        self._on_monitor()
        now = time.monotonic()
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self.heartbeat_s
            self._send([wire.encode_header({"version": wire.VERSION, "kind": wire.HEARTBEAT, "role": self.role}), b""],
                       quiet=True)
        if not self._controller_lost and now - self._last_from_controller > self.controller_lost_s:
            self._controller_lost = True
            log.warning("controller lost: silent for %.1f s, going to safe state", now - self._last_from_controller,
                        extra={"event": "controller_lost", "agent": self.name})
            self._call_safe_state("controller lost")

    def _on_message(self, frames: list[bytes]) -> None:
        if len(frames) != 2:
            log.warning("dropped a message with %d frames", len(frames), extra={"event": "bad_message", "agent": self.name})
            return
        try:
            header = wire.decode_json(frames[0])
            if header.get("version") != wire.VERSION:
                raise ValueError(f"header version {header.get('version')!r} (expected {wire.VERSION})")
        except (ValueError, AttributeError) as exc:
            log.warning("dropped a message with a bad header: %s", exc, extra={"event": "bad_message", "agent": self.name})
            return
        now = time.monotonic()
        self._last_from_controller = now
        if self._controller_lost:
            self._controller_lost = False
            log.info("controller back", extra={"event": "controller_back", "agent": self.name})
        kind = header.get("kind")
        if kind != wire.REQUEST:
            return  # heartbeats only refresh liveness
        op = self._ops.get(header.get("op"))  # type: ignore[arg-type]
        if op is None:
            self._send(self._error(header, "unknown_op", f"unknown operation {header.get('op')!r}",
                                   field="op", allowed=sorted(self._ops)))
            return
        try:
            budget_s = float(header.get("deadline", 10.0))
        except (TypeError, ValueError):
            budget_s = 0.0
        request = _Request(op, header, frames[1], now + budget_s)
        if op.spec.inline:
            reply = self._execute(request)
            if reply is not None:
                self._send(reply)
        elif op.spec.concurrent:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix=f"agent-{self.name}-op")
            self._pool.submit(self._execute_to_done, request)
        elif self._busy_since is None and not self._serial_q:
            # Nothing running or waiting, so this is the serve thread (the keeper reads the socket only
            # while an op runs): run it now rather than through the queue and another loop turn.
            self._run_serial(request)
        else:
            self._serial_q.append(request)

    def _on_monitor(self) -> None:
        assert self._mon is not None
        while True:
            try:
                event = recv_monitor_message(self._mon, flags=zmq.NOBLOCK)
            except zmq.Again:
                return
            kind = event["event"]
            if kind == zmq.EVENT_CONNECTED:
                self._connected, self._handshaken = True, False
                if self.insecure:
                    self._send_hello()
            elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                self._handshaken = True
                self._rejects = 0
                log.info("connected to controller", extra={"event": "controller_connected", "agent": self.name,
                                                           "endpoint": self.controller_endpoint})
                self._send_hello()
            elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
                # The controller proved its key but its allowlist does not hold ours (ZAP status in value).
                self._log_limited("refused_by_controller", f"the controller refused this agent's key "
                                  f"{fingerprint(self._keys[0]) if self._keys else '-'} (ZAP status {event['value']})")
            elif kind in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
                self._on_rejected(f"CURVE handshake failed (event {kind:#x}, detail {event['value']})")
            elif kind == zmq.EVENT_DISCONNECTED:
                if self._connected and not self._handshaken and not self.insecure:
                    self._on_rejected("peer closed the connection during the CURVE handshake")
                self._connected = self._handshaken = False

    def _log_limited(self, event: str, message: str, **extra: object) -> None:
        self._rejects += 1
        now = time.monotonic()
        if now - self._reject_logged_at >= _REJECT_LOG_EVERY_S:
            self._reject_logged_at = now
            log.warning("%s (%d attempts)", message, self._rejects,
                        extra={"event": event, "agent": self.name, "endpoint": self.controller_endpoint,
                               "attempts": self._rejects, **extra})

    def _on_rejected(self, why: str) -> None:
        """The peer at controller_endpoint did not prove it holds an allowed controller key."""
        key = self._controller_keys[self._key_index] if self._controller_keys else b""
        self._log_limited("controller_rejected", f"controller rejected: {why}; it does not hold the allowed "
                          f"controller key {fingerprint(key)}", fingerprint=fingerprint(key))
        if len(self._controller_keys) > 1:
            # Another allowed controller key may be the one this controller holds: try it next.
            self._key_index = (self._key_index + 1) % len(self._controller_keys)
            self._close_dealer()
            self._open_dealer()

    # ----- executing operations ----------------------------------------------------------------
    def _run_serial(self, request: _Request) -> None:
        self._busy_since = time.monotonic()
        self._io_lock.release()
        try:
            reply = self._execute(request)
        finally:
            self._take_io_back()
            self._busy_since = None
        if reply is not None:
            self._send(reply)

    def _take_io_back(self) -> None:
        if self._io_lock.acquire(blocking=False):
            return
        self._want_io = True
        self._wake()
        self._io_lock.acquire()
        self._want_io = False

    def _execute_to_done(self, request: _Request) -> None:
        reply = self._execute(request)
        if reply is not None:
            self._done_q.append(reply)
            self._wake()

    def _execute(self, request: _Request) -> list[bytes] | None:
        op, header = request.op, request.header
        if time.monotonic() > request.expires:
            log.warning("dropped op %s: its deadline passed before it could run", op.name,
                        extra={"event": "deadline_dropped", "agent": self.name, "op": op.name, "id": header.get("id")})
            return None
        try:
            if op.params_model is not None:
                # The model's compiled validator itself: model_validate_json is a Python wrapper around it.
                params = op.params_model.__pydantic_validator__.validate_json(request.body or b"{}")
                result = op.method(params)
            else:
                result = op.method()
        except ValidationError as exc:
            first = from_validation_error(f"agent {self.name}: op {op.name}", exc, prefix="params").errors[0]
            return self._error(header, "validation", first.message, field=first.field, allowed=first.allowed)
        except OperationFailed as exc:
            if exc.fatal:
                self._call_safe_state(f"op {op.name} failed fatally")
            return self._error(header, "failed", str(exc), field=exc.field, allowed=exc.allowed)
        except Exception as exc:  # an operation bug: report it, and do not leave devices half-configured
            log.exception("op %s raised", op.name, extra={"event": "op_crashed", "agent": self.name, "op": op.name})
            self._call_safe_state(f"op {op.name} crashed")
            return self._error(header, "internal", f"{type(exc).__name__}: {exc}")
        rid = header.get("id")
        if type(result) is dict:  # the usual case, before pydantic's slower isinstance hook
            result_is_model = False
        elif isinstance(result, RawReply):
            return [wire.encode_header({"version": wire.VERSION, "kind": wire.REPLY, "id": rid, "raw": True,
                                        "meta": result.meta}), result.data]
        else:
            result_is_model = isinstance(result, BaseModel)
        try:
            if result_is_model:
                body = result.model_dump_json().encode()
            else:
                body = wire.encode_body(result if result is not None else {})
        except ValueError as exc:  # an operation bug, but the operation itself is done: no safe state
            log.error("op %s returned a result JSON cannot carry: %s", op.name, exc,
                      extra={"event": "op_bad_result", "agent": self.name, "op": op.name})
            return self._error(header, "internal", f"the result of {op.name} cannot be sent as JSON: {exc}")
        if type(rid) is int:  # the usual case: the header the controller reads without a JSON parse
            return [wire.reply_header(rid), body]
        return [wire.encode_header({"version": wire.VERSION, "kind": wire.REPLY, "id": rid}), body]

    def _error(self, header: dict[str, Any], kind: str, message: str, *, field: str | None = None,
               allowed: list[object] | None = None) -> list[bytes]:
        error = {"kind": kind, "message": message, "field": field, "allowed": allowed}
        return [wire.encode_header({"version": wire.VERSION, "kind": wire.ERROR, "id": header.get("id")}),
                wire.encode_body(error)]

    def _call_safe_state(self, reason: str) -> None:
        with self._safe_lock:
            log.info("safe state (%s)", reason, extra={"event": "safe_state", "agent": self.name, "reason": reason})
            try:
                self.safe_state()
            except Exception:
                log.exception("safe_state failed", extra={"event": "safe_state_failed", "agent": self.name})

    # ----- keeper thread -----------------------------------------------------------------------
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
