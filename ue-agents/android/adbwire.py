"""adb's smart-socket framing, as the host server speaks it to the `adb` client.

Facts from AOSP packages/modules/adb (SERVICES.TXT, protocol.txt, SYNC.TXT, shell_protocol.h):
- a request is 4 hex digits (its length) then the service name, e.g. b"000chost:version";
- the server answers b"OKAY" or b"FAIL" + 4 hex digits + message; a payload reply is 4 hex + text;
- `host:tport:` answers OKAY then the transport id as 8 bytes, little-endian;
- shell v2 packets: 1 byte id, 4 bytes little-endian length, data (ids below);
- sync messages: 4-byte id, 4-byte little-endian length (or value), then the length's bytes.
"""

from __future__ import annotations

import socket
import struct

# shell v2 packet ids (shell_protocol.h)
SHELL_STDIN, SHELL_STDOUT, SHELL_STDERR, SHELL_EXIT, SHELL_CLOSE_STDIN, SHELL_WINDOW = 0, 1, 2, 3, 4, 5
SYNC_DATA_MAX_BYTES = 64 * 1024  # SYNC.TXT: a DATA chunk carries at most 64 KiB
MAX_REQUEST_BYTES = 0xFFFF


class ClientGone(Exception):
    """The client closed the connection (or sent garbage we cannot frame)."""


def recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray()
    while len(buf) < n:
        chunk = sock.recv(n - len(buf))
        if not chunk:
            raise ClientGone(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return bytes(buf)


def read_request(sock: socket.socket) -> str:
    head = recv_exact(sock, 4)
    try:
        length = int(head.decode("ascii"), 16)
    except (UnicodeDecodeError, ValueError):
        raise ClientGone(f"bad request length {head!r}") from None
    return recv_exact(sock, length).decode("utf-8", errors="replace")


def hex_payload(text: str | bytes) -> bytes:
    data = text.encode() if isinstance(text, str) else text
    return b"%04x" % len(data) + data


def okay(sock: socket.socket, payload: str | bytes | None = None) -> None:
    sock.sendall(b"OKAY" + (hex_payload(payload) if payload is not None else b""))


def fail(sock: socket.socket, message: str) -> None:
    sock.sendall(b"FAIL" + hex_payload(message))


def shell_packet(kind: int, data: bytes) -> bytes:
    return struct.pack("<BI", kind, len(data)) + data


def read_shell_packet(sock: socket.socket) -> tuple[int, bytes]:
    kind, length = struct.unpack("<BI", recv_exact(sock, 5))
    return kind, recv_exact(sock, length)


def sync_message(tag: bytes, value: int, data: bytes = b"") -> bytes:
    return tag + struct.pack("<I", value) + data


def read_sync_header(sock: socket.socket) -> tuple[bytes, int]:
    raw = recv_exact(sock, 8)
    return raw[:4], struct.unpack("<I", raw[4:])[0]
