"""Each UE's attenuation on the srsran-zmq lab, set before a run and changed while it runs.

A UE's attenuation is the eNB's `cell_gain` (shared by every UE: the least of the run's values, set at
configure) plus its own downlink copy's gain in the ZMQ broker (`common - attenuation`, changed while the
stream runs: broker `gain I DB`). Both act against srsue's fixed noise floor, so RSRP and SNR fall dB for dB.

The lab's attenuator is the virtual lab's: the Mini-Circuits serial emulator (cellab.attenuator.bridge) on a
pseudo-terminal, driven by the real serial driver through an attenuator agent. The bridge speaks the virtual
cell's control protocol (ZeroMQ REQ, JSON `set_attenuation` / `get_attenuation`); AttenuationControl answers
it for this lab, so schedules, mobility replays, radio-outage faults and the safe state reach srsue here too.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from typing import Any

import zmq

from cellab.errors import CellabError, InputError

#: the attenuator's span: past MAX_ATTENUATION_DB (25 dB, SNR 5 dB) srsue loses the cell, which a schedule
#: through a coverage hole and a radio-outage fault want
ATTENUATOR_MAX_DB = 60.0
POLL_MS = 200


def ue_attenuations(run_value: float, ues: Any, n_ues: int, max_db: float) -> list[float]:
    """Each UE's attenuation at configure: its own `attenuation_db` in the run's `ues` list, else the run's."""
    values = [float(run_value)] * n_ues
    if isinstance(ues, list):
        for i, spec in enumerate(ues[:n_ues]):
            own = spec.get("attenuation_db") if isinstance(spec, dict) else getattr(spec, "attenuation_db", None)
            if own is None:
                continue
            if isinstance(own, bool) or not isinstance(own, (int, float)) or not 0 <= own <= max_db:
                raise InputError("run parameters", f"ues[{i}].attenuation_db", f"{own!r} is not an attenuation "
                                 "this lab can apply", [f"0..{max_db:g} dB"])
            values[i] = float(own)
    return values


class AttenuationControl:
    """A REP socket on `endpoint` answering the virtual cell's attenuation ops with `set_db(ue, db)` and
    `get_db(ue)`; one thread, until stop()."""

    def __init__(self, endpoint: str, n_ues: int, set_db: Callable[[int, float], None],
                 get_db: Callable[[int], float]):
        self.endpoint, self.n_ues = endpoint, n_ues
        self._set_db, self._get_db = set_db, get_db
        self._stop = threading.Event()
        self._sock = zmq.Context.instance().socket(zmq.REP)
        self._sock.setsockopt(zmq.LINGER, 0)
        self._sock.bind(endpoint)
        self._thread = threading.Thread(target=self._serve, name="zmqlab-attenuation", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        try:
            while not self._stop.is_set():
                if not self._sock.poll(POLL_MS):
                    continue
                raw = self._sock.recv()
                self._sock.send(json.dumps(self._answer(raw)).encode())
        finally:
            self._sock.close()

    def _answer(self, raw: bytes) -> dict[str, Any]:
        try:
            request = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            return {"ok": False, "error": "not JSON"}
        if not isinstance(request, dict):
            return {"ok": False, "error": "not a JSON object"}
        op, ue = request.get("op"), request.get("ue")
        if op not in ("set_attenuation", "get_attenuation"):
            return {"ok": False, "error": "op: allowed set_attenuation, get_attenuation"}
        if isinstance(ue, bool) or not isinstance(ue, int) or not 0 <= ue < self.n_ues:
            return {"ok": False, "error": f"ue: 0..{self.n_ues - 1}"}
        try:
            if op == "get_attenuation":
                return {"ok": True, "ue": ue, "attenuation_db": self._get_db(ue)}
            value = request.get("attenuation_db")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) \
                    or not 0 <= value <= ATTENUATOR_MAX_DB:
                return {"ok": False, "error": f"attenuation_db: 0..{ATTENUATOR_MAX_DB:g} dB"}
            self._set_db(ue, float(value))
        except CellabError as exc:  # the broker is gone or refused: the bridge's device keeps its value
            return {"ok": False, "error": str(exc)[:160]}
        return {"ok": True, "ue": ue, "attenuation_db": float(value)}

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2 * POLL_MS / 1000 + 1)
