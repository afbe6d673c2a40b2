"""A run's faults (issue 28, 41): the plan its `faults` parameter names, each fault started and ended through the box
that owns it, and the recovery figures after the workload from the lab's own records: the virtual cell's events and
TTI log, srsran-zmq's lab events, or on a lab inventory its agents' telemetry and each UE's own flow."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cellab.bus import AgentLost, AgentTimeout, OperationError
from cellab.campaign.model import Campaign
from cellab.contracts.attenuator import AttenuatorClient
from cellab.errors import CellabError
from cellab.faults.agent_events import flow_bytes, write_agent_events
from cellab.faults.player import FaultPlayer
from cellab.faults.recovery import not_recovered
from cellab.faults.spec import NO_FAULT, FaultSpec, FaultStep
from cellab.faults.timeline import fault_events
from cellab.records import PlannedRun, write_json
from cellab.run.session import LabSession
from cellab.run.workloads import RunUE


def run_faults(campaign: Campaign, run: PlannedRun, ues: list[RunUE]) -> list[FaultSpec]:
    """The run's fault plan (the `faults` parameter names one of the campaign's), checked against its UEs."""
    name = run.params.get("faults", NO_FAULT)
    if name != NO_FAULT and name not in campaign.faults:  # validation refuses this; a hand-made plan could not
        raise CellabError(f"run {run.run_id}: fault plan {name!r} is not in the campaign's faults")
    faults = campaign.faults.get(name, [])
    for fault in faults:
        if fault.kind in ("radio_outage", "ue_pause") and fault.ue >= len(ues):
            raise CellabError(f"fault {fault.kind} on UE {fault.ue}: run {run.run_id} has {len(ues)} UE(s)")
    return faults


def fault_apply(session: LabSession, campaign: Campaign, faults: list[FaultSpec], ues: list[RunUE],
                attenuation: dict[int, float]) -> Callable[[int, bool], dict[str, Any]]:
    """How each fault starts and ends, through whoever owns its box: a radio outage through the attenuator
    agent (the channel to the attenuator's maximum, then back to the run's value); the others through the
    lab's typed `inject_fault`."""
    def apply(i: int, active: bool) -> dict[str, Any]:
        fault = faults[i]
        if fault.kind == "radio_outage":
            ue = ues[fault.ue]
            if session.attenuator is None or ue.channel is None:
                raise CellabError(f"radio_outage on UE {ue.name}: no attenuator channel in front of it")
            config = session.attenuator.config
            during = fault.db if fault.db is not None else config.max_db  # an outage, or a deep fade
            value = during if active else attenuation.get(ue.channel, config.min_db)
            return AttenuatorClient(session.controller, session.roles["attenuator"], campaign.timeouts.request_s).set(
                session.attenuator.name, ue.channel, value).model_dump()
        ue = ues[fault.ue].lab_index if fault.ue < len(ues) else fault.ue  # the lab's index of the run's UE
        return session.lab.inject_fault(FaultStep(kind=fault.kind, active=active, ue=ue, daemon=fault.daemon))
    return apply


def fault_recovery(session: LabSession, campaign: Campaign, faults: list[FaultSpec], played: list[dict[str, Any]],
                   player: FaultPlayer | None, shared: dict[str, Path], cell_mark: dict[str, float], t0: float,
                   run_dir: Path, metrics: dict[str, Any], flows: dict[int, Any] | None = None) -> str | None:
    """Recovery figures per fault into the run's metrics (and faults.json); why the lab did not recover, if it
    did not (the run then fails with that state). `flows`: each UE's own received bytes (agent_fault_records)."""
    from cellab.results.metrics import fault_run_metrics

    max_db = session.attenuator.config.max_db if session.attenuator is not None else None
    rows = fault_run_metrics(faults, played, shared, cell_mark or None, t0, campaign.workload.duration_s, max_db,
                             flows)
    try:
        state = session.lab.fault_state()
    except (CellabError, AgentLost, AgentTimeout, OperationError, OSError) as exc:
        state = {"error": f"{type(exc).__name__}: {exc}"}
    metrics["faults"] = rows
    metrics["fault_marks"] = [{k: row.get(k) for k in ("kind", "start_s", "end_s", "rlf_s", "reattach_s",
                                                       "throughput_back_s")} for row in rows]
    metrics["fault_events"] = fault_events(rows)  # each UE's outage and return on the run's timeline
    first = rows[0]
    for name in ("recovery_s", "disruption_s", "reattach_after_end_s", "longest_stall_s", "lost_bytes"):
        if isinstance(first.get(name), (int, float)):
            metrics[f"fault_{name}"] = first[name]
    write_json(run_dir / "faults.json", {"plan": [f.model_dump() for f in faults], "played": played,
                                         "recovery": rows, "final_state": state})
    reasons = [*(player.errors if player else [])]
    why = not_recovered(rows, state, campaign.workload.duration_s)
    if why:
        reasons.append(why)
    return ("the lab did not recover from the run's faults: " + "; ".join(reasons)
            + f" (measured: {json.dumps(state)})") if reasons else None


def agent_fault_records(session: LabSession, ues: list[RunUE], per_ue: dict[str, dict[str, Path]],
                        offsets: dict[str, dict[str, Any]], t0: float, run_dir: Path,
                        shared: dict[str, Path]) -> dict[int, Any]:
    """A lab without a cell of its own (an inventory): the faults' events from its agents' telemetry into
    `lab_events.jsonl` (shared `lab-events`), and each UE's received bytes from its probe's per-millisecond log
    (its lab index -> (t_s, bytes) on the workload's time axis)."""
    if "lab-events" not in shared:
        enb = getattr(getattr(session.lab, "enb", None), "agent", None)  # the inventory's eNB agent, if any
        core = getattr(getattr(session.lab, "core", None), "agent", None)  # and its core agent
        shared["lab-events"] = write_agent_events(run_dir / "telemetry", {ue.agent: ue.lab_index for ue in ues},
                                                  enb, run_dir / "lab_events.jsonl", core)
    flows = {}
    for ue in ues:
        ms_log = per_ue.get(ue.name, {}).get("probe-ms")
        found = flow_bytes(ms_log, t0, offsets.get(ue.agent, {}).get("offset_s", 0.0)) if ms_log else None
        if found is not None:
            flows[ue.lab_index] = found
    return flows
