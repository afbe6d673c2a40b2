"""A lab inventory's fault events from its agents' own telemetry (issue 41), in the wall-clock lab-events format the
recovery reads (`read_lab_events`: an `event`, its `t_s`, the UE):

- a UE agent's `ue_state` (the phone's registration through the Android agent, a virtual UE's RRC state on its cell):
  `out` is the UE's radio link lost (`rlf`) and the next `in` its re-attach (`connect_complete`); `paused` and the
  next `in` are its host down and up (`ue_host_down`, `ue_host_up`);
- the eNB agent's per-UE reports (`ue_metrics`, one per UE per report period): a UE the eNB stopped reporting for
  more than ENB_GAP_S lost its link when its next report was due (`rlf`) and came back with the first report after
  (`connect_complete`). srsenb's reports name a UE by its RNTI only (a returning UE gets a new one), so each event
  says how its UE was found (`ue_mapped_by`): `ue_telemetry` where the UE's own agent named that RNTI (a sample
  with an `rnti`, as srsue's metrics have), else `report_order` (the k-th RNTI of a report period among those no
  UE named is the k-th UE without a named one: a guess, said as such; the Android and the virtual cell's UE agents
  know no RNTI);

- the core agent's `core_daemon` steps (a daemon `killed`, `started`, `listening` where it must, with its pid):
  `core_daemon_killed`, `core_daemon_started`, `core_daemon_listening`, naming the daemon as the agent does.

Each event names its source (`by`). The UE's own flow (the probe's per-millisecond log) gives the throughput figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

#: the eNB reports each UE every period (srsenb: 1 s by default): a UE unreported this long is gone from the eNB
ENB_GAP_S = 2.5


def _lines(path: Path) -> list[Any]:
    """The JSON values of a telemetry file's lines (broken ones left out)."""
    out = []
    for line in (path.read_text(errors="replace").splitlines() if path.is_file() else []):
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def _rows(path: Path, topic: str) -> list[dict[str, Any]]:
    out = [row for row in _lines(path)
           if isinstance(row, dict) and row.get("topic") == topic and isinstance(row.get("t_s"), (int, float))]
    return sorted(out, key=lambda r: r["t_s"])


def ue_state_events(telemetry: Path, agent: str, ue: int) -> list[dict[str, Any]]:
    """The events of UE `ue` from its agent's `ue_state` samples."""
    events, before = [], "in"
    for row in _rows(telemetry / f"{agent}.jsonl", "ue_state"):
        state = row.get("state")
        if state == before or state not in ("in", "out", "paused"):
            continue
        name = {"out": "rlf", "paused": "ue_host_down"}.get(state) or (
            "connect_complete" if before == "out" else "ue_host_up")
        events.append({"t_s": row["t_s"], "event": name, "ue": ue, "by": f"{agent} ue_state {state}"})
        before = state
    return events


def named_rntis(telemetry: Path, ue_agents: dict[str, int]) -> dict[int, int]:
    """RNTI -> UE, from the UE agents' own samples that name their RNTI."""
    return {row["rnti"]: ue for agent, ue in ue_agents.items() for row in _lines(telemetry / f"{agent}.jsonl")
            if isinstance(row, dict) and isinstance(row.get("rnti"), int) and not isinstance(row["rnti"], bool)}


def enb_report_events(telemetry: Path, agent: str, n_ues: int,
                      rnti_ues: dict[int, int] | None = None) -> list[dict[str, Any]]:
    """Per UE, when the eNB stopped and resumed reporting it: a UE's RNTIs are those `rnti_ues` (named_rntis) gives
    it; the other UEs, in order, take the other RNTIs by their count in each report period."""
    times: dict[int, set[float]] = {}
    for row in _rows(telemetry / f"{agent}.jsonl", "ue_metrics"):
        if isinstance(row.get("rnti"), int):
            times.setdefault(row["rnti"], set()).add(float(row["t_s"]))
    named = {rnti: ue for rnti, ue in (rnti_ues or {}).items() if ue < n_ues}
    unnamed_ues = [ue for ue in range(n_ues) if ue not in named.values()]
    period_starts = sorted({t for ts in times.values() for t in ts})
    events: list[dict[str, Any]] = []
    for ue in range(n_ues):
        if ue in unnamed_ues:  # a UE back under a new RNTI keeps its place among the unnamed ones
            rank, how = unnamed_ues.index(ue), "report_order"
            seen = [t for t in period_starts if sum(1 for r, ts in times.items() if r not in named and t in ts) > rank]
        else:
            how = "ue_telemetry"
            seen = sorted({t for rnti, ts in times.items() if named.get(rnti) == ue for t in ts})
        steps = np.diff(seen)
        period_s = float(np.median(steps[steps > 0])) if (steps > 0).any() else 0.0
        for last, first in zip(seen, seen[1:], strict=False):
            if first - last > ENB_GAP_S:  # lost when the next report was due and did not come
                events.append({"t_s": last + period_s, "event": "rlf", "ue": ue, "by": f"{agent} reports stopped",
                               "ue_mapped_by": how})
                events.append({"t_s": first, "event": "connect_complete", "ue": ue, "by": f"{agent} reports back",
                               "ue_mapped_by": how})
    return events


def core_daemon_events(telemetry: Path, agent: str) -> list[dict[str, Any]]:
    """The core agent's daemon steps, as it said them."""
    return [{"t_s": row["t_s"], "event": f"core_daemon_{row['state']}", "daemon": row.get("daemon"),
             "pid": row.get("pid"), "by": f"{agent} core_daemon {row['state']}"}
            for row in _rows(telemetry / f"{agent}.jsonl", "core_daemon")
            if row.get("state") in ("killed", "started", "listening")]


def write_agent_events(telemetry: Path, ue_agents: dict[str, int], enb_agent: str | None, out: Path,
                       core_agent: str | None = None) -> Path:
    """The lab events of a run on an inventory (UE agents by their UE index; the eNB and core agents, if any)
    into `out`."""
    events = [ev for agent, ue in ue_agents.items() for ev in ue_state_events(telemetry, agent, ue)]
    if enb_agent is not None:
        events += enb_report_events(telemetry, enb_agent, len(ue_agents), named_rntis(telemetry, ue_agents))
    if core_agent is not None:
        events += core_daemon_events(telemetry, core_agent)
    out.write_text("".join(json.dumps(ev) + "\n" for ev in sorted(events, key=lambda e: e["t_s"])))
    return out


def flow_bytes(ms_log: Path, t0_s: float, offset_s: float) -> tuple[np.ndarray, np.ndarray] | None:
    """(t_s from the workload's start, bytes) per millisecond of a UE's probe log (its clock, `offset_s` from the
    controller's); None without one."""
    if not ms_log.is_file():
        return None
    data = np.atleast_1d(np.genfromtxt(ms_log, delimiter=",", names=True, usecols=("ms", "bytes"), dtype=float))
    if data.size == 0:
        return None
    return (data["ms"] - (offset_s + t0_s) * 1000.0) / 1000.0, data["bytes"]
