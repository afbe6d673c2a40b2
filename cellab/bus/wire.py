"""The envelope on the wire: multipart [header-json, body] (the ROUTER adds the identity frame).

Header keys: version, kind, id, op, deadline. `deadline` is the seconds left when the message was sent
(relative, so a skewed agent clock cannot expire a request early); the agent turns it into a local
monotonic deadline on receipt.
"""

from __future__ import annotations

import json
from typing import Any, Final

import zmq

VERSION: Final = 1

REQUEST: Final = "request"
REPLY: Final = "reply"
ERROR: Final = "error"
HEARTBEAT: Final = "heartbeat"
HELLO: Final = "hello"
BYE: Final = "bye"
TELEMETRY: Final = "telemetry"

# Largest chunk read_artifact returns: big enough for throughput, small enough not to stall heartbeats.
MAX_CHUNK_BYTES: Final = 4 * 1024 * 1024
DEFAULT_CHUNK_BYTES: Final = 1024 * 1024

# pyzmq's flags are enum.Flag members: `zmq.SNDMORE | zmq.NOBLOCK` builds a new enum object (0.45 us)
# every time. The hot paths (a few per round trip on each side) use these plain ints instead.
SNDMORE_NOBLOCK: Final = int(zmq.SNDMORE | zmq.NOBLOCK)
NOBLOCK: Final = int(zmq.NOBLOCK)
EVENTS: Final = int(zmq.EVENTS)
POLLIN: Final = int(zmq.POLLIN)

_dumps = json.JSONEncoder(separators=(",", ":")).encode


def encode_header(header: dict[str, Any]) -> bytes:
    return _dumps(header).encode()


def decode_header(frame: bytes) -> dict[str, Any]:
    """A header dict, or ValueError when the frame is not a JSON object of the right version."""
    header = json.loads(frame)
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")  # noqa: TRY004 - callers catch ValueError for any bad frame
    if header.get("version") != VERSION:
        raise ValueError(f"header version {header.get('version')!r} (expected {VERSION})")
    return header


def encode_body(data: Any) -> bytes:
    return _dumps(data).encode()
