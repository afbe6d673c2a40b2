"""A fault's recovery, from the lab's own events (the virtual cell's RRC events and TTI log, srsran-zmq's lab events):
radio link failure, re-attach, throughput back, the longest stall, bytes lost; a fault not recovered from fails the run."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cellab.contracts.core import agent_daemon
from cellab.errors import CellabError
from cellab.faults.spec import UE_FAULT_KINDS, FaultSpec

RECOVERED_SHARE = 0.9
BIN_S = 0.1
PRE_WINDOW_S = 1.0  # the pre-fault level: the mean over this long before the fault (after the first 0.3 s)


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


#: the lab's own events that open and close a fault's window (the virtual cell's; an inventory's core agent's)
WINDOW_EVENTS = {"s1_cut": ("s1_down", "s1_up"), "sgi_cut": ("sgi_down", "sgi_up"),
                 "enb_restart": ("enb_down", "enb_up"), "ue_pause": ("ue_host_down", "ue_host_up"),
                 "core_daemon": ("core_daemon_killed", "core_daemon_started")}


def _not_its_event(fault: FaultSpec, ev: dict[str, Any]) -> bool:
    """An event of another UE (ue_pause) or another daemon (core_daemon, by the core agent's name for it)."""
    if fault.kind == "ue_pause":
        return ev.get("ue") != fault.ue
    return fault.kind == "core_daemon" and fault.daemon is not None and ev.get("daemon") != agent_daemon(fault.daemon)


def _fault_window(fault: FaultSpec, index: int, events: list[dict[str, Any]], t_of: Callable[[int], float],
                  played: list[dict[str, Any]], max_db: float | None, events_from: str,
                  not_before_s: float | None = None) -> tuple[float | None, float | None, str]:
    """When the fault started and ended on the run's timeline: the lab's own events (the attenuation the cell
    applied, its S1 or SGi path, eNB or UE host going down and up), else the injector's reply times. The lab's
    events are searched from `not_before_s` on (the end of the fault before it on the same box: not its window)."""
    asked = {row["action"]: row for row in played if row["fault"] == index}
    since = asked["start"]["asked_s"] - 0.5 if "start" in asked else None
    if not_before_s is not None:
        since = not_before_s if since is None else max(since, not_before_s)
    start = end = None
    if fault.kind == "radio_outage" and max_db is not None:
        max_db = fault.db if fault.db is not None else max_db  # a deep fade: its own level
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
            if _not_its_event(fault, ev):
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


def search_until(faults: list[FaultSpec], windows: list[tuple[float | None, float | None, str]],
                 i: int) -> tuple[float | None, int | None]:
    """Where fault i's recovery search for its UE stops: the start of the first later fault that hits that UE (one
    of the whole cell, or one of that UE's own) and starts once fault i is over (a fault that starts while i is
    still on cannot be told apart from it), so that fault i's row never takes the next fault's radio link failure,
    re-attach or outage. (that start, that fault's index), or (None, None) when no later fault hits the UE."""
    start, end = windows[i][0], windows[i][1]
    if start is None:
        return None, None
    since = end if end is not None else start
    later = [(windows[j][0], j) for j, other in enumerate(faults)
             if j != i and windows[j][0] is not None and windows[j][0] > start and windows[j][0] >= since
             and (other.kind not in UE_FAULT_KINDS or other.ue == faults[i].ue)]
    return min(later) if later else (None, None)


def recovery_metrics(faults: list[FaultSpec], played: list[dict[str, Any]], events: list[dict[str, Any]],
                     delivered: tuple[np.ndarray, np.ndarray] | None, drops: tuple[np.ndarray, np.ndarray] | None,
                     t_of: Callable[[int], float], span_s: float, max_db: float | None,
                     events_from: str = "cell", which: list[int] | None = None) -> list[dict[str, Any]]:
    """Per fault (`which`: these of the plan's, by index; default all), on the run's timeline (s from the
    workload's start): start, end, the radio link failure and the re-attach (the RRC events of `events_from`: the
    virtual cell's, or srsue's on srsran-zmq), when throughput came back to 90 % of its pre-fault level, the bytes
    the cell dropped from the fault's start to then, the longest stall of the UE's downlink, all searched only up
    to the next fault that hits the UE (`search_until`; `searched_until_s`, `cut_by_fault`). `delivered`/`drops`:
    (t_s, bytes) per TTI of the faulted UE (the cell's TTI log)."""
    windows: list[tuple[float | None, float | None, str]] = [(None, None, "injector")] * len(faults)
    for i in sorted(range(len(faults)), key=lambda k: faults[k].at_s):  # each box's faults in time order
        ends = [windows[j][1] for j, f in enumerate(faults)
                if f.at_s < faults[i].at_s and f.box() == faults[i].box() and windows[j][1] is not None]
        windows[i] = _fault_window(faults[i], i, events, t_of, played, max_db, events_from, max(ends, default=None))
    out = []
    for i in (range(len(faults)) if which is None else which):
        fault, (start, end, source) = faults[i], windows[i]
        row: dict[str, Any] = {"fault": i, "kind": fault.kind, "ue": fault.ue, "planned_at_s": fault.at_s,
                               "planned_duration_s": fault.duration_s, "start_s": start, "end_s": end,
                               "times_from": source}
        if fault.daemon:
            row["daemon"] = fault.daemon
        if start is None:
            out.append(row)
            continue
        until, cut_by = search_until(faults, windows, i)
        if until is not None:
            row |= {"searched_until_s": until, "cut_by_fault": cut_by}
        until = until if until is not None else math.inf
        # on the injector's times the UE's events count from when the fault was asked: its box replies once done (a
        # real srsenb's graceful stop took 2.2 s, and the eNB's reports of its UEs ended as it began)
        asked_s = next((p["asked_s"] for p in played if p["fault"] == i and p["action"] == "start"), start)
        since = min(start, asked_s) if source == "injector" else start
        in_reach = [ev for ev in events if t_of(ev["tti"]) < until]
        mine = [ev for ev in in_reach if ev.get("ue") == fault.ue and t_of(ev["tti"]) >= since - 0.01]
        rlf_ev = next((ev for ev in mine if ev["event"] == "rlf"), None)
        rlf = t_of(rlf_ev["tti"]) if rlf_ev else None
        row["rlf_s"] = rlf
        if rlf_ev and "ue_mapped_by" in rlf_ev:  # an eNB's report of RNTIs: how the RNTI was taken to be this UE
            row["ue_mapped_by"] = rlf_ev["ue_mapped_by"]
        row["out_of_sync_s"] = next((t_of(ev["tti"]) for ev in mine if ev["event"] == "t310_start"), None)
        if rlf is not None:
            back = next((ev for ev in mine if ev["event"] in REATTACH_EVENTS and t_of(ev["tti"]) >= rlf), None)
            row["reattach_s"] = t_of(back["tti"]) if back else None
            row["reattach_by"] = back["event"].split("_")[0] if back else None
            row["reattach_after_end_s"] = (row["reattach_s"] - end) if back and end is not None else None
        row |= _core_recovery(in_reach, mine, start, end, t_of)
        if fault.kind == "core_daemon":
            row |= _daemon_return(fault, in_reach, start, end, t_of)
        if delivered is not None:
            row |= _throughput_recovery(delivered, drops, start, end if end is not None else start,
                                        min(span_s, until))
        out.append(row)
    return out


def _core_recovery(events: list[dict[str, Any]], mine: list[dict[str, Any]], start: float, end: float | None,
                   t_of: Callable[[int], float]) -> dict[str, Any]:
    """A lab's own steps back from a restarted MME (srsran-zmq's lab events), where it logged them: S1 set up
    again (the eNB's own log), the UE attached afresh (`reattach_by` "attach": the new MME knew nothing of it, so
    this, not an RRC connection after a radio link failure on the way, is its return) and its first packet through
    the core to the server and back."""
    row: dict[str, Any] = {}
    s1 = next((t_of(ev["tti"]) for ev in events if ev.get("event") == "s1_setup" and t_of(ev["tti"]) >= start), None)
    if s1 is not None:
        row["s1_back_s"] = s1
    attached = next((t_of(ev["tti"]) for ev in mine if ev["event"] == "ue_attached"), None)
    if attached is not None:
        row |= {"reattach_s": attached, "reattach_by": "attach",
                "reattach_after_end_s": attached - end if end is not None else None}
    traffic = next((t_of(ev["tti"]) for ev in mine if ev["event"] == "ue_reaches_server"), None)
    if traffic is not None:
        row["traffic_back_s"] = traffic
    return row


def _daemon_return(fault: FaultSpec, events: list[dict[str, Any]], start: float, end: float | None,
                   t_of: Callable[[int], float]) -> dict[str, Any]:
    """A killed core daemon's own return as the core agent saw it (an inventory's `core_daemon` telemetry): the pid
    it killed, the new process started (`daemon_restarted_s`, its pid) and listening again where it must
    (`daemon_listening_s`; `daemon_back_after_end_s` from the fault's end)."""
    mine = [ev for ev in events if not _not_its_event(fault, ev) and t_of(ev["tti"]) >= start - 0.01]
    killed = next((ev for ev in mine if ev["event"] == "core_daemon_killed"), None)
    started = next((ev for ev in mine if ev["event"] == "core_daemon_started" and ev is not killed
                    and (end is None or t_of(ev["tti"]) >= end - 0.01)), None)
    if killed is None and started is None:
        return {}
    row: dict[str, Any] = {"daemon_pid_killed": killed.get("pid") if killed else None,
                           "daemon_restarted_s": t_of(started["tti"]) if started else None,
                           "daemon_pid_restarted": started.get("pid") if started else None}
    listen = next((ev for ev in mine if ev["event"] == "core_daemon_listening" and started is not None
                   and ev.get("pid") == started.get("pid")), None)
    row["daemon_listening_s"] = t_of(listen["tti"]) if listen else None
    row["daemon_back_after_end_s"] = (row["daemon_listening_s"] - end
                                      if listen is not None and end is not None else None)
    return row


#: the times of a row that also read on the stack's clock (`*_stack_s`: stack seconds from the fault's start)
STACK_TIMED = ("end_s", "s1_back_s", "reattach_s", "traffic_back_s")


def on_stack_clock(row: dict[str, Any], stack_s_of: Callable[[float], float]) -> dict[str, Any]:
    """The row's times from the fault's start again in the stack's own seconds (`stack_s_of`: a time on the
    workload's axis -> stack s; srsRAN over ZMQ runs slower than real time, and its timers count stack time)."""
    if not isinstance(row.get("start_s"), (int, float)):
        return {}
    start = stack_s_of(row["start_s"])
    return {f"{name[:-2]}_stack_s": round(stack_s_of(row[name]) - start, 3) for name in STACK_TIMED
            if isinstance(row.get(name), (int, float))}


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
    after = t[(b > 0) & (t >= end) & (t < span_s)]  # the user plane restored: the first byte again after it
    row["user_plane_restored_s"] = float(after.min()) if after.size else None
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
            if ue_row.get("rlf_s") is not None and ue_row.get("reattach_s") is None and "cut_by_fault" in ue_row:
                continue  # not back before the next fault hit it: that fault's row and the final state say the rest
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
    problems += [f"the core: {problem}" for problem in final_state.get("core_problems", [])]
    if final_state.get("enb_up") is False:
        problems.append("the eNB was still down at the end")
    for path in ("s1", "sgi"):
        if final_state.get(f"{path}_up") is False:
            problems.append(f"the {path.upper() if path == 's1' else 'SGi'} path was still down at the end")
    return "; ".join(problems) or None


class FaultNotRecovered(CellabError):
    """A fault the lab did not recover from within the run: the run fails with the measured state."""
