"""Faults inside a run (issue 28): a campaign's `faults` section names fault plans, the run parameter `faults`
picks one per run (so `faults` can be a factor: none and each plan in one matrix), and the run injects each
fault at its time into the workload, for its duration, through whoever owns the box:

| kind | box | how |
|---|---|---|
| `radio_outage` | the UE's attenuator channel | the attenuator agent sets the channel to the attenuator's maximum, then back |
| `s1_cut` | the S1 path (eNB ↔ core) | the lab's typed `inject_fault` (virtual: the cell's `set_s1` op) |
| `sgi_cut` | the SGi path (core ↔ server) | the lab's `inject_fault` (virtual: the cell's `set_sgi` op) |
| `core_daemon` | the core (`daemon`: an EPC daemon, or srsepc) | the lab's `inject_fault` (killed, restarted at the end) |
| `enb_restart` | the eNB | the lab's `inject_fault` (virtual: the cell's `set_enb`; srsran-zmq: srsenb killed, restarted at the end) |
| `ue_pause` | the UE's host | the lab's `inject_fault` (virtual: frozen by the cgroup v2 freezer and its packets dropped; at most `UE_PAUSE_MAX_S`) |

Each lab kind says which it can inject (`EmbeddedLab.fault_kinds`); validation refuses the others, naming the
lab and the fault. Recovery is measured on the run's timeline from the lab's own events (the virtual cell's
RRC events and its TTI log), not from the plan: `recovery_metrics`.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from cellab.bus.wire import HEARTBEAT_S, PEER_LOST_S
from cellab.errors import CellabError, InputError
from cellab.records import Strict

FAULT_KINDS = ("radio_outage", "s1_cut", "sgi_cut", "core_daemon", "enb_restart", "ue_pause")
# faults of one UE (its `ue`); the others (the eNB, the S1 or SGi path, a core daemon) hit every UE of the cell
UE_FAULT_KINDS = ("radio_outage", "ue_pause")
# what recovery_metrics measures for the UE of a row (the rest is the fault's own: its window and source)
PER_UE_FIGURES = ("rlf_s", "out_of_sync_s", "reattach_s", "reattach_by", "reattach_after_end_s", "pre_fault_bps",
                  "throughput_back_s", "recovery_s", "disruption_s", "lost_bytes", "longest_stall_s")
# the EPC's daemons by the core agent's names (Open5GS: sgwc, sgwu, smf, pcrf too; NextEPC: sgw), and srsepc whole
CORE_DAEMONS = ("mme", "sgw", "sgwc", "sgwu", "smf", "upf", "hss", "pcrf", "srsepc")
NO_FAULT = "none"
#: throughput is back when a 300 ms window after the fault carries this share of the pre-fault level
RECOVERED_SHARE = 0.9
BIN_S = 0.1
PRE_WINDOW_S = 1.0  # the pre-fault level: the mean over this long before the fault (after the first 0.3 s)
#: the longest ue_pause a run survives: the bus declares an agent silent for PEER_LOST_S lost (its pending requests,
#: the paused UE's workload, fail), and the last heartbeat before the pause may be one interval old, so the pause
#: ends with another interval to spare; measured on the virtual lab: a 3 s pause recovered, 6 s ended in AgentLost
UE_PAUSE_MAX_S = PEER_LOST_S - 2 * HEARTBEAT_S


class FaultSpec(Strict):
    """One fault of a plan: at `at_s` into the workload, for `duration_s`."""

    kind: Literal[FAULT_KINDS] = Field(description="what fails")  # type: ignore[valid-type]
    at_s: float = Field(ge=0, allow_inf_nan=False, description="start, seconds into the workload")
    duration_s: float = Field(gt=0, allow_inf_nan=False, description="how long the fault lasts (s)")
    ue: int = Field(0, ge=0, le=15, description="radio_outage, ue_pause: the run's UE (0: its first)")
    daemon: Literal[CORE_DAEMONS] | None = Field(  # type: ignore[valid-type]
        None, description="core_daemon: which daemon is killed and restarted (the lab and the run's core decide which: "
                          "srsran-zmq takes srsepc with core srsepc; hss, pcrf, sgwc, sgwu, upf, smf, mme with core "
                          "open5gs)")

    @model_validator(mode="after")
    def _daemon_only_for_core(self) -> FaultSpec:
        if self.kind == "core_daemon" and self.daemon is None:
            raise ValueError("daemon: a core_daemon fault names its daemon (" + ", ".join(CORE_DAEMONS) + ")")
        if self.kind != "core_daemon" and self.daemon is not None:
            raise ValueError(f"daemon: only a core_daemon fault names one, not {self.kind}")
        return self

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def box(self) -> str:
        """What the fault acts on: two faults on one box may not overlap."""
        if self.kind in ("radio_outage", "ue_pause"):
            return f"{self.kind.split('_')[0]} of UE {self.ue}"
        return {"s1_cut": "S1 path", "sgi_cut": "SGi path", "core_daemon": "core", "enb_restart": "eNB"}[self.kind]


class FaultStep(BaseModel):
    """The typed operation a lab's `inject_fault` receives: start (active) or end one fault."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal[FAULT_KINDS]  # type: ignore[valid-type]
    active: bool
    ue: int = Field(0, ge=0, le=15)
    daemon: Literal[CORE_DAEMONS] | None = None  # type: ignore[valid-type]


def check_fault_plans(plans: dict[str, list[FaultSpec]], used: Iterable[tuple[str, str]], duration_s: float,
                      lab: str, supported: frozenset[str] | None, source: str | Path,
                      daemons: frozenset[str] | None = None) -> list[InputError]:
    """Errors of the fault plans: times within the workload, no two faults overlapping on one box, every kind
    one the lab can inject (supported None: not known before a worker takes the run), every core_daemon one of
    the lab's `daemons` (None: any). `used`: (field, plan name) of every `faults` value the campaign sets."""
    errors: list[InputError] = []
    allowed = [NO_FAULT, *plans]
    if NO_FAULT in plans:
        errors.append(InputError(source, f"faults.{NO_FAULT}", f"{NO_FAULT!r} means no fault; name the plan otherwise"))
    for field, name in used:
        if name not in allowed:
            errors.append(InputError(source, field, f"unknown fault plan {name!r}", allowed))
    for name, faults in plans.items():
        if not faults:
            errors.append(InputError(source, f"faults.{name}", "empty: a plan has at least one fault (the run "
                                     f"without faults is {NO_FAULT!r})"))
        for i, fault in enumerate(faults):
            where = f"faults.{name}[{i}]"
            if fault.at_s >= duration_s:
                errors.append(InputError(source, f"{where}.at_s", f"{fault.at_s:g} s is past the workload "
                                         f"(workload.duration_s {duration_s:g})", [f"0..{duration_s:g} (exclusive)"]))
            elif fault.end_s > duration_s:
                errors.append(InputError(source, f"{where}.duration_s", f"the fault ends at {fault.end_s:g} s, past "
                                         f"the workload (workload.duration_s {duration_s:g}); its recovery could not "
                                         "be measured", [f"0..{duration_s - fault.at_s:g}"]))
            if supported is None:
                errors.append(InputError(source, f"{where}.kind", f"lab {lab}: the faults a bench can inject are not "
                                         "known before a worker takes the run; name the bench's inventory"))
            elif fault.kind not in supported:
                errors.append(InputError(source, f"{where}.kind", f"lab {lab} cannot inject {fault.kind}",
                                         sorted(supported) or ["(none: this lab injects no faults)"]))
            elif fault.kind == "ue_pause" and fault.duration_s > UE_PAUSE_MAX_S:
                errors.append(InputError(source, f"{where}.duration_s", f"a {fault.duration_s:g} s ue_pause: the "
                                         "controller declares an agent silent for 5 s lost and its workload fails",
                                         [f"0..{UE_PAUSE_MAX_S:g}"]))
            elif fault.kind == "core_daemon" and daemons is not None and fault.daemon not in daemons:
                errors.append(InputError(source, f"{where}.daemon", f"lab {lab} cannot kill {fault.daemon}",
                                         sorted(daemons)))
            for j, other in enumerate(faults[:i]):
                if other.box() == fault.box() and fault.at_s < other.end_s and other.at_s < fault.end_s:
                    errors.append(InputError(source, f"{where}.at_s", f"overlaps faults.{name}[{j}] on the "
                                             f"{fault.box()} ({other.at_s:g}..{other.end_s:g} s); one fault per box "
                                             "at a time"))
    return errors


class FaultPlayer:
    """Plays a run's faults on a thread, timed from the workload's start `t0` (wall clock): `apply(i, active)`
    starts or ends fault i and returns what the box replied. `finish()` ends every fault still active (also
    when the workload failed) and returns the log: per fault, when it was asked and applied."""

    def __init__(self, faults: list[FaultSpec], apply: Callable[[int, bool], dict[str, Any]], t0: float):
        self.faults, self.apply, self.t0 = faults, apply, t0
        self.log: list[dict[str, Any]] = []
        self.active: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._play, name="faults", daemon=True)

    def start(self) -> FaultPlayer:
        self._thread.start()
        return self

    def _step(self, i: int, active: bool, planned_s: float) -> None:
        with self._lock:
            if active == (i in self.active):
                return
            asked = time.time()
            try:
                reply = self.apply(i, active)
            except Exception as exc:  # noqa: BLE001 - any failure of the box is the run's: it is reported
                reply = {"error": f"{type(exc).__name__}: {exc}"}
                self.errors.append(f"fault {i} ({self.faults[i].kind}) {'start' if active else 'end'}: "
                                   f"{reply['error']}")
            done = time.time()
            (self.active.add if active else self.active.discard)(i)
            self.log.append({"fault": i, "kind": self.faults[i].kind, "action": "start" if active else "end",
                             "planned_s": planned_s, "asked_s": asked - self.t0, "applied_s": done - self.t0,
                             "reply": reply})

    def _play(self) -> None:
        steps = sorted([(f.at_s, 1, i, True) for i, f in enumerate(self.faults)]
                       + [(f.end_s, 0, i, False) for i, f in enumerate(self.faults)])
        for at, _, i, active in steps:
            if self._stop.wait(max(0.0, self.t0 + at - time.time())):
                return
            self._step(i, active, at)

    def finish(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(timeout=30)
        for i in sorted(self.active):
            self._step(i, False, self.faults[i].end_s)
        return self.log


# ---- recovery, from the lab's own events -------------------------------------------------------------------

def _event_lines(path: Path) -> list[dict[str, Any]]:
    """The JSON objects naming an `event`, one per line of a log (other lines and broken ones left out)."""
    events = []
    for line in (path.read_text(errors="replace").splitlines() if path.is_file() else []):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("event"), str):
            events.append(row)
    return events


def read_cell_events(cell_log: Path) -> list[dict[str, Any]]:
    """The virtual cell's events (one JSON object per line of its log with an `event` and a `tti`)."""
    return [row for row in _event_lines(cell_log) if isinstance(row.get("tti"), int)]


def read_lab_events(path: Path) -> list[dict[str, Any]]:
    """A lab's wall-clock events (srsran-zmq's lab_events.jsonl: an `event` and its `t_s` per line), each with a
    `tti` in ms since the epoch, so that they read like the cell's."""
    return [row | {"tti": round(row["t_s"] * 1000)} for row in _event_lines(path)
            if isinstance(row.get("t_s"), (int, float)) and not isinstance(row["t_s"], bool)
            and math.isfinite(row["t_s"])]


REATTACH_EVENTS = ("reest_complete", "connect_complete")


#: the lab's own events that open and close a fault's window (the virtual cell's)
WINDOW_EVENTS = {"s1_cut": ("s1_down", "s1_up"), "sgi_cut": ("sgi_down", "sgi_up"),
                 "enb_restart": ("enb_down", "enb_up"), "ue_pause": ("ue_host_down", "ue_host_up")}


def _fault_window(fault: FaultSpec, index: int, events: list[dict[str, Any]], t_of: Callable[[int], float],
                  played: list[dict[str, Any]], max_db: float | None,
                  events_from: str) -> tuple[float | None, float | None, str]:
    """When the fault started and ended on the run's timeline: the lab's own events (the attenuation the cell
    applied, its S1 or SGi path, eNB or UE host going down and up), else the injector's reply times."""
    asked = {row["action"]: row for row in played if row["fault"] == index}
    since = asked["start"]["asked_s"] - 0.5 if "start" in asked else None
    start = end = None
    if fault.kind == "radio_outage" and max_db is not None:
        for ev in events:
            if ev.get("event") != "attenuation" or ev.get("ue") != fault.ue:
                continue
            t = t_of(ev["tti"])
            if start is None and ev.get("attenuation_db", 0) >= max_db - 0.5 and (since is None or t >= since):
                start = t
            elif start is not None and ev.get("attenuation_db", max_db) < max_db - 0.5:
                end = t
                break
    elif fault.kind in WINDOW_EVENTS:
        down, up = WINDOW_EVENTS[fault.kind]
        for ev in events:
            if fault.kind == "ue_pause" and ev.get("ue") != fault.ue:
                continue
            t = t_of(ev["tti"])
            if ev.get("event") == down and start is None and (since is None or t >= since):
                start = t
            elif ev.get("event") == up and start is not None:
                end = t
                break
    if start is not None:
        return start, end, events_from
    return (asked["start"]["applied_s"] if "start" in asked else None,
            asked["end"]["applied_s"] if "end" in asked else None, "injector")


def recovery_metrics(faults: list[FaultSpec], played: list[dict[str, Any]], events: list[dict[str, Any]],
                     delivered: tuple[np.ndarray, np.ndarray] | None, drops: tuple[np.ndarray, np.ndarray] | None,
                     t_of: Callable[[int], float], span_s: float, max_db: float | None,
                     events_from: str = "cell") -> list[dict[str, Any]]:
    """Per fault, on the run's timeline (s from the workload's start): start, end, the radio link failure and
    the re-attach (the RRC events of `events_from`: the virtual cell's, or srsue's on srsran-zmq), when
    throughput came back to 90 % of its pre-fault level, the bytes the cell dropped from the fault's start to
    then, the longest stall of the UE's downlink. `delivered`/`drops`: (t_s, bytes) per TTI of the faulted UE
    (the cell's TTI log)."""
    out = []
    for i, fault in enumerate(faults):
        start, end, source = _fault_window(fault, i, events, t_of, played, max_db, events_from)
        row: dict[str, Any] = {"fault": i, "kind": fault.kind, "ue": fault.ue, "planned_at_s": fault.at_s,
                               "planned_duration_s": fault.duration_s, "start_s": start, "end_s": end,
                               "times_from": source}
        if fault.daemon:
            row["daemon"] = fault.daemon
        if start is None:
            out.append(row)
            continue
        mine = [ev for ev in events if ev.get("ue") == fault.ue and t_of(ev["tti"]) >= start - 0.01]
        rlf = next((t_of(ev["tti"]) for ev in mine if ev["event"] == "rlf"), None)
        row["rlf_s"] = rlf
        row["out_of_sync_s"] = next((t_of(ev["tti"]) for ev in mine if ev["event"] == "t310_start"), None)
        if rlf is not None:
            back = next((ev for ev in mine if ev["event"] in REATTACH_EVENTS and t_of(ev["tti"]) >= rlf), None)
            row["reattach_s"] = t_of(back["tti"]) if back else None
            row["reattach_by"] = back["event"].split("_")[0] if back else None
            row["reattach_after_end_s"] = (row["reattach_s"] - end) if back and end is not None else None
        if delivered is not None:
            row |= _throughput_recovery(delivered, drops, start, end if end is not None else start, span_s)
        out.append(row)
    return out


def rate_back(t: np.ndarray, b: np.ndarray, start: float, end: float, span_s: float) -> tuple[float | None,
                                                                                              float | None]:
    """(the pre-fault rate in bit/s, the first BIN_S bin from the fault's end from which three bins carry
    RECOVERED_SHARE of it, s from the workload's start) of bytes `b` at times `t`; None where there is none."""
    edges = np.arange(0.0, span_s + BIN_S / 2, BIN_S)
    sums, _ = np.histogram(t, bins=edges, weights=b)
    rate = sums * 8 / BIN_S
    centers = edges[:-1]
    pre = (centers >= max(0.3, start - PRE_WINDOW_S)) & (centers + BIN_S <= start)
    pre_bps = float(rate[pre].mean()) if pre.any() else None
    if not pre_bps:
        return pre_bps, None
    target = RECOVERED_SHARE * pre_bps
    for k in np.nonzero(centers >= end - 1e-9)[0]:
        window = rate[k:k + 3]
        if len(window) == 3 and window.mean() >= target:
            return pre_bps, float(centers[k])
    return pre_bps, None


def _throughput_recovery(delivered: tuple[np.ndarray, np.ndarray], drops: tuple[np.ndarray, np.ndarray] | None,
                         start: float, end: float, span_s: float) -> dict[str, Any]:
    t, b = delivered
    pre_bps, recovered = rate_back(t, b, start, end, span_s)
    row: dict[str, Any] = {"pre_fault_bps": pre_bps, "throughput_back_s": recovered}
    row["recovery_s"] = recovered - end if recovered is not None else None
    row["disruption_s"] = recovered - start if recovered is not None else None
    until = recovered if recovered is not None else span_s
    if drops is not None:
        dt, db = drops
        row["lost_bytes"] = int(db[(dt >= start) & (dt < until)].sum())
    sent = t[(b > 0) & (t >= start - 0.5) & (t <= span_s)]
    gaps = np.diff(np.concatenate([[start], sent[sent >= start], [until]])) if sent.size else np.array([until - start])
    row["longest_stall_s"] = float(gaps.max()) if gaps.size else None
    return row


def not_recovered(rows: list[dict[str, Any]], final_state: dict[str, Any], span_s: float | None = None) -> str | None:
    """Why the lab did not recover from a fault within the run (None when it did): the UE still out of
    connected mode, a path still down, a radio link failure with no re-attach before the workload's end
    (`span_s`), no fault end seen. Throughput not back is reported, not a failure (TCP's timers, not the lab)."""
    problems = []
    for row in rows:
        name = f"fault {row['fault']} ({row['kind']})"
        if row["start_s"] is not None and row["end_s"] is None:
            problems.append(f"{name}: never ended")
        for ue_row in [row, *row.get("other_ues", [])]:
            who = f"{name}, UE {ue_row['ue']}" if row.get("other_ues") else name
            if ue_row.get("rlf_s") is not None and ue_row.get("reattach_s") is None:
                problems.append(f"{who}: radio link failure at {ue_row['rlf_s']:.2f} s and no re-attach by the end")
            elif ue_row.get("rlf_s") is not None and span_s is not None and ue_row["reattach_s"] > span_s:
                problems.append(f"{who}: radio link failure at {ue_row['rlf_s']:.2f} s, re-attached only at "
                                f"{ue_row['reattach_s']:.2f} s, after the workload's end ({span_s:g} s)")
    for ue, state in final_state.get("rrc_state", {}).items():
        if state != "connected":
            problems.append(f"UE {ue} ended the run in RRC state {state}")
    for ue, reaches in final_state.get("ue_reaches_server", {}).items():
        if reaches is False:
            problems.append(f"UE {ue} did not come back: no ping to the server at the end")
    for ue in final_state.get("ue_paused", []):
        problems.append(f"UE {ue}'s host was still paused at the end")
    if final_state.get("enb_up") is False:
        problems.append("the eNB was still down at the end")
    for path in ("s1", "sgi"):
        if final_state.get(f"{path}_up") is False:
            problems.append(f"the {path.upper() if path == 's1' else 'SGi'} path was still down at the end")
    return "; ".join(problems) or None


class FaultNotRecovered(CellabError):
    """A fault the lab did not recover from within the run: the run fails with the measured state."""
