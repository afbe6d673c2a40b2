"""`virtual`: the emulated LTE cell's attenuation, through its ZeroMQ control socket.

Protocol (decided with the emulator room): REQ → JSON `{"op": "set_attenuation", "ue": <channel-1>,
"attenuation_db": x}` / `{"op": "get_attenuation", "ue": n}`; replies `{"ok": true,
"attenuation_db": x}` or `{"ok": false, "error": "..."}`. Channel n of this attenuator is UE n-1.
"""

from __future__ import annotations

import json
from typing import Any

from cellab.labs.cellctl import CellControl, CellControlError, CellUnreachable

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, LinkClosed, register


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
        self._ctl = CellControl(self.config.address, int(self.config.timeout_s * 1000))

    def _close(self) -> None:
        if self._ctl is not None:
            self._ctl.close()
            self._ctl = None

    def _call(self, op: str, **fields: Any) -> dict:
        assert self._ctl is not None
        try:
            return self._ctl.request(op, **fields)
        except CellUnreachable as exc:  # the driver reconnects once on a lost link
            raise LinkClosed(str(exc)) from None
        except CellControlError as exc:
            raise AttenuatorError(str(exc)) from None

    def _write(self, channel: int, value_db: float) -> float | None:
        reply = self._call("set_attenuation", ue=channel - 1, attenuation_db=value_db)
        return _number(reply, "attenuation_db", self.config.name) if "attenuation_db" in reply else None

    def _read(self, channel: int) -> float:
        return _number(self._call("get_attenuation", ue=channel - 1), "attenuation_db", self.config.name)

    def _describe(self) -> DeviceInfo:
        return DeviceInfo(
            model="virtual",
            serial=self.config.address,
            channels=self.config.channels,
            min_db=self.config.min_db,
            max_db=self.config.max_db,
            step_db=self.config.step_db,
        )
