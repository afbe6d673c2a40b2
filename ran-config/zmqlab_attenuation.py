"""Each UE's attenuation on the srsran-zmq lab, set before a run and changed while it runs, and whether srsue
kept the cell (UeRadio, mixed into the lab).

A UE's attenuation is the eNB's `cell_gain` (shared by every UE: the least of the run's values, set at
configure) plus its own downlink copy's gain in the ZMQ broker (`common - attenuation`, changed while the
stream runs: broker `gain I DB`). Both act against srsue's fixed noise floor, so RSRP and SNR fall dB for dB.
A shield box's attenuator is passive, so the same dB scale the UE's uplink too: its weight in the sum srsenb
hears (broker `ul_gain I DB`, `-attenuation`: srsenb's cell_gain is its transmitter's only), against srsenb's
own fixed uplink noise floor (its channel emulator's AWGN, UL_REF_SNR_DB at 0 dB).

The lab's attenuator is the virtual lab's: the Mini-Circuits serial emulator (cellab.attenuator.bridge) on a
pseudo-terminal, driven by the real serial driver through an attenuator agent. The bridge speaks the virtual
cell's control protocol (ZeroMQ REQ, JSON `set_attenuation` / `get_attenuation`); AttenuationControl answers
it for this lab, so schedules, mobility replays, radio-outage faults and the safe state reach srsue here too.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import zmq

from cellab.errors import CellabError, InputError

from .ue_events import rrc_state

#: the attenuator's span: past MAX_ATTENUATION_DB (25 dB, SNR 5 dB) srsue loses the cell, which a schedule
#: through a coverage hole and a radio-outage fault want
ATTENUATOR_MAX_DB = 60.0
POLL_MS = 200
#: srsenb's uplink noise floor: the PUSCH SINR it measures for a UE at 0 dB attenuation (as srsue's downlink one)
UL_REF_SNR_DB = 30.0
#: srsenb's AWGN sets n0 = signal_power - snr dBfs; srsenb then reports a UE's PUSCH SINR at 0 dB attenuation as
#: UL_SNR_OFFSET_DB + snr (signal_power 0). Measured here (2 UEs at 0 and 15 dB, PUSCH RSSI 73.6 and 59.3 dB in
#: srsenb's report every time): snr -38 gave 70.7-71.6 and 56.7-57.2 dB; snr 0 and 30 gave 96-99.5 and 82-84 dB,
#: srsenb's estimator's own floor (the noise then too weak to count), where nothing depends on it (UL MCS 15-16)
UL_SNR_OFFSET_DB = 109.0
RECONNECT_WAIT_S = 20.0  # a UE that lost the cell: its re-establishment (1-2 s measured) before a restart


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


def enb_ul_awgn() -> dict[str, float]:
    """The eNB profile's channel.ul_awgn giving UL_REF_SNR_DB at 0 dB attenuation."""
    return {"signal_power_dbfs": 0.0, "snr_db": UL_REF_SNR_DB - UL_SNR_OFFSET_DB}


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


class UeRadio:
    """The srsran-zmq lab's side of each UE's radio: its attenuation through the broker, and whether srsue kept
    the cell (its own RRC log). Mixed into SrsranZmqLab, whose configure and broker set the fields below."""

    _broker: Any
    _cell_att_db: float | None
    _ue_att_db: list[float]
    _lab_events: list[dict[str, Any]]
    _ues: list[Any]
    _applied: Any
    _configured_at_s: float

    def set_ue_attenuation(self, ue: int, attenuation_db: float) -> None:
        """UE `ue` at attenuation_db: beyond the eNB's cell_gain, its downlink copy's gain in the broker, and all of
        it on its uplink, changed while the stream runs (a schedule's step, a radio outage); kept for the broker's
        start when none runs."""
        if self._broker is not None and self._broker.running() and self._cell_att_db is not None:
            dl_gain_db, ul_gain_db = self._cell_att_db - attenuation_db, 0.0 - attenuation_db  # not -0.0
            changed = False
            if dl_gain_db != self._broker.dl_gains_db[ue]:  # configure repeats the values most runs keep
                self._broker.set_gain(ue, dl_gain_db)
                changed = True
            if ul_gain_db != self._broker.ul_gains_db[ue]:
                self._broker.set_gain(ue, ul_gain_db, link="ul")
                changed = True
            if changed:
                self.note_event({"event": "attenuation", "ue": ue, "attenuation_db": attenuation_db})
        self._ue_att_db[ue] = attenuation_db  # once applied: a refused value leaves the UE where it was

    def note_event(self, event: dict[str, Any]) -> None:
        """One of the lab's own events, stamped with the wall clock unless it brings its own `t_s` (a line of a
        program's log); the newest thousand are kept."""
        self._lab_events = self._lab_events[-999:] + [{"t_s": time.time()} | event]

    def rrc_events(self, ue: Any) -> list[dict[str, Any]]:
        """srsue `ue`'s RRC events since the last configure (its RrcEventTail: none lost to the log's bound)."""
        return ue.rrc.events(self._configured_at_s)

    def _lost_ues(self) -> list[int]:
        """The UEs whose srsue logged a radio link failure since the last configure and no way back yet."""
        if self._applied is None:
            return []
        return [ue.index for ue in self._ues if rrc_state(self.rrc_events(ue), attached=True) != "connected"]

    def _wait_reconnected(self, lost: list[int]) -> list[int]:
        """Those of `lost` still not connected after RECONNECT_WAIT_S."""
        deadline = time.monotonic() + RECONNECT_WAIT_S
        while lost and time.monotonic() < deadline:
            time.sleep(0.2)
            lost = [i for i in lost if i in self._lost_ues()]
        return lost

    def _broker_gains_db(self) -> list[float]:
        """Each UE's downlink gain in the broker: its attenuation beyond the eNB's cell_gain."""
        return [round((self._cell_att_db or 0.0) - db, 3) for db in self._ue_att_db]

    def _broker_ul_gains_db(self) -> list[float]:
        """Each UE's uplink gain in the broker: all of its attenuation (srsenb's cell_gain is its tx's only)."""
        return [round(0.0 - db, 3) for db in self._ue_att_db]

    def fault_state(self) -> dict[str, Any]:
        """Each UE's RRC state after its srsue's events since configure (attached then)."""
        return {"rrc_state": {str(ue.index): rrc_state(self.rrc_events(ue), attached=True) for ue in self._ues}}
