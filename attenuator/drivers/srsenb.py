"""`srsenb-cell-gain`: software attenuation through srsENB's stdin command `cell_gain <cell_id> <dB>`.

srsENB applies a gain (anchors.md §1.4, verified in srsenb/src/main.cc); attenuation x dB is sent
as gain −x dB. srsENB has no way to read the gain back, so `get` returns the last commanded value
(and `info` says so). The command goes through the eNB agent (ran-config room), which this room
does not import: the caller hands in `send(op, params) -> dict`, e.g. a bus client bound to that
agent. Channel n is srsENB cell_id options.cell_ids[n-1] (default: n-1).

The eNB agent's operation (cellab/contracts/enb.py): op "cell_gain", params {"cell_id": int, "gain_db":
float}; `send` replies {"ok": true} or {"ok": false, "error": ...} (relay.py builds it on the controller's bus).
"""

from __future__ import annotations

from collections.abc import Callable

from ..config import AttenuatorConfig
from ..driver import Attenuator, AttenuatorError, DeviceInfo, register

EnbSend = Callable[[str, dict], dict]


@register(models=("srsenb-cell-gain",), transports=("enb-agent",))
class SrsenbCellGain(Attenuator):
    def __init__(self, config: AttenuatorConfig, send: EnbSend | None = None):
        super().__init__(config)
        self._send = send
        self._commanded: dict[int, float] = {}

    def _cell_id(self, channel: int) -> int:
        raw = self.config.option("cell_ids", "")
        ids = [int(x) for x in str(raw).split(",") if x.strip()] if raw != "" else []
        if ids and channel > len(ids):
            raise AttenuatorError(f"{self.config.name}: channel {channel}, but options.cell_ids names "
                                  f"{len(ids)} cell(s) ({raw})")
        return ids[channel - 1] if ids else channel - 1

    def _open(self) -> None:
        if self._send is None:
            raise AttenuatorError(f"{self.config.name}: needs a connection to the eNB agent {self.config.address!r}")

    def _close(self) -> None:
        pass

    def _write(self, channel: int, value_db: float) -> float | None:
        assert self._send is not None
        reply = self._send("cell_gain", {"cell_id": self._cell_id(channel), "gain_db": -value_db})
        if isinstance(reply, dict) and reply.get("ok") is False:
            raise AttenuatorError(f"{self.config.name}: eNB agent refused cell_gain: {reply.get('error', reply)}")
        self._commanded[channel] = value_db
        return None

    def _read(self, channel: int) -> float:
        if channel not in self._commanded:
            raise AttenuatorError(f"{self.config.name}: srsENB cannot report its cell gain; channel {channel} not set yet")
        return self._commanded[channel]

    def _describe(self) -> DeviceInfo:
        return DeviceInfo(
            model="srsenb cell_gain (no readback: get returns the commanded value)",
            serial=self.config.address,
            channels=self.config.channels,
            min_db=self.config.min_db,
            max_db=self.config.max_db,
            step_db=self.config.step_db,
        )
