"""An agent's connection to the controller: a connecting socket (the DEALER, or the telemetry PUB), its
monitor, and replacing the socket when ZeroMQ has given up on it.

A connecting ZeroMQ socket reconnects by itself after a lost connection or a handshake timeout, but it
gives up for good after a protocol error: a peer that does not speak ZMTP, one that speaks it without
CURVE (mechanism mismatch), a ZAP refusal, a malformed or oversized frame after the handshake. It then
reports EVENT_DISCONNECTED with no EVENT_CONNECT_RETRIED after it and never connects again, so a plain
peer that once sat at the controller's endpoint would cut the agent off from the real controller for good
(issue 27). The link watches the monitor and replaces the socket (closed with linger 0, a new one
connected) after a backoff (0.1 s doubling to 2 s, reset by a handshake) when:
- a handshake failed (every failure: a key refused now may be allowed later, and another allowed
  controller key may be the right one, tried in turn);
- the connection dropped and ZeroMQ does not retry it;
- the socket has shown no sign of connecting for `stall_s` (a safety net for any other way to stall).
The monitor is read by whoever holds the socket, when idle and at every heartbeat: nothing on the
request path. Handshakes are bounded by ZMQ_HANDSHAKE_IVL, so a peer that accepts and says nothing is
left in time and retried.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

import zmq
from zmq.utils.monitor import recv_monitor_message

from cellab.bus.keys import fingerprint
from cellab.bus.throttle import Throttle

log = logging.getLogger("cellab.bus.agent")

MONITOR_EVENTS = (zmq.EVENT_CONNECTED | zmq.EVENT_CONNECT_DELAYED | zmq.EVENT_CONNECT_RETRIED
                  | zmq.EVENT_DISCONNECTED | zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL
                  | zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL | zmq.EVENT_HANDSHAKE_FAILED_AUTH)
BACKOFF_FIRST_S = 0.1
BACKOFF_MAX_S = 2.0
RECONNECT_IVL_MS = 100
RECONNECT_IVL_MAX_MS = 2000


class Link:
    """One connecting socket and its monitor; `sock` changes when the link replaces the socket.

    Only the thread that holds the socket's lock may call check() (it touches the socket and the monitor).
    """

    def __init__(self, ctx: zmq.Context, socket_type: int, endpoint: str, *, agent: str, what: str,
                 configure: Callable[[zmq.Socket], None], keys: tuple[bytes, bytes] | None,
                 server_keys: list[bytes], handshake_s: float):
        self._ctx = ctx
        self._type = socket_type
        self.endpoint = endpoint
        self._agent = agent
        self._what = what  # "controller" or "telemetry", for logs
        self._configure = configure
        self._keys = keys
        self._server_keys = server_keys
        self.key_index = 0
        self._handshake_ms = max(1, int(handshake_s * 1000))
        # Past a handshake's bound and the longest reconnect interval with no sign of a connection attempt.
        self.stall_s = handshake_s + RECONNECT_IVL_MAX_MS / 1000 + 1.0
        self._throttle = Throttle(log)
        self._rejects = 0
        self.replaced = 0  # sockets replaced so far (tests, logs)
        self._backoff_s = BACKOFF_FIRST_S
        self._open()

    # ----- the socket ----------------------------------------------------------------------------
    def _open(self) -> None:
        sock = self._ctx.socket(self._type)
        # ZeroMQ's own retries back off too: after a failed handshake the peer may accept every connection.
        sock.reconnect_ivl = max(RECONNECT_IVL_MS, int(self._backoff_s * 1000))
        sock.reconnect_ivl_max = RECONNECT_IVL_MAX_MS
        sock.handshake_ivl = self._handshake_ms
        self._configure(sock)
        if self._keys is not None and self._server_keys:
            sock.curve_publickey, sock.curve_secretkey = self._keys
            sock.curve_serverkey = self._server_keys[self.key_index]
        self.mon = sock.get_monitor_socket(MONITOR_EVENTS)
        sock.connect(self.endpoint)
        self.sock = sock
        self.linked = False  # handshake done and not disconnected since
        self._connected = False  # TCP connected, handshake under way
        self._replace_at: float | None = None  # a handshake failed: replace at this time (sticky)
        self._stall_at: float | None = None  # dropped: replace then unless ZeroMQ retries meanwhile
        self._progress = time.monotonic()  # last sign that the socket is connecting or connected
        self._next_key = False  # the peer did not prove an allowed controller key: try the next one

    def close(self, linger_ms: int = 0) -> None:
        self.sock.disable_monitor()
        self.mon.close(linger=0)
        self.sock.close(linger=linger_ms)

    def _replace(self, why: str) -> None:
        self.close()
        self.replaced += 1
        if self._next_key and len(self._server_keys) > 1:
            # Another allowed controller key may be the one this controller holds: the new socket tries it.
            self.key_index = (self.key_index + 1) % len(self._server_keys)
        log.debug("new %s socket: %s", self._what, why,
                  extra={"event": "link_replaced", "agent": self._agent, "endpoint": self.endpoint,
                         "socket": self._what, "backoff_s": self._backoff_s})
        self._backoff_s = min(self._backoff_s * 2, BACKOFF_MAX_S)
        self._open()

    # ----- the monitor ---------------------------------------------------------------------------
    def check(self) -> bool:
        """Read the monitor's events and replace the socket when it is due; True when a handshake has
        just succeeded (the agent then says hello)."""
        hello = False
        mon = self.mon
        while True:
            try:
                event = recv_monitor_message(mon, flags=zmq.NOBLOCK)
            except zmq.Again:
                break
            hello |= self._on_event(event["event"], event["value"])
        now = time.monotonic()
        if self.linked:
            return hello
        due = min(t for t in (self._replace_at, self._stall_at, self._progress + self.stall_s) if t is not None)
        if now >= due:
            why = ("the handshake failed" if self._replace_at is not None and now >= self._replace_at
                   else "the connection dropped and ZeroMQ gave up on it" if self._stall_at is not None
                   and now >= self._stall_at else f"no connection attempt for {self.stall_s:g} s")
            self._replace(why)
        return hello

    def _on_event(self, kind: int, value: int) -> bool:
        now = time.monotonic()
        if kind in (zmq.EVENT_CONNECT_DELAYED, zmq.EVENT_CONNECT_RETRIED):
            self._progress = now
            self._stall_at = None  # ZeroMQ is still trying
        elif kind == zmq.EVENT_CONNECTED:
            self._connected = True
            self._progress = now
            self._stall_at = None
        elif kind == zmq.EVENT_HANDSHAKE_SUCCEEDED:
            self.linked = True
            self._progress = now
            self._rejects = 0
            self._backoff_s = BACKOFF_FIRST_S
            self._replace_at = self._stall_at = None
            log.info("connected to %s", self._what, extra={"event": f"{self._what}_connected", "agent": self._agent,
                                                           "endpoint": self.endpoint})
            return True
        elif kind == zmq.EVENT_HANDSHAKE_FAILED_AUTH:
            # The controller proved its key but its allowlist does not hold ours (ZAP status in value).
            self._rejected("refused_by_controller", f"the controller refused this agent's key "
                           f"{fingerprint(self._keys[0]) if self._keys else '-'} (ZAP status {value})")
        elif kind in (zmq.EVENT_HANDSHAKE_FAILED_PROTOCOL, zmq.EVENT_HANDSHAKE_FAILED_NO_DETAIL):
            self._not_the_controller(f"handshake failed (event {kind:#x}, detail {value})")
        elif kind == zmq.EVENT_DISCONNECTED:
            if self._connected and not self.linked and self._replace_at is None:
                self._not_the_controller("the peer closed the connection during the handshake")
            self.linked = self._connected = False
            self._progress = now
            if self._stall_at is None:
                self._stall_at = now + self._backoff_s
        return False

    def _rejected(self, event: str, message: str, **extra: object) -> None:
        self._rejects += 1
        if self._replace_at is None:
            self._replace_at = time.monotonic() + self._backoff_s
        where = "" if self._what == "controller" else f"{self._what} socket: "
        self._throttle.warn(event, "%s%s (%d attempts)", where, message, self._rejects,
                            event=event, agent=self._agent, endpoint=self.endpoint, socket=self._what,
                            attempts=self._rejects, **extra)

    def _not_the_controller(self, why: str) -> None:
        """The peer at the endpoint did not prove it holds an allowed controller key."""
        key = self._server_keys[self.key_index] if self._server_keys else b""
        if self._keys is not None:
            self._rejected("controller_rejected", f"controller rejected: {why}; it does not hold the allowed "
                           f"controller key {fingerprint(key)}", fingerprint=fingerprint(key))
        else:
            self._rejected("controller_rejected", f"no ZMTP peer: {why}")
        self._next_key = True
