"""One run as a pure step: (an open lab instance, the campaign, a planned run) -> a run record and its folder.

    configure → measure clocks → capture, schedule, workload → stop → collect → metrics → manifest

Nothing here keeps state between runs except what the lab instance itself holds (its `LabSession`: agents,
registered modules, the schedules built from drive logs); the caller decides where the run folder lives and
who writes the record to the store. The in-process runner and a Dask worker call the same `execute_run`.
"""

from __future__ import annotations

import shutil
import socket
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from cellab.bus import AgentLost, AgentTimeout, OperationError
from cellab.campaign.model import BPF_CCS, LAB_FACTOR, Campaign
from cellab.contracts.attenuator import AttenuatorClient, PlayParams
from cellab.contracts.server import SENDER_PORT, CaptureParams, ServerClient, check_param
from cellab.contracts.ue import UEClient
from cellab.errors import CellabError
from cellab.faults.player import FaultPlayer
from cellab.faults.recovery import FaultNotRecovered
from cellab.records import PlannedRun, write_json
from cellab.labs.clock import run_clock_timing
from cellab.results.metrics import (
    RunContext,
    multi_ue_metrics,
    pcap_run_metrics,
    probe_run_metrics,
    run_metrics,
    telemetry_timeline,
)
from cellab.results.provenance import run_provenance, software_versions
from cellab.run.first_sample import run_start
from cellab.run.fault_steps import agent_fault_records, fault_apply, fault_recovery, run_faults
from cellab.run.schedules import Schedules
from cellab.run.session import LabSession
from cellab.run.telemetry import host_busy_pct, host_cpu_times
from cellab.results.workload_timelines import iperf3_timeline
from cellab.run.workloads import WORKLOADS, RunUE, WorkloadTarget, clean_up, port_range


class LabTimingError(CellabError):
    """The embedded lab's emulation fell behind real time during the run."""


RUN_ERRORS = (CellabError, AgentLost, AgentTimeout, OperationError, OSError)


@dataclass
class RunRecord:
    """What a run gives back to whoever stores it: status, metrics and where it ran."""

    run_id: str
    status: str  # ok | failed | aborted
    attempts: int = 0
    error: str | None = None
    metrics: dict[str, Any] | None = None
    ue_metrics: dict[str, dict[str, Any]] | None = None
    placement: dict[str, Any] = field(default_factory=dict)
    started_at: float = 0.0
    finished_at: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def placement(session: LabSession, **extra: Any) -> dict[str, Any]:
    """Where a run ran: the host, the lab (kind or inventory) and its instance prefix, plus the caller's (a
    worker's name and slot)."""
    prefix = getattr(session.lab, "prefix", None)
    return {"host": socket.gethostname(), "lab": session.lab_name, **({"instance": prefix} if prefix else {}),
            **extra}


def execute_run(session: LabSession, campaign: Campaign, run: PlannedRun, run_dir: Path, results_root: Path,
                where: dict[str, Any] | None = None, log: Callable[[str], None] = print) -> RunRecord:
    """Every attempt of one run (the campaign's retry rule), each in a clean `run_dir`. Ctrl-C propagates
    after the record says aborted (the caller stores it)."""
    retry = campaign.retry
    record = RunRecord(run.run_id, "failed", placement=placement(session, **(where or {})), started_at=time.time())
    # invalid runs (the lab lost real time) are redone like failed ones while attempts remain (retry.max_attempts)
    for attempt in range(1, retry.max_attempts + 1):
        record.attempts = attempt
        if run_dir.exists():
            shutil.rmtree(run_dir)
        run_dir.mkdir(parents=True)
        try:
            session.ensure_agents()
            record.metrics, record.ue_metrics = _attempt(session, campaign, run, run_dir, attempt, results_root,
                                                         record.placement, log)
        except KeyboardInterrupt:
            record.status, record.error = "aborted", "interrupted by the user (Ctrl-C)"
            record.finished_at = time.time()
            raise
        except RUN_ERRORS as exc:
            error = f"{type(exc).__name__}: {exc}"
            fault = _lab_fault(session)
            if fault and fault not in error:  # the cause a workload error hides (a crashed eNB)
                error = f"{fault}; the workload saw: {error}"
            log(f"run {run.run_id} attempt {attempt}/{retry.max_attempts} failed: {error}")
            record.error = error
            # the lab lost real time: what it measured is of the host, so the run is invalid, not failed
            record.status = "invalid" if isinstance(exc, LabTimingError) else "failed"
            if session.lost_agents():  # no attempt works before it is back: the runner pauses for it
                break
            if attempt < retry.max_attempts:
                time.sleep(retry.backoff_s)
            continue
        record.status, record.error = "ok", None
        break
    record.finished_at = time.time()
    return record


def check_module_params(session: LabSession, runs: list[PlannedRun], source: Path | str) -> None:
    """Every module parameter the runs name exists and is in range, asked of the server agent's loader
    before the first run (a typo fails the campaign at once, not run by run)."""
    asked = {(m, p, v) for run in runs for m, ps in run.params.get("module_params", {}).items() for p, v in ps.items()}
    if not asked:
        return
    listing = _server(session, 20.0).list_modules()
    known = {m.name: m for m in listing.modules}
    for module, param, value in sorted(asked):
        info = known.get(module)
        check_param(info.param_ranges if info else {}, param, value, source, f"module_params.{module}.{param}",
                    info.param_steps if info else None)


def _server(session: LabSession, request_s: float) -> ServerClient:
    return ServerClient(session.controller, session.roles["server"], request_s)


def _attenuator(session: LabSession, request_s: float) -> AttenuatorClient:
    return AttenuatorClient(session.controller, session.roles["attenuator"], request_s)


def _apply_modules(session: LabSession, campaign: Campaign, run: PlannedRun, ues: list[RunUE]) -> None:
    """Register the run's BPF congestion control and every module it sets parameters of (once per lab instance;
    the server agent unloads them when the session ends), then give each registered module this run's
    parameters: the ones the run names, the defaults (read when it was loaded) for the rest, so a value
    one run set never leaks into the next."""
    server = _server(session, campaign.timeouts.request_s)
    wanted: dict[str, dict[str, float]] = run.params.get("module_params", {})
    needed = set(wanted) | ({ue.cc for ue in ues} & set(BPF_CCS))
    new = sorted(needed - session.loaded_modules)
    for name in new:
        server.load_modules([name])
        session.loaded_modules.add(name)
    if new:  # their defaults, as loaded: one listing for all of them
        for module in server.list_modules().modules:
            if module.name in new:
                loaded_values = {(module.name, p): v for p, v in module.params.items()}
                session.module_values |= loaded_values
                session.module_defaults |= loaded_values
    for (module, param), current in sorted(session.module_values.items()):  # holds registered modules only
        value = wanted.get(module, {}).get(param, session.module_defaults[(module, param)])
        if value != current:
            server.set_module_param(module, param, value)
            session.module_values[(module, param)] = value


def run_ues(session: LabSession, campaign: Campaign, run: PlannedRun) -> list[RunUE]:
    """The run's UEs: the first N of the lab's (a count), or the named list, each with the run's values
    where its own entry sets none."""
    asked = run.params.get("ues")
    available = len(session.ue_agents)
    inventory = campaign.lab.endswith((".yaml", ".yml"))
    count = ue_count(asked) if asked is not None or not inventory else available
    if count > available:
        raise CellabError(f"run {run.run_id} asks for {count} UEs; the lab has {available}")
    specs = asked if isinstance(asked, list) else [{} for _ in range(count)]
    channels = session.attenuator.ue_channels if session.attenuator is not None else ()
    lab_names = [host.name for host in session.topology.ues] if inventory else []
    out = []
    for slot, spec in enumerate(specs):
        spec = spec if isinstance(spec, dict) else spec.model_dump()
        # an inventory's UE named in the run is that device (validate refuses names it lacks); else the slot's
        index = lab_names.index(spec["name"]) if spec.get("name") in lab_names else slot
        name = spec.get("name") or (lab_names[index] if inventory else f"ue{slot}")
        out.append(RunUE(
            name=name, agent=session.ue_agents[index], slot=slot, lab_index=index,
            cc=spec.get("cc") or run.params["cc"], receiver=spec.get("receiver") or run.params.get("receiver", "none"),
            flows=spec.get("flows") or campaign.workload.flows,
            schedule=spec.get("schedule") or run.params.get("schedule", "static"),
            attenuation_db=spec.get("attenuation_db"),
            channel=channels[index] if index < len(channels) else None,
            own_schedule=spec.get("schedule") not in (None, "static")))
    return out


def _attempt(session: LabSession, campaign: Campaign, run: PlannedRun, run_dir: Path, attempt: int,
             results_root: Path, where: dict[str, Any], log: Callable[[str], None] = print,
             ) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """One attempt of a run: (the run's metrics, each UE's metrics by UE name)."""
    ctl = session.controller
    workload, timeouts = campaign.workload, campaign.timeouts
    deadline = time.monotonic() + timeouts.run_s
    started = time.time()
    ues = run_ues(session, campaign, run)
    session.lab.configure({k: v for k, v in run.params.items() if k != LAB_FACTOR})
    offsets = {name: ctl.measure_clock_offset(name).model_dump() for name in session.agents}
    role_offsets = {role: offsets[name]["offset_s"] for role, name in session.roles.items() if name in offsets}
    attenuation = _set_attenuation(session, campaign, run, ues, _schedules(session, campaign, results_root)
                                   .held_channels([(u.channel, u.schedule) for u in ues if u.schedule != "static"
                                                   and u.channel is not None]) if session.attenuator else set())
    # the first sample after the set: every channel read back, each UE's signal taken since (bounded wait)
    start_check = run_start(session, ues, attenuation, {n: o["offset_s"] for n, o in offsets.items()},
                            timeouts.request_s, log)
    server = _server(session, timeouts.request_s)
    tag = f"{run.run_id}-a{attempt}"
    _apply_modules(session, campaign, run, ues)
    capture = "pcap" in campaign.measurements
    if capture:
        first, last = port_range(workload.tool, len(ues))
        server.capture_start(CaptureParams(tag=f"{tag}-server", tcp_port=first, tcp_port_last=last))
    faults = run_faults(campaign, run, ues)
    cell_mark = session.lab.clock_mark()
    cpu_before = host_cpu_times()
    t0 = time.time()
    session.telemetry.start(run_dir, {name: o["offset_s"] for name, o in offsets.items()},
                            session.topology.extra.get("pub"), cell_mark or None)
    playing = player = None
    workload_failed = True
    try:  # a schedule refused at its start must still stop the capture
        playing = _start_schedule(session, campaign, ues, results_root)
        if faults:
            player = FaultPlayer(faults, fault_apply(session, campaign, faults, ues, attenuation), t0).start()
        per_ue = _run_workloads(session, campaign, ues, run_dir, tag, capture, deadline)
        t_end = time.time()
        host_cpu_pct = host_busy_pct(cpu_before, host_cpu_times())
        workload_failed = False
    finally:
        played = player.finish() if player else []  # every fault ended, also when the workload failed
        closed_at = time.time()
        session.telemetry.close_window(closed_at)  # later samples belong to no run
        if playing:  # a failed run leaves the safe state; a finished one the campaign's between_runs choice
            hold = not workload_failed and campaign.between_runs.attenuation != "safe"
            clean_up(workload_failed, lambda: _attenuator(session, timeouts.request_s).stop_schedule(hold=hold))
        if capture:
            clean_up(workload_failed, server.capture_stop)
        # a sample of the workload's last moments may still be on its way (srsenb reports seconds late)
        time.sleep(max(0.0, closed_at + getattr(session.lab, "telemetry_lag_s", 0.0) - time.time()))
        session.telemetry.stop()
    shared: dict[str, Path] = {}
    if playing:
        shared["attenuation-log"] = ctl.fetch_artifact(session.roles["attenuator"], playing,
                                                       run_dir / "attenuation.jsonl")
    if session.attenuator is not None:  # between_runs: what the run's channels keep until the next run's schedule
        _schedules(session, campaign, results_root).after_run(
            _attenuator(session, timeouts.request_s), {ue.channel for ue in ues if ue.channel is not None},
            shared.get("attenuation-log"))
    if capture:
        shared["pcap"] = ctl.fetch_artifact(server.agent, f"{tag}-server.pcap", run_dir / "server.pcap")
    timing = session.lab.timing_faults()
    truth = session.lab.ground_truth(run.params)  # after the workload: the UEs attached, the eNB signalled
    shared |= session.lab.collect(run_dir)
    timing = timing | run_clock_timing(session.lab, run_dir, t0, t_end, campaign.retry.max_stack_gap_ms,
                                       session.lab.stack_clock_excused())
    sr_true_ms = truth["sr_period_ms"] if truth else run.params.get("sr_period_ms")
    stack_clock = _run_clock(session, run_dir) if workload.sr_probes else None  # the SR estimate is read on it
    ue_metrics = {}
    for ue in ues:
        artifacts = per_ue[ue.name] | shared
        context = RunContext(
            t0_s=t0, duration_s=workload.duration_s,
            offsets_s=role_offsets | {"ue": offsets[ue.agent]["offset_s"]},
            cell_mark=cell_mark or None, sr_true_ms=sr_true_ms, cell_ue=ue.lab_index,
            sender_port=SENDER_PORT + ue.slot, shared_capture=len(ues) > 1, stack_clock=stack_clock,
            channel=ue.channel or 1)
        if workload.tool == "probe":
            ue_metrics[ue.name] = probe_run_metrics(artifacts, context)
        else:  # iperf3: its intervals, ping and the attenuation where the capture gives no timeline
            ue_metrics[ue.name] = run_metrics(artifacts, shared_capture=len(ues) > 1)
            ue_metrics[ue.name]["timeline"] = iperf3_timeline(artifacts, context) \
                | ue_metrics[ue.name].get("timeline", {})
    # one UE: the run's metrics are its own (as before multi-UE runs); several: totals and fairness
    metrics = dict(ue_metrics[ues[0].name]) if len(ues) == 1 else multi_ue_metrics(ue_metrics)
    if len(ues) > 1 and "pcap" in shared:  # the capture's flow metrics cover every UE: the run's
        metrics |= pcap_run_metrics(shared["pcap"])
    timeline = metrics.setdefault("timeline", {})
    timeline |= telemetry_timeline(run_dir / "telemetry", t0, {ue.lab_index: ue.name for ue in ues})
    if start_check is not None:  # what the run's start waited for (a stale one flags the run)
        metrics["first_sample"] = start_check.as_metrics()
    metrics["host_cpu_pct"] = host_cpu_pct  # a busy host is the first suspect when a real stack loses real time
    unrecovered = None
    if faults:
        inventory = campaign.lab.endswith((".yaml", ".yml"))  # no cell of its own: its agents say what happened
        flows = agent_fault_records(session, ues, per_ue, offsets, t0, run_dir, shared) if inventory else None
        unrecovered = fault_recovery(session, campaign, faults, played, player, shared, cell_mark, t0, run_dir,
                                     metrics, flows)
    if timing.get("ttis"):  # how faithfully the emulation kept model time: columns in the report
        metrics["late_tti_pct"] = 100.0 * campaign.retry.late_ttis(timing) / timing["ttis"]
        metrics["late_tti_max_ms"] = timing.get("late_max_us", 0) / 1000
        metrics["clock_resyncs"] = timing["resyncs"]
    if isinstance((timing.get("stack_clock") or {}).get("speed"), float):  # the stack's own clock: its speed
        metrics["stack_speed"] = timing["stack_clock"]["speed"]
    write_json(run_dir / "manifest.json", {
        "run_id": run.run_id, "index": run.index, "repeat": run.repeat, "attempt": attempt,
        "factors": run.factors, "params": run.params, "workload": workload.model_dump(),
        "lab": {"kind": campaign.lab, "server": session.topology.server.__dict__,
                "ues": [u.__dict__ for u in session.topology.ues]},
        "placement": where,
        "ues": [ue.__dict__ for ue in ues],
        "agents": {name: {"role": status.role, "version": status.version,
                          "clock_offset_s": offsets.get(name, {}).get("offset_s")}
                   for name, status in ctl.agents().items() if name in session.agents},
        "ground_truth": truth,
        "clock_offsets": offsets, "attenuation_applied_db": attenuation, "seed": campaign.order.seed,
        "module_params": _module_params_now(session),
        "schedule": run.params.get("schedule", "static"), "workload_started_at": t0, "workload_finished_at": t_end,
        "cell_clock_mark": cell_mark, "started_at": started, "finished_at": time.time(),
        "artifacts": {k: str(p.relative_to(run_dir)) for k, p in shared.items()}
        | {f"{name}/{k}": str(p.relative_to(run_dir)) for name, arts in per_ue.items() for k, p in arts.items()},
        "software": software_versions(),
        "provenance": run_provenance(session, run.params, campaign.schedules),
        "lab_timing": timing, "host_cpu_pct": host_cpu_pct,
    })
    _check_timing(campaign, timing)
    if unrecovered:
        raise FaultNotRecovered(unrecovered)
    after = getattr(session.lab, "after_run", None)
    if callable(after):  # e.g. the inventory's phones are still the ones it names
        after()
    return metrics, ue_metrics


def _run_clock(session: LabSession, run_dir: Path) -> Any:
    """The run's stack clock (the lab's; the wall clock for a stack at real time); None when it is unusable (the
    run's validity names why: run_clock_timing)."""
    try:
        return session.lab.stack_clock(run_dir)
    except CellabError:
        return None


def _run_workloads(session: LabSession, campaign: Campaign, ues: list[RunUE], run_dir: Path, tag: str,
                   capture: bool, deadline: float) -> dict[str, dict[str, Path]]:
    """Every UE's workload at the same time; a UE that fails fails the run, naming the UE."""
    workload, timeouts = campaign.workload, campaign.timeouts
    server = _server(session, timeouts.request_s)
    ctl = session.controller
    measure_tti = getattr(session.lab, "stack_tti_ms", None)  # an inventory lab's stack keeps real time
    stack_tti_ms = measure_tti() if callable(measure_tti) and workload.sr_probes else None

    def one(ue: RunUE) -> dict[str, Path]:
        ue_dir = run_dir / "ues" / ue.name
        ue_dir.mkdir(parents=True, exist_ok=True)
        target = WorkloadTarget(server, UEClient(ctl, ue.agent, timeouts.request_s), ue,
                                session.topology.server.address, f"{tag}-{ue.name}", ue_dir, packet_log=capture,
                                stack_tti_ms=stack_tti_ms)
        return WORKLOADS[workload.tool](target, workload, timeouts, deadline)

    if len(ues) == 1:
        return {ues[0].name: one(ues[0])}
    with ThreadPoolExecutor(max_workers=len(ues), thread_name_prefix="ue-workload") as pool:
        futures = {ue.name: pool.submit(one, ue) for ue in ues}
        results, failures = {}, []
        for ue in ues:
            try:
                results[ue.name] = futures[ue.name].result()
            except RUN_ERRORS as exc:
                failures.append(f"UE {ue.name} (agent {ue.agent}): {type(exc).__name__}: {exc}")
    if failures:
        raise CellabError("; ".join(failures))
    return results


def _lab_fault(session: LabSession) -> str | None:
    try:
        return session.lab.fault() if hasattr(session.lab, "fault") else None
    except RUN_ERRORS as exc:
        return f"the lab could not say what broke ({type(exc).__name__}: {exc})"


def _check_timing(campaign: Campaign, timing: dict[str, Any]) -> None:
    """Fail a run the host stalled (the virtual cell late, the srsRAN stack in slow motion): its delays and rates
    are of the host's scheduler, not of the model or the stack."""
    why = campaign.retry.invalid_reason(timing) if timing else None
    if why:
        raise LabTimingError(f"{why}; the run measured the host, not the lab")


def _set_attenuation(session: LabSession, campaign: Campaign, run: PlannedRun, ues: list[RunUE],
                     held: dict[int, float]) -> dict[int, float]:
    """The run's attenuation_db (one value, or one per UE; a UE's own entry wins) on the UEs' channels; a channel
    `held` gets its level instead (between_runs: the level it had stays until the run's schedule moves it)."""
    applied: dict[int, float] = {}
    values = run.params.get("attenuation_db")
    if session.attenuator is None:
        return applied
    values = values if isinstance(values, list) else [values] * len(ues)
    attenuator = _attenuator(session, campaign.timeouts.request_s)
    for ue in ues:
        value = ue.attenuation_db if ue.attenuation_db is not None else (
            values[ue.slot] if ue.slot < len(values) else None)
        value = held.get(ue.channel, value) if ue.channel is not None else None
        if value is None:
            continue
        applied[ue.channel] = attenuator.set(session.attenuator.name, ue.channel, value).applied_db
    return applied


def _schedules(session: LabSession, campaign: Campaign, results_root: Path) -> Schedules:
    key = str(results_root)
    if key not in session.schedules:
        session.schedules[key] = Schedules(campaign, results_root, session.controller, session.roles["attenuator"],
                                           session.attenuator, session.roles["ue"])
    return session.schedules[key]


def _start_schedule(session: LabSession, campaign: Campaign, ues: list[RunUE], results_root: Path) -> str | None:
    """Start the run's schedules (one per UE at most, each on its UE's channel, played as one); returns the
    player's log name (None for a static channel). Schedules built from drive logs are kept per lab instance
    and results folder (a calibration belongs to the attenuator that was swept)."""
    wanted = [ue for ue in ues if ue.schedule != "static"]
    if not wanted:
        return None
    if session.attenuator is None:  # validation refuses this; a lab whose inventory changed since could not
        raise CellabError(f"schedule {wanted[0].schedule!r}: this lab has no attenuator agent")
    schedules = _schedules(session, campaign, results_root)
    # each schedule moves its file's channels only: a UE plays the points on its own channel (a drive log with
    # no `channel` is made for its UE's: the run's first UE, or the UE whose own schedule it is)
    first = {}
    for ue in wanted:
        first.setdefault(ue.schedule, ue)
    params = schedules.merged_play_params([(ue.channel, ue.schedule, ue.name, ue.own_schedule or first[ue.schedule] is ue)
                                           for ue in wanted if ue.channel is not None])
    if params is None:
        return None
    return _attenuator(session, campaign.timeouts.request_s).play_schedule(PlayParams(**params)).log_file


def ue_count(ues: Any) -> int:
    return ues if isinstance(ues, int) else len(ues) if isinstance(ues, list) else 1


def _module_params_now(session: LabSession) -> dict[str, dict[str, float]]:
    """The parameters of every module registered for the run, as the server agent was told them."""
    now: dict[str, dict[str, float]] = {}
    for (module, param), value in sorted(session.module_values.items()):
        now.setdefault(module, {})[param] = value
    return now
