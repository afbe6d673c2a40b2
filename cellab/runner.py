"""The campaign runner: per run, configure → measure clocks → capture, schedule, workload → stop → collect
→ metrics → store.

One failed run does not stop the campaign (the retry policy decides); Ctrl-C stops the devices, marks
the run aborted and keeps everything already stored; `--resume DIR` continues where it stopped.
"""

from __future__ import annotations

import platform
import shutil
import subprocess
import time
from pathlib import Path
from collections.abc import Callable
from typing import Any

import yaml
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

import cellab
from cellab.bus import AgentLost, AgentTimeout, OperationError
from cellab.campaign import BPF_CCS, Campaign, PlannedRun, load_campaign, plan
from cellab.errors import CellabError
from cellab.metrics import RunContext, probe_run_metrics, run_metrics
from cellab.schedules import Schedules
from cellab.server.modules import check_param
from cellab.session import LabSession
from cellab.store import ResultStore, write_json
from cellab.workloads import WORKLOAD_PORTS, WORKLOADS, WorkloadTarget


class LabTimingError(CellabError):
    """The embedded lab's emulation fell behind real time during the run."""


RUN_ERRORS = (CellabError, AgentLost, AgentTimeout, OperationError, OSError)


class Runner:
    def __init__(self, campaign: Campaign, store: ResultStore, console: Console | None = None,
                 prefix: str | None = None, on_run_done: Callable[[PlannedRun, str], None] | None = None):
        self.campaign = campaign
        self.store = store
        self.console = console or Console(stderr=True)
        self.prefix = prefix
        self.on_run_done = on_run_done
        self._schedules: Schedules | None = None

    @classmethod
    def new(cls, campaign_path: Path, out_dir: Path, lab: str | None = None, **kwargs: Any) -> Runner:
        campaign = load_campaign(campaign_path, lab)
        runs = plan(campaign, campaign_path)
        text = Path(campaign_path).read_text()
        as_run = campaign.model_dump(mode="json", exclude_unset=True)
        if yaml.safe_load(text) != as_run:
            # Store the campaign as run: the lab it ran on (--lab), files it names made absolute (a resumed
            # campaign reads this copy from the result folder).
            text = yaml.safe_dump(as_run, sort_keys=False)
        store = ResultStore.create(out_dir, campaign.name, text, runs)
        return cls(campaign, store, **kwargs)

    @classmethod
    def resume(cls, result_dir: Path, **kwargs: Any) -> Runner:
        store = ResultStore.open(result_dir)
        campaign = load_campaign(store.campaign_path())
        return cls(campaign, store, **kwargs)

    def run(self) -> dict[str, int]:
        todo = list(self.store.pending())
        total = len(self.store.planned())
        counts = {"ok": 0, "failed": 0, "aborted": 0}
        if not todo:
            return counts
        with LabSession(self.campaign.lab, prefix=self.prefix) as session, Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
            console=self.console, transient=False,
        ) as progress:
            task = progress.add_task(self.campaign.name, total=total, completed=total - len(todo))
            self._check_module_params(session, todo)
            for run in todo:
                progress.update(task, description=f"{self.campaign.name} {run.run_id} {_label(run.factors)}")
                status = self._run_with_retries(session, run)
                counts[status] += 1
                progress.advance(task)
                if self.on_run_done:
                    self.on_run_done(run, status)
        return counts

    def _check_module_params(self, session: LabSession, runs: list[PlannedRun]) -> None:
        """Every module parameter the runs name exists and is in range, asked of the server agent's loader
        before the first run (a typo fails the campaign at once, not run by run)."""
        asked = {(m, p, v) for run in runs for m, ps in run.params.get("module_params", {}).items() for p, v in ps.items()}
        if not asked:
            return
        listing = session.controller.request(session.roles["server"], "list_modules", {},
                                             timeout_s=self.campaign.timeouts.request_s)
        ranges = {m["name"]: m["param_ranges"] for m in listing["modules"]}
        source = self.store.campaign_path()
        for module, param, value in sorted(asked):
            check_param(ranges.get(module, {}), param, value, source, f"module_params.{module}.{param}")

    def _apply_modules(self, session: LabSession, run: PlannedRun) -> None:
        """Register the run's BPF congestion control and every module it sets parameters of (once per campaign;
        the server agent unloads them when the session ends), then give each registered module this run's
        parameters: the ones the run names, the defaults (read when it was loaded) for the rest, so a value
        one run set never leaks into the next."""
        ctl, server, request_s = session.controller, session.roles["server"], self.campaign.timeouts.request_s
        wanted: dict[str, dict[str, float]] = run.params.get("module_params", {})
        cc = run.params["cc"]
        needed = set(wanted) | ({cc} if cc in BPF_CCS else set())
        new = sorted(needed - session.loaded_modules)
        for name in new:
            ctl.request(server, "load_modules", {"names": [name]}, timeout_s=request_s)
            session.loaded_modules.add(name)
        if new:  # their defaults, as loaded: one listing for all of them
            for module in ctl.request(server, "list_modules", {}, timeout_s=request_s)["modules"]:
                if module["name"] in new:
                    loaded_values = {(module["name"], p): v for p, v in module["params"].items()}
                    session.module_values |= loaded_values
                    session.module_defaults |= loaded_values
        for (module, param), current in sorted(session.module_values.items()):  # holds registered modules only
            value = wanted.get(module, {}).get(param, session.module_defaults[(module, param)])
            if value != current:
                ctl.request(server, "set_module_param", {"module": module, "param": param, "value": value},
                            timeout_s=request_s)
                session.module_values[(module, param)] = value

    def _run_with_retries(self, session: LabSession, run: PlannedRun) -> str:
        retry = self.campaign.retry
        for attempt in range(1, retry.max_attempts + 1):
            run_dir = self.store.start(run)
            try:
                session.ensure_agents()
                metrics = self._execute(session, run, run_dir, attempt)
            except KeyboardInterrupt:
                self.store.finish(run, "aborted", error="interrupted by the user (Ctrl-C)")
                raise
            except RUN_ERRORS as exc:
                error = f"{type(exc).__name__}: {exc}"
                self.console.print(f"[yellow]run {run.run_id} attempt {attempt}/{retry.max_attempts} failed:[/] {error}")
                if attempt == retry.max_attempts:
                    self.store.finish(run, "failed", error=error)
                    return "failed"
                time.sleep(retry.backoff_s)
                continue
            self.store.finish(run, "ok", metrics=metrics)
            return "ok"
        raise AssertionError("unreachable")

    def _execute(self, session: LabSession, run: PlannedRun, run_dir: Path, attempt: int) -> dict[str, Any]:
        ctl = session.controller
        workload = self.campaign.workload
        timeouts = self.campaign.timeouts
        deadline = time.monotonic() + timeouts.run_s
        started = time.time()
        session.lab.configure(run.params)
        offsets = {name: ctl.measure_clock_offset(name).model_dump() for name in session.agents}
        role_offsets = {role: offsets[name]["offset_s"] for role, name in session.roles.items() if name in offsets}
        attenuation = self._set_attenuation(session, run)
        server, ue = session.roles["server"], session.roles["ue"]
        tag = f"{run.run_id}-a{attempt}"
        self._apply_modules(session, run)
        capture = "pcap" in self.campaign.measurements
        if capture:
            ctl.request(server, "capture_start", {"tag": f"{tag}-server", "tcp_port": WORKLOAD_PORTS[workload.tool]},
                        timeout_s=timeouts.request_s)
        cell_mark = session.lab.clock_mark()
        t0 = time.time()
        target = WorkloadTarget(ctl, server, ue, session.topology.server.address, tag, run_dir, packet_log=capture)
        playing = None
        try:  # a schedule refused at its start must still stop the capture
            playing = self._start_schedule(session, run)
            artifacts = WORKLOADS[workload.tool](target, workload, run.params, timeouts, deadline)
        finally:
            if playing:
                ctl.request(session.roles["attenuator"], "stop_schedule", {}, timeout_s=timeouts.request_s)
            if capture:
                ctl.request(server, "capture_stop", {}, timeout_s=timeouts.request_s)
        if playing:
            artifacts["attenuation-log"] = ctl.fetch_artifact(session.roles["attenuator"], playing,
                                                              run_dir / "attenuation.jsonl")
        if capture:
            artifacts["pcap"] = ctl.fetch_artifact(server, f"{tag}-server.pcap", run_dir / "server.pcap")
        timing = session.lab.timing_faults()
        artifacts |= session.lab.collect(run_dir)
        if workload.tool == "probe":
            context = RunContext(t0_s=t0, duration_s=workload.duration_s, offsets_s=role_offsets,
                                 cell_mark=cell_mark or None, sr_true_ms=run.params.get("sr_period_ms"))
            metrics = probe_run_metrics(artifacts, context)
        else:
            metrics = run_metrics(artifacts)
        if timing.get("ttis"):  # how faithfully the emulation kept model time: a column in the report
            metrics["late_tti_pct"] = 100.0 * timing["late_ttis"] / timing["ttis"]
            metrics["clock_resyncs"] = timing["resyncs"]
        write_json(run_dir / "manifest.json", {
            "run_id": run.run_id, "index": run.index, "repeat": run.repeat, "attempt": attempt,
            "factors": run.factors, "params": run.params, "workload": workload.model_dump(),
            "lab": {"kind": self.campaign.lab, "server": session.topology.server.__dict__,
                    "ues": [u.__dict__ for u in session.topology.ues]},
            "agents": dict(session.agents),
            "clock_offsets": offsets, "attenuation_applied_db": attenuation, "seed": self.campaign.order.seed,
            "module_params": _module_params_now(session),
            "schedule": run.params.get("schedule", "static"), "workload_started_at": t0, "cell_clock_mark": cell_mark,
            "started_at": started, "finished_at": time.time(),
            "artifacts": {k: p.name for k, p in artifacts.items()},
            "software": software_versions(),
            "lab_timing": timing,
        })
        self._check_timing(timing)
        return metrics

    def _check_timing(self, timing: dict[str, int]) -> None:
        """Fail a run the host stalled: its delays and rates are of the host's scheduler, not of the model."""
        retry = self.campaign.retry
        if not timing or not retry.host_stalled(timing["ttis"], timing["late_ttis"], timing["resyncs"]):
            return
        raise LabTimingError(
            f"the host stalled the virtual cell: {timing['late_ttis']} of {timing['ttis']} TTIs late, "
            f"{timing['resyncs']} clock resyncs (retry.max_late_tti_fraction {retry.max_late_tti_fraction}); "
            "the run measured the host, not the model")

    def _set_attenuation(self, session: LabSession, run: PlannedRun) -> dict[int, float]:
        """The run's attenuation_db (one value, or one per UE) on the channels in front of the UEs."""
        applied: dict[int, float] = {}
        values = run.params.get("attenuation_db")
        if session.attenuator is None or values is None:
            return applied
        channels = session.attenuator.ue_channels
        values = values if isinstance(values, list) else [values]
        if len(values) == 1:
            values = values * len(channels)
        # the session's attenuator covers the UEs it runs agents for, which may be fewer than the cell has
        for channel, value in zip(channels, values, strict=False):
            reply = session.controller.request(
                session.roles["attenuator"], "set", {"attenuator": session.attenuator.name, "channel": channel,
                                                     "db": value}, timeout_s=self.campaign.timeouts.request_s)
            applied[channel] = reply["applied_db"]
        return applied

    def _start_schedule(self, session: LabSession, run: PlannedRun) -> str | None:
        """Start the run's schedule; returns the player's log name (None for a static channel)."""
        name = run.params.get("schedule", "static")
        if name == "static":
            return None
        if session.attenuator is None:  # validation refuses this; a lab whose inventory changed since could not
            raise CellabError(f"schedule {name!r}: this lab has no attenuator agent")
        if self._schedules is None:
            self._schedules = Schedules(self.campaign, self.store.root, session.controller,
                                        session.roles["attenuator"], session.attenuator, session.roles["ue"])
        reply = session.controller.request(session.roles["attenuator"], "play_schedule",
                                           self._schedules.play_params(name),
                                           timeout_s=self.campaign.timeouts.request_s)
        return reply["log_file"]


def _module_params_now(session: LabSession) -> dict[str, dict[str, float]]:
    """The parameters of every module registered for the run, as the server agent was told them."""
    now: dict[str, dict[str, float]] = {}
    for (module, param), value in sorted(session.module_values.items()):
        now.setdefault(module, {})[param] = value
    return now


def _label(factors: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in factors.items())


def software_versions() -> dict[str, str]:
    versions = {"cellab": cellab.__version__, "python": platform.python_version(), "kernel": platform.release()}
    if shutil.which("iperf3"):
        out = subprocess.run(["iperf3", "--version"], capture_output=True, text=True, check=False).stdout
        versions["iperf3"] = out.splitlines()[0] if out else "unknown"
    return versions

