"""A minimal receiver for docs/flow-protocol.md: tests and benchmarks fetch flows from cellab-send with it.

The real receiver is cellab-probe (ue-agents/probe/); this one only reads and times, so the
server room can test itself without another room's binary.
"""

from __future__ import annotations

import socket
import struct
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from cellab.labs.netns import pr_netns

MODE_BYTES = 1
MODE_TIME_MS = 2
MODE_UNTIL_CLOSE = 3
STATUS_TEXT = {0: "ok", 1: "bad request", 2: "unknown congestion control", 3: "busy"}
REQUEST = struct.Struct("<4sHHQ16sQI20s")
RESPONSE = struct.Struct("<4sHHQ")


@dataclass(frozen=True)
class FlowResult:
    status: int
    flow_id: int
    bytes_received: int
    fct_s: float        # connect() start to the sender's FIN
    first_byte_s: float


def encode_request(mode: int, amount: int, cc_name: str = "", flow_tag: int = 0, chunk_bytes: int = 0) -> bytes:
    name = cc_name.encode()
    if len(name) > 15:
        raise ValueError(f"cc_name {cc_name!r} is longer than 15 bytes")
    return REQUEST.pack(b"CLB1", 1, mode, amount, name.ljust(16, b"\0"), flow_tag, chunk_bytes, b"\0" * 20)


@contextmanager
def in_netns(name: str | None) -> Iterator[None]:
    """Sockets created inside are in namespace `name` (setns is per thread; the thread returns after)."""
    if name is None:
        yield
        return
    pr_netns.pushns(name)
    try:
        yield
    finally:
        pr_netns.popns()


def fetch(
    host: str,
    port: int,
    mode: int = MODE_BYTES,
    amount: int = 1_000_000,
    cc_name: str = "",
    flow_tag: int = 0,
    rcvbuf_bytes: int | None = None,
    rcvbuf_after_connect_bytes: int | None = None,
    window_clamp_bytes: int | None = None,
    quickack: bool = False,
    timeout_s: float = 30.0,
    netns: str | None = None,
) -> FlowResult:
    """Open one flow and read it to the end; raises TimeoutError past timeout_s."""
    deadline = time.monotonic() + timeout_s
    with in_netns(netns):
        sock = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
    with sock as s:
        if rcvbuf_bytes:
            # set before connect so the SYN's window scale can express it (autotuning then stays off)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_bytes)
        s.settimeout(timeout_s)
        t0 = time.monotonic()
        s.connect((host, port))
        if rcvbuf_after_connect_bytes:
            # after the SYN: the window scale stays the one for the default buffer space, so the
            # 16-bit window field keeps headroom, while the window itself is bounded by this buffer
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf_after_connect_bytes)
        if window_clamp_bytes:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, window_clamp_bytes)
        s.sendall(encode_request(mode, amount, cc_name, flow_tag))
        head = b""
        while len(head) < RESPONSE.size:
            part = s.recv(RESPONSE.size - len(head))
            if not part:
                raise ConnectionError("sender closed before its response")
            head += part
        magic, status, _, flow_id = RESPONSE.unpack(head)
        if magic != b"CLB1":
            raise ConnectionError("response without CLB1 magic")
        got, first = 0, 0.0
        buf = bytearray(1 << 18)
        while status == 0:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"flow {flow_id} still running after {timeout_s} s")
            s.settimeout(left)
            n = s.recv_into(buf)
            if n == 0:
                break
            if quickack:
                # Linux turns quick-ACK mode off by itself; re-arm it so no ACK waits for the delack timer
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_QUICKACK, 1)
            if window_clamp_bytes:
                # Linux 6.18's receive autotuning raises window_clamp again (even with SO_RCVBUF
                # locked), so the clamp is re-applied after every read to keep rwnd bounded.
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_WINDOW_CLAMP, window_clamp_bytes)
            if not got:
                first = time.monotonic() - t0
            got += n
        return FlowResult(status, flow_id, got, time.monotonic() - t0, first)
