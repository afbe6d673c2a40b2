"""`virtual`: the emulated LTE cell's attenuation, through its ZeroMQ control socket.

Protocol (decided with the emulator room): REQ → JSON `{"op": "set_attenuation", "ue": <channel-1>,
"attenuation_db": x}` / `{"op": "get_attenuation", "ue": n}`; replies `{"ok": true,
"attenuation_db": x}` or `{"ok": false, "error": "..."}`. Channel n of this attenuator is UE n-1.
"""

from __future__ import annotations

import json

import zmq

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register


class CellControl:
    """A REQ client that survives a lost reply: after a timeout the socket is rebuilt."""

    def __init__(self, endpoint: str, timeout_s: float, context: zmq.Context | None = None):
        self.endpoint, self.timeout_ms = endpoint, int(timeout_s * 1000)
        self._ctx = context or zmq.Context.instance()
        self._sock: zmq.Socket | None = None

    def _socket(self) -> zmq.Socket:
        if self._sock is None:
            sock = self._ctx.socket(zmq.REQ)
            sock.setsockopt(zmq.LINGER, 0)
            sock.setsockopt(zmq.RCVTIMEO, self.timeout_ms)
            sock.setsockopt(zmq.SNDTIMEO, self.timeout_ms)
            sock.connect(self.endpoint)
            self._sock = sock
        return self._sock

    def request(self, message: dict) -> dict:
        sock = self._socket()
        try:
            sock.send(json.dumps(message).encode())
            raw = sock.recv()
        except zmq.Again:
            self.close()  # a REQ socket that missed its reply cannot send again
            raise LinkClosed(f"cell control {self.endpoint}: no reply within {self.timeout_ms} ms to {message.get('op')}") from None
        except zmq.ZMQError as exc:
            self.close()
            raise LinkClosed(f"cell control {self.endpoint}: {exc}") from exc
        try:
            reply = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            raise AttenuatorError(f"cell control {self.endpoint}: reply is not JSON: {raw[:60]!r}") from None
        if not isinstance(reply, dict):
            raise AttenuatorError(f"cell control {self.endpoint}: reply is not a JSON object: {raw[:60]!r}")
        if reply.get("ok") is not True:
            raise AttenuatorError(f"cell control {self.endpoint}: {message.get('op')} failed: {str(reply.get('error', reply))[:120]}")
        return reply

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close(linger=0)
            self._sock = None


def _number(reply: dict, key: str, where: str) -> float:
    value = reply.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise AttenuatorError(f"{where}: reply has no numeric {key!r}: {json.dumps(reply)[:120]}")
    return float(value)


@register(models=("virtual",), transports=("zmq",))
class VirtualCell(Attenuator):
    def __init__(self, config: AttenuatorConfig):
        super().__init__(config)
        self._ctl: CellControl | None = None

    def _open(self) -> None:
        if not self.config.address:
            raise AttenuatorError(f"{self.config.name}: address must be the cell's control endpoint (e.g. ipc:///run/cell.ctl)")
        self._ctl = CellControl(self.config.address, self.config.timeout_s)

    def _close(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None

    def _write(self, channel: int, value_db: float) -> float | None:
        assert self._ctl is not None
        reply = self._ctl.request({"op": "set_attenuation", "ue": channel - 1, "attenuation_db": value_db})
        return _number(reply, "attenuation_db", self.config.name) if "attenuation_db" in reply else None

    def _read(self, channel: int) -> float:
        assert self._ctl is not None
        return _number(self._ctl.request({"op": "get_attenuation", "ue": channel - 1}), "attenuation_db", self.config.name)

    def _describe(self) -> DeviceInfo:
        return DeviceInfo(
            model="virtual",
            serial=self.config.address,
            channels=self.config.channels,
            min_db=self.config.min_db,
            max_db=self.config.max_db,
            step_db=self.config.step_db,
        )
