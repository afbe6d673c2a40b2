"""Client of the virtual cell's control socket (cellab-cell: ZeroMQ REQ, one JSON request per message).

Shared by the emulator room (the virtual lab) and the attenuator room (the `virtual` driver, the
serial-to-cell bridge, calibration), which may not import each other.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Self


from cellab.errors import CellabError

if TYPE_CHECKING:
    import zmq


class CellControlError(CellabError):
    """The cell refused a request or answered something that is not a JSON object."""


class CellUnreachable(CellControlError):
    """No reply in time (or the socket failed): the cell is down or restarting."""


class CellControl:
    """set_attenuation / get_attenuation / pause / resume / stats / stalls on a running cell."""

    def __init__(self, endpoint: str, timeout_ms: int = 2000):
        import zmq  # here: the labs' modules are imported by every `cellab validate` (lab parameters)

        self.endpoint = endpoint
        self.timeout_ms = timeout_ms
        self._ctx = zmq.Context.instance()
        self._sock: zmq.Socket | None = None

    def _socket(self) -> zmq.Socket:
        import zmq

        if self._sock is None:
            sock = self._ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
            sock.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
            sock.connect(self.endpoint)
            self._sock = sock
        return self._sock

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        import zmq

        sock = self._socket()
        try:
            sock.send(json.dumps({"op": op, **fields}).encode())
            raw = sock.recv()
        except zmq.Again:
            # a REQ socket that missed its reply is stuck: drop it, the next request opens a new one
            self.close()
            raise CellUnreachable(f"cell at {self.endpoint}: no reply within {self.timeout_ms} ms to {op}") from None
        except zmq.ZMQError as exc:
            self.close()
            raise CellUnreachable(f"cell at {self.endpoint}: {exc}") from exc
        try:
            reply = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise CellControlError(f"cell at {self.endpoint}: reply is not JSON: {raw[:60]!r}") from None
        if not isinstance(reply, dict):
            raise CellControlError(f"cell at {self.endpoint}: reply is not a JSON object: {raw[:60]!r}")
        if reply.get("ok") is not True:
            raise CellControlError(f"cell at {self.endpoint}: {op} failed: {str(reply.get('error', 'refused'))[:160]}")
        return reply

    def set_attenuation(self, ue: int, attenuation_db: float) -> dict[str, Any]:
        return self.request("set_attenuation", ue=ue, attenuation_db=float(attenuation_db))

    def get_attenuation(self, ue: int) -> dict[str, Any]:
        return self.request("get_attenuation", ue=ue)

    def pause(self) -> dict[str, Any]:
        return self.request("pause")

    def resume(self) -> dict[str, Any]:
        return self.request("resume")

    def stats(self) -> dict[str, Any]:
        return self.request("stats")

    def stalls(self, since_ns: int = 0) -> dict[str, Any]:
        """The TTIs the cell ran more than `min_late_us` late since since_ns (CLOCK_MONOTONIC, the clock of
        time.monotonic_ns()): `stalls` [[deadline_ns, late_us], ...], `complete` false if some were dropped."""
        return self.request("stalls", since_ns=int(since_ns))

    def ue_stats(self, ue: int) -> dict[str, Any]:
        """One UE's entry of `stats` (attenuation, RSRP, SINR, CQI, queues, ...), with a numeric rsrp_dbm."""
        for entry in self.stats().get("ues", []):
            if isinstance(entry, dict) and entry.get("ue") == ue and isinstance(entry.get("rsrp_dbm"), (int, float)):
                return entry
        raise CellControlError(f"cell at {self.endpoint}: stats has no rsrp_dbm for ue {ue}")

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(0)
            self._sock = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
