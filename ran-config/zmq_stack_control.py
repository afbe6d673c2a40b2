"""The rehearsal stack's control socket (zmq_stack): the attenuation ops the emulated box forwards
(AttenuationControl), and `stats` as the virtual cell answers it, so a virtual UE agent started with `--cell-ctl`
on it says its UE's state in its heartbeats (`in` while its srsue runs attached, else `out`) and reads its signal
(`signal`: srsue's own RSRP and SNR). `set_ue_host` (a UE's host held: ue_pause) is the virtual cell's only: refused here, naming why."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .zmqlab_attenuation import AttenuationControl

#: a UE with no srsue measuring: below RSRP's reportable range (TS 36.133 Table 9.1.4-1, RSRP_00: < -140 dBm)
NO_SIGNAL_DBM = -140.0
TAIL_BYTES = 4096
#: a ue_pause fault's `set_ue_host` here: named, not the attenuation socket's list of its ops
HOLD_REFUSED = ("ue_pause: the srsran-zmq rehearsal cannot hold one UE's host (every srsue shares one ZMQ stream "
                "with srsenb): use a radio_outage")  # within the 160 characters CellControl quotes


def last_metrics(csv_path: Path) -> dict[str, float]:
    """srsue's newest per-second metrics row (its `;`-separated CSV): column -> value; {} without one."""
    try:
        with open(csv_path, "rb") as f:
            header = f.readline().decode(errors="replace").strip().split(";")
            f.seek(0, 2)
            f.seek(max(0, f.tell() - TAIL_BYTES))
            lines = [line for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return {}
    for line in reversed(lines[1:] if len(lines) > 1 else []):
        row = line.split(";")
        if len(row) == len(header):  # not a line cut by srsue's write in progress, nor the header
            try:
                return {k: float(v) for k, v in zip(header, row, strict=True)}
            except ValueError:
                continue
    return {}


class StackControl(AttenuationControl):
    """`ue_stats(i)` -> {"ue", "rrc_state", "rsrp_dbm", "sinr_db"} of UE i, for `stats`."""

    def __init__(self, endpoint: str, n_ues: int, set_db: Callable[[int, float], None],
                 get_db: Callable[[int], float], ue_stats: Callable[[int], dict[str, Any]]):
        self._ue_stats = ue_stats  # before the serving thread starts
        super().__init__(endpoint, n_ues, set_db, get_db)

    def _answer(self, raw: bytes) -> dict[str, Any]:
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            request = None
        if isinstance(request, dict) and request.get("op") == "stats":
            return {"ok": True, "ues": [self._ue_stats(i) for i in range(self.n_ues)]}
        if isinstance(request, dict) and request.get("op") == "set_ue_host":
            return {"ok": False, "error": HOLD_REFUSED}
        return super()._answer(raw)
