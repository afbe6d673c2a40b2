"""The eNB agent (`cellab agent --role enb`): srsenb on rendered configs, supervised, with its JSON report
turned into per-UE telemetry and the SR ground truth each UE was given.

Artifacts (in artifact_dir): config/{enb,rr,sib,rb}.conf, config/<report json>, srsenb_console.log,
enb_metrics.jsonl (one UeMetrics per line), sr_ground_truth.jsonl, sr_occasions.jsonl (the eNB's own SR
receptions: every SR occasion srsenb's PHY decoded, {t_s, tti, rnti, sr}, read from its log at PHY info level),
s1_events.jsonl (srsenb's S1-MME lost and set up again, {event, t_s}, from its log at S1AP info level:
cellab.ran.s1_events). Each within the lab's bound ($CELLAB_LAB_LOG_MAX_BYTES, cellab.ran.logbound): the JSON
lines files with their older half NAME.1, srsenb's log split and pruned as it is read.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from cellab.bus import Agent, OperationFailed, operation
from cellab.contracts import implements
from cellab.contracts.enb import (
    ENB_CONTRACT,
    CellGainParams,
    CellGainResult,
    ConfigureParams,
    ConfigureResult,
    EnbSelfCheckParams,
    SafeStateResult,
    SrGroundTruth,
    StatusResult,
    UeMetrics,
)
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok, warn
from cellab.envvars import lab_log_max_bytes
from cellab.errors import CellabError
from cellab.ran.enb_provenance import EnbProvenance
from cellab.ran.logbound import append_bounded, file_max_size_kib, remove_all
from cellab.ran.profile import EnbProfile, apply_overrides, parse_profile
from cellab.ran.render import render_texts
from cellab.ran.s1_events import S1AP_LOG_LEVEL
from cellab.ran.report import PhyLogTail, ReportTail, sr_ground_truth, ue_metrics
from cellab.ran.srsenb_proc import (
    SrsenbError,
    SrsenbProcess,
    check_sr_log_level,
    find_srsenb,
    kernel_has_sctp,
    sctp_shim_for,
    sr_log_level_of,
    with_log_file_max_kib,
    with_log_level,
    with_sr_log_level,
)

log = logging.getLogger("cellab.ran.agent")
REPORT_POLL_S = 0.5


def restart_reasons(old: EnbProfile | None, new: EnbProfile) -> list[str]:
    if old is None:
        return ["first start"]
    reasons = []
    if old.enb.n_prb != new.enb.n_prb:
        reasons.append(f"n_prb {old.enb.n_prb} -> {new.enb.n_prb}")
    if (old.sr.period_ms, old.sr.subframe_offset) != (new.sr.period_ms, new.sr.subframe_offset):
        reasons.append(f"SR period {old.sr.period_ms} -> {new.sr.period_ms} ms")
    if [c.dl_earfcn for c in old.cells] != [c.dl_earfcn for c in new.cells]:
        reasons.append("EARFCN " + ",".join(str(c.dl_earfcn) for c in new.cells))
    return reasons


@implements(ENB_CONTRACT)
class EnbAgent(EnbProvenance, Agent):
    role = "enb"

    def __init__(self, *args: Any, srsenb_bin: str | Path | None = None, netns: str | None = None,
                 report_poll_s: float = REPORT_POLL_S, sr_log_level: str = "info", **kwargs: Any):
        super().__init__(*args, **kwargs)
        # the PHY log level that shows each SR reception (info or debug; warning and above hide them)
        self.sr_log_level = check_sr_log_level(sr_log_level, f"enb agent {self.name}")
        self.srsenb_bin, self.netns, self.report_poll_s = srsenb_bin, netns, report_poll_s
        self.log_max_bytes = lab_log_max_bytes()  # srsenb's log split at a third, read and pruned by PhyLogTail
        self.config_dir = self.artifact_dir / "config"
        self._lock = threading.RLock()  # srsenb's lifecycle
        self._data_lock = threading.Lock()  # metrics and ground truth (the report thread writes them)
        self._proc: SrsenbProcess | None = None
        self._profile: EnbProfile | None = None
        self._texts: dict[str, str] = {}
        self._restarts = 0
        self._ground_truth: SrGroundTruth | None = None
        self._last_metrics: dict[int, UeMetrics] = {}
        self._tail: ReportTail | None = None
        self._phy_tail: PhyLogTail | None = None
        self._tail_stop = threading.Event()
        self._tail_thread: threading.Thread | None = None

    # ----- operations ----------------------------------------------------------------------------
    @operation
    def configure(self, params: ConfigureParams) -> ConfigureResult:
        source = f"{params.profile_name} (with the run's radio parameters)"
        try:
            data = yaml.safe_load(params.profile_yaml)
        except yaml.YAMLError as exc:
            raise OperationFailed(f"{params.profile_name}: bad YAML: {exc}", field="params.profile_yaml") from None
        if not isinstance(data, dict):
            raise OperationFailed(f"{params.profile_name}: not a mapping", field="params.profile_yaml")
        try:
            profile = parse_profile(apply_overrides(data, params.overrides), source)
        except (CellabError, ValidationError) as exc:
            raise OperationFailed(str(exc), field="params") from None
        texts = render_texts(profile, params.profile_name)
        texts["enb.conf"] = with_log_level(with_sr_log_level(texts["enb.conf"], self.sr_log_level), "s1ap_level",
                                           S1AP_LOG_LEVEL)  # S1 lost and set up again: s1_events.jsonl
        texts["enb.conf"] = with_log_file_max_kib(texts["enb.conf"], file_max_size_kib(self.log_max_bytes))
        try:
            sr_log_level_of(texts["enb.conf"], f"{params.profile_name}: enb.conf")
        except CellabError as exc:
            raise OperationFailed(str(exc), field="params.profile_yaml") from None
        with self._lock:
            if self._proc is None:
                reasons = ["first start"]
            elif not self._proc.running():
                reasons = ["srsenb was not running: " + self._proc.exit_reason()]
            else:
                reasons = restart_reasons(self._profile, profile)
                if not reasons and texts != self._texts:
                    reasons.append("other profile settings (srsenb reads them only at start)")
            if reasons:
                self._stop_enb()
                self._write_configs(texts)
                self._profile, self._texts = profile, texts
                self._start_enb(params.ready_timeout_s)
            proc = self._proc
            assert proc is not None
            return ConfigureResult(restarted=bool(reasons), restart_reasons=reasons, state=self._state(), pid=proc.pid,
                                   rendered=[f"config/{name}" for name in texts])

    @operation(concurrent=True)
    def status(self) -> StatusResult:
        # not under the lifecycle lock: status answers while configure waits for srsenb to start
        proc, prof = self._proc, self._profile
        with self._data_lock:
            metrics, truth = list(self._last_metrics.values()), self._ground_truth
        return StatusResult(
            state=self._state(proc), pid=proc.pid if proc else None,
            uptime_s=(time.time() - proc.started_s) if proc and proc.started_s and proc.running() else None,
            exit_code=proc.returncode if proc else None,
            error_line=proc.error_line() if proc and not proc.running() else None,
            restarts=self._restarts, connected_rntis=sorted(m.rnti for m in metrics),
            ground_truth=truth, last_metrics=metrics,
            n_prb=prof.enb.n_prb if prof else None, sr_period_ms=prof.sr.period_ms if prof else None,
            dl_earfcn=prof.cells[0].dl_earfcn if prof else None)

    @operation(concurrent=True)
    def cell_gain(self, params: CellGainParams) -> CellGainResult:
        with self._lock:
            if self._proc is None or self._profile is None:
                raise OperationFailed("srsenb is not running: send configure first")
            ids = [c.cell_id for c in self._profile.cells]
            if params.cell_id not in ids:
                raise OperationFailed(f"no cell {params.cell_id} in this eNB", field="params.cell_id", allowed=ids)
            try:
                self._proc.cell_gain(params.cell_id, params.gain_db)
            except SrsenbError as exc:
                raise OperationFailed(str(exc)) from None
        return CellGainResult(ok=True, cell_id=params.cell_id, gain_db=params.gain_db)

    @operation
    def self_check(self, params: EnbSelfCheckParams) -> SelfCheckResult:
        """Read-only: srsenb found, S1's SCTP (the kernel's or the bundle's shim), the radio (a USRP that
        answers uhd_find_devices; srsRAN's ZMQ radio needs none), the host clock."""
        try:
            binary = find_srsenb(self.srsenb_bin)
        except CellabError as exc:
            return SelfCheckResult(items=[fail("srsenb", str(exc)), clock_sync_check()])
        items = [ok("srsenb", str(binary)), self._sctp_check(binary), self._radio_check(params)]
        return SelfCheckResult(items=[*items, clock_sync_check()])

    @staticmethod
    def _sctp_check(binary: Path) -> CheckItem:
        if kernel_has_sctp():
            return ok("sctp", "the kernel's SCTP (S1-MME)")
        shim = sctp_shim_for(binary)
        if shim is not None:
            return ok("sctp", f"no SCTP in the kernel: the bundle's shim {shim} is preloaded")
        return fail("sctp", "no SCTP in the kernel (S1-MME): `modprobe sctp` (docs/real-lab.md, eNB host)")

    @staticmethod
    def _radio_check(params: EnbSelfCheckParams) -> CheckItem:
        if params.rf == "zmq":
            return ok("radio", "srsRAN's ZMQ radio: no device needed")
        from cellab.ran.usrp import discover

        try:
            devices = discover(probe=False, timeout_s=20.0)
        except CellabError as exc:
            return fail("radio", str(exc))
        wanted = {pair for pair in params.device_args.split(",") if pair}
        matching = [d for d in devices if wanted <= set(d.device_args().split(","))]
        if not matching:
            found = "; ".join(d.device_args() for d in devices) or "none"
            return fail("radio", f"no USRP matching {params.device_args or 'any'} (found: {found}): check USB 3 / "
                                 "Ethernet, `uhd_find_devices`")
        if len(matching) > 1 and not wanted:
            return warn("radio", f"{len(matching)} USRPs and no device_args: srsenb takes the first")
        return ok("radio", matching[0].device_args())

    @operation(name="safe_state")
    def safe_state_op(self) -> SafeStateResult:
        with self._lock:
            was_running = self._proc is not None and self._proc.running()
            self._stop_enb()
        return SafeStateResult(stopped=was_running)

    def safe_state(self) -> None:
        """Agent base hook (stop, controller lost): no transmission without a controller."""
        with self._lock:
            self._stop_enb()

    # ----- srsenb --------------------------------------------------------------------------------
    def _state(self, proc: SrsenbProcess | None = None) -> str:
        proc = proc or self._proc
        if proc is None:
            return "stopped"
        if proc.running():
            return "running" if proc.ready.is_set() else "starting"
        return "crashed" if proc.crashed() else ("stopped" if proc.returncode is not None else "exited")

    def _write_configs(self, texts: dict[str, str]) -> None:
        self.config_dir.mkdir(parents=True, exist_ok=True)
        for name, text in texts.items():
            tmp = self.config_dir / (name + ".tmp")
            tmp.write_text(text)
            tmp.replace(self.config_dir / name)

    def _start_enb(self, ready_timeout_s: float) -> None:
        assert self._profile is not None
        try:
            binary = find_srsenb(self.srsenb_bin)
        except SrsenbError as exc:
            raise OperationFailed(str(exc)) from None
        report_path = self.config_dir / self._profile.report.json_filename
        report_path.unlink(missing_ok=True)  # a new srsenb starts a new report
        phy_log = self.config_dir / self._profile.log.filename
        remove_all(phy_log)  # and a new log (every segment): its SR occasions are read from the start
        with self._data_lock:
            self._ground_truth, self._last_metrics = None, {}
        proc = SrsenbProcess(binary, self.config_dir, self.artifact_dir / "srsenb_console.log",
                             preload=sctp_shim_for(binary), netns=self.netns, console_max_bytes=self.log_max_bytes)
        self._proc = proc
        self._restarts += 1
        proc.start()
        log.info("srsenb started", extra={"event": "srsenb_start", "agent": self.name, "pid": proc.pid})
        try:
            proc.wait_ready(ready_timeout_s)
        except SrsenbError as exc:
            proc.stop(grace_s=2)
            raise OperationFailed(str(exc)) from None
        self._tail = ReportTail(report_path, self.log_max_bytes // 2)
        self._phy_tail = PhyLogTail(phy_log)
        self._tail_stop.clear()
        self._tail_thread = threading.Thread(target=self._follow_report, name="enb-report", daemon=True)
        self._tail_thread.start()

    def _stop_enb(self) -> None:
        self._tail_stop.set()
        if self._tail_thread is not None:
            self._tail_thread.join(timeout=5)
            self._tail_thread = None
        if self._proc is not None and self._proc.running():
            self._proc.stop()
            log.info("srsenb stopped", extra={"event": "srsenb_stop", "agent": self.name})
        self._poll_report()  # what srsenb wrote last

    # ----- report --------------------------------------------------------------------------------
    def _follow_report(self) -> None:
        while not self._tail_stop.wait(self.report_poll_s):
            self._poll_report()

    def _poll_report(self) -> None:
        self._poll_sr_occasions()
        tail = self._tail
        if tail is None:
            return
        objs = tail.read_new()
        if not objs:
            return
        metrics_lines, truth_lines = [], []
        for obj in objs:
            samples = ue_metrics(obj)
            truth = sr_ground_truth(obj)
            with self._data_lock:
                if obj.get("type") == "metrics":  # the UEs of this period replace the last period's
                    self._last_metrics = {m.rnti: m for m in samples}
                if truth is not None:
                    self._ground_truth = truth
            for sample in samples:
                self.publish("ue_metrics", sample.model_dump())
                metrics_lines.append(sample.model_dump_json())
            if truth is not None:
                self.publish("sr_ground_truth", truth.model_dump())
                truth_lines.append(truth.model_dump_json())
        self._append("enb_metrics.jsonl", metrics_lines)
        self._append("sr_ground_truth.jsonl", truth_lines)

    def _poll_sr_occasions(self) -> None:
        """The SR occasions srsenb's PHY logged since the last poll, appended to sr_occasions.jsonl."""
        tail = self._phy_tail
        if tail is None:
            return
        self._append("sr_occasions.jsonl", [json.dumps({"t_s": o.t_s, "tti": o.tti, "rnti": o.rnti, "sr": o.sr})
                                            for o in tail.read_new()])
        self._append("s1_events.jsonl", [json.dumps(e) for e in tail.take_s1_events()])

    def _append(self, name: str, lines: list[str]) -> None:
        """Lines appended to one of the agent's files, kept within the lab's bound with its older half NAME.1."""
        if lines:
            append_bounded(self.artifact_dir / name, "".join(line + "\n" for line in lines), self.log_max_bytes)
