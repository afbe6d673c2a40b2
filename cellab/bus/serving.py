"""What an agent does with a message from the controller: check it, then run the operation it asks for
(inline, serial or concurrent) and build the reply.

Every malformed message gets a typed error reply, `kind: bad_request` with the header field at fault
(`frames`, `header`, `version`, `kind`, `id`, `op`, `deadline`), and the agent keeps serving (issue 27).
A malformed message from the controller is a bug of the controller's, never an attack: the link is
CURVE-authenticated. The checks on the usual request are a few type checks.
"""

from __future__ import annotations

import collections
import logging
import math
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from cellab.bus import wire
from cellab.bus.builtin_ops import RawReply
from cellab.bus.errors import InvalidParams, OperationFailed
from cellab.bus.names import short
from cellab.bus.operation import BoundOperation
from cellab.bus.throttle import Throttle
from cellab.errors import from_validation_error

log = logging.getLogger("cellab.bus.agent")

# A request without a deadline gets this many seconds.
DEFAULT_DEADLINE_S = 10.0
# Longest string id a reply echoes (the controller's ids are integers).
MAX_ID_CHARS = 64
_KINDS_FROM_CONTROLLER = [wire.REQUEST, wire.HEARTBEAT]
_INF = math.inf


@dataclass(slots=True)
class Request:
    op: BoundOperation
    header: dict[str, Any]
    body: bytes
    expires: float  # local monotonic time


def _echo_id(header: object) -> int | str | None:
    """The id a reply to `header` echoes: an int or a short string, else None."""
    rid = header.get("id") if type(header) is dict else None
    if type(rid) is int or (type(rid) is str and len(rid) <= MAX_ID_CHARS):
        return rid
    return None


class Serving:
    """Mixed into Agent: uses its name, operations, socket lock and queues."""

    name: str
    _ops: dict[str, BoundOperation]
    _io_lock: threading.Lock
    _busy_since: float | None
    _serial_q: collections.deque[Request]
    _done_q: collections.deque[list[bytes]]
    _pool: ThreadPoolExecutor | None
    _last_from_controller: float
    _controller_lost: bool
    _throttle: Throttle
    _safe_lock: threading.Lock
    _send: Callable[..., None]
    _wake: Callable[[], None]
    _take_io_back: Callable[[], None]
    safe_state: Callable[[], None]

    # ----- checking (caller holds _io_lock) ------------------------------------------------------
    def _on_message(self, frames: list[bytes]) -> None:
        now = time.monotonic()
        # Anything that came over the authenticated link shows the controller is there.
        self._last_from_controller = now
        if self._controller_lost:
            self._controller_lost = False
            log.info("controller back", extra={"event": "controller_back", "agent": self.name})
        try:
            if len(frames) != 2:
                self._bad(self._parse_for_id(frames[0]), "frames",
                          f"{len(frames)} frames (expected 2: header and body)")
                return
            try:
                header = wire.decode_json(frames[0])
            except ValueError as exc:
                self._bad(None, "header", f"not JSON: {exc}")
                return
            if type(header) is not dict:
                self._bad(None, "header", f"not a JSON object: {short(header)}")
                return
            version = header.get("version")
            if version != wire.VERSION or type(version) is not int:
                self._bad(header, "version", f"{short(version)} is not a version this agent speaks", [wire.VERSION])
                return
            kind = header.get("kind")
            if kind != wire.REQUEST:
                if kind != wire.HEARTBEAT:  # heartbeats only refresh liveness
                    self._bad(header, "kind", f"{short(kind)} is not a kind a controller sends",
                              _KINDS_FROM_CONTROLLER)
                return
            rid = header.get("id")
            if type(rid) is not int and not (type(rid) is str and len(rid) <= MAX_ID_CHARS):
                self._bad(None, "id", f"{short(rid)} is not a request id (an integer, or a string of at most "
                          f"{MAX_ID_CHARS} characters)")
                return
            name = header.get("op")
            op = self._ops.get(name) if type(name) is str else None
            if op is None:
                if type(name) is str:
                    self._send(self._error(header, "unknown_op", f"unknown operation {short(name)}",
                                           field="op", allowed=sorted(self._ops)))
                else:
                    self._bad(header, "op", f"{short(name)} is not an operation name (a string)", sorted(self._ops))
                return
            budget_s = header.get("deadline", DEFAULT_DEADLINE_S)
            if (type(budget_s) is not float and type(budget_s) is not int) or not 0 < budget_s < _INF:
                self._bad(header, "deadline", f"{short(budget_s)} is not a deadline (seconds left, a finite "
                          "number > 0)")
                return
            request = Request(op, header, frames[1], now + budget_s)
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
        except Exception as exc:  # a bug of ours: report it, keep serving
            log.exception("failed to handle a message", extra={"event": "serve_failed", "agent": self.name})
            self._send(self._error({}, "internal", f"the agent failed to handle the message: {type(exc).__name__}"))

    @staticmethod
    def _parse_for_id(frame: bytes) -> dict | None:
        if len(frame) > 4096:
            return None
        try:
            header = wire.decode_json(frame)
        except ValueError:
            return None
        return header if type(header) is dict else None

    def _bad(self, header: dict | None, field: str, message: str, allowed: list[object] | None = None) -> None:
        """Reply to a malformed message with a typed error (`bad_request`), and log it (rate-limited)."""
        self._throttle.warn(("bad_request", field), "bad request from the controller: %s: %s", field, message,
                            event="bad_request", agent=self.name, field=field)
        self._send(self._error(header or {}, "bad_request", message, field=field, allowed=allowed))

    # ----- executing operations ------------------------------------------------------------------
    def _run_serial(self, request: Request) -> None:
        self._busy_since = time.monotonic()
        self._io_lock.release()
        try:
            reply = self._execute(request)
        finally:
            self._take_io_back()
            self._busy_since = None
        if reply is not None:
            self._send(reply)

    def _execute_to_done(self, request: Request) -> None:
        reply = self._execute(request)
        if reply is not None:
            self._done_q.append(reply)
            self._wake()

    def _execute(self, request: Request) -> list[bytes] | None:
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
            kind = "validation" if isinstance(exc, InvalidParams) else "failed"
            return self._error(header, kind, str(exc), field=exc.field, allowed=exc.allowed)
        except Exception as exc:  # an operation bug: report it, and do not leave devices half-configured
            log.exception("op %s raised", op.name, extra={"event": "op_crashed", "agent": self.name, "op": op.name})
            self._call_safe_state(f"op {op.name} crashed")
            return self._error(header, "internal", f"{type(exc).__name__}: {exc}")
        rid = header.get("id")
        if type(result) is dict:  # the usual case, before pydantic's slower isinstance hook
            result_is_model = False
        elif isinstance(result, RawReply):
            if len(result.data) > wire.MAX_FRAME_BYTES:
                return self._too_big(header, op.name, len(result.data))
            try:
                raw_header = wire.encode_header({"version": wire.VERSION, "kind": wire.REPLY, "id": rid, "raw": True,
                                                 "meta": result.meta})
            except ValueError as exc:
                return self._error(header, "internal", f"the meta of {op.name} cannot be sent as JSON: {exc}")
            return [raw_header, result.data]
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
        if len(body) > wire.MAX_FRAME_BYTES:
            return self._too_big(header, op.name, len(body))
        if type(rid) is int:  # the usual case: the header the controller reads without a JSON parse
            return [wire.reply_header(rid), body]
        return [wire.encode_header({"version": wire.VERSION, "kind": wire.REPLY, "id": rid}), body]

    def _too_big(self, header: dict[str, Any], op: str, size: int) -> list[bytes]:
        log.error("op %s returned %d bytes, over the bus's limit of %d", op, size, wire.MAX_FRAME_BYTES,
                  extra={"event": "op_bad_result", "agent": self.name, "op": op})
        return self._error(header, "internal", f"the result of {op} is {size} bytes, over the bus's limit of "
                           f"{wire.MAX_FRAME_BYTES}")

    def _error(self, header: dict[str, Any], kind: str, message: str, *, field: str | None = None,
               allowed: list[object] | None = None) -> list[bytes]:
        error = {"kind": kind, "message": message, "field": field, "allowed": allowed}
        try:
            body = wire.encode_body(error)
        except ValueError:  # an `allowed` value JSON cannot carry
            body = wire.encode_body({**error, "allowed": [str(a) for a in allowed or []]})
        return [wire.encode_header({"version": wire.VERSION, "kind": wire.ERROR, "id": _echo_id(header)}), body]

    def _call_safe_state(self, reason: str) -> None:
        with self._safe_lock:
            log.info("safe state (%s)", reason, extra={"event": "safe_state", "agent": self.name, "reason": reason})
            try:
                self.safe_state()
            except Exception:
                log.exception("safe_state failed", extra={"event": "safe_state_failed", "agent": self.name})
