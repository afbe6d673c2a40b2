"""The envelope on the wire: multipart [header-json, body] (the ROUTER adds the identity frame).

Header keys: version, kind, id, op, deadline. `deadline` is the seconds left when the message was sent
(relative, so a skewed agent clock cannot expire a request early); the agent turns it into a local
monotonic deadline on receipt.
"""

from __future__ import annotations

from typing import Any, Final

import zmq
from pydantic_core import from_json, to_json

from cellab.bus.timing import HEARTBEAT_S, PEER_LOST_S  # noqa: F401  (wire.HEARTBEAT_S: the bus's own callers)

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

# Largest frame a bus socket takes (ZMQ_MAXMSGSIZE, per frame): a larger one makes ZeroMQ drop the
# connection, so both sides also refuse to send one. Far above a chunk or any op's params or result.
MAX_FRAME_BYTES: Final = 64 * 1024 * 1024
# Largest telemetry frame the controller takes; a sample is a few hundred bytes.
MAX_TELEMETRY_BYTES: Final = 4 * 1024 * 1024
# What an agent's PUB takes in (the SUB's subscriptions).
MAX_SUBSCRIPTION_BYTES: Final = 64 * 1024

# pyzmq's flags are enum.Flag members: `zmq.SNDMORE | zmq.NOBLOCK` builds a new enum object (0.45 us)
# every time. The hot paths (a few per round trip on each side) use these plain ints instead.
SNDMORE_NOBLOCK: Final = int(zmq.SNDMORE | zmq.NOBLOCK)
NOBLOCK: Final = int(zmq.NOBLOCK)
EVENTS: Final = int(zmq.EVENTS)
POLLIN: Final = int(zmq.POLLIN)

# The agent's reply header for an int id, byte for byte (see reply_header): the controller reads the id
# from it without a JSON parse; any other header takes the general path.
_REPLY_PREFIX: Final = b'{"version":%d,"kind":"reply","id":' % VERSION


def reply_header(rid: int) -> bytes:
    return b"%b%d}" % (_REPLY_PREFIX, rid)


def reply_id(frame: bytes) -> int | None:
    """The id of a header that reply_header(id) wrote, else None (then decode_header it)."""
    if frame.startswith(_REPLY_PREFIX) and frame.endswith(b"}"):
        digits = frame[len(_REPLY_PREFIX):-1]
        if digits.isdigit():
            return int(digits)
    return None


def recv_message(sock: zmq.Socket, flags: int = NOBLOCK) -> tuple[list[bytes], zmq.Frame] | None:
    """One whole message and its first frame (metadata such as the sender's User-Id), or None when
    none is waiting (flags=0: none came within the socket's RCVTIMEO). Cheaper than recv_multipart:
    `frame.more` instead of a getsockopt per frame."""
    try:
        first = frame = sock.recv(flags, copy=False)
    except zmq.Again:
        return None
    frames = [frame.bytes]
    while frame.more:
        frame = sock.recv(NOBLOCK, copy=False)
        frames.append(frame.bytes)
    return frames, first


# JSON through pydantic_core (a pydantic dependency) rather than the json module: one call into compiled
# code instead of several Python frames around it, 0.2 us instead of 1.6-2 us warm, and far less when
# the code is cold, as it is on a shared host (the stdlib's dumps + loads on both sides alone took a bare
# ROUTER/DEALER round trip from 1.15x to 2x plain REQ/REP, issue 18). NaN and Infinity stay JSON's
# usual extension, as with json.dumps; non-ASCII text is sent as UTF-8.


def encode_header(header: dict[str, Any]) -> bytes:
    return to_json(header, inf_nan_mode="constants")


def decode_json(data: bytes) -> Any:
    """Any JSON value; ValueError when `data` is not JSON."""
    return from_json(data)


def decode_header(frame: bytes) -> dict[str, Any]:
    """A header dict, or ValueError when the frame is not a JSON object of the right version."""
    header = from_json(frame)
    if not isinstance(header, dict):
        raise ValueError("header is not a JSON object")  # noqa: TRY004 - callers catch ValueError for any bad frame
    version = header.get("version")
    if version != VERSION or type(version) is not int:
        raise ValueError(f"header version {version!r:.40} (expected {VERSION})")
    return header


def encode_body(data: Any) -> bytes:
    """JSON of `data`; ValueError when it holds something JSON cannot carry."""
    return to_json(data, inf_nan_mode="constants")
