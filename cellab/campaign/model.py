"""Campaign files: what to vary, how often, in which order, with which workload.

A campaign is a factor matrix (every combination of the factor values) times `repeat`, run on one
lab. Factor and fixed names are run parameters: the common parameters below plus those of the
chosen lab (wired: rate_mbit, buffer_bytes...; virtual: n_prb, sr_period_ms...).

A factor may also be a *bundle*: a mapping of level names to parameter sets, for levels that differ
in several parameters at once (`network: {commercial: {trace: t.down}, lab: {schedule: drive}}`).
The run's factors record the level name; its parameters get the set (over `fixed`).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, create_model, field_validator, model_validator

from cellab.campaign.rules import (LATE_TTI_THRESHOLDS_MS, STOP_METRICS, NamedComparison, Retry,  # noqa: F401
                                   StopRule)  # (re-exported)
from cellab.contracts.server import CC_MODULES, KERNEL_CCS
from cellab.contracts.ue import SR_PROBE_MAX_S
from cellab.errors import CellabError, InputError
from cellab.faults.spec import NO_FAULT, FaultSpec
from cellab.inputs import Label, Name, name_type
from cellab.records import Strict

BPF_CCS = CC_MODULES  # server modules, loaded per campaign
CONGESTION_CONTROLS = KERNEL_CCS + BPF_CCS
RECEIVER_CONTROLS = ("none", "exll", "dfcsd")
MAX_UES = 16  # UEs of one run: the virtual cell serves up to 16
UEName = name_type(32)


class UESpec(Strict):
    """One UE of a run and what it runs; unset fields take the run's values."""

    name: UEName = Field(description="its folder under <run>/ues/")
    flows: int | None = Field(None, ge=1, le=16, description="flows of the workload toward this UE")
    cc: Literal[CONGESTION_CONTROLS] | None = None  # type: ignore[valid-type]
    receiver: Literal[RECEIVER_CONTROLS] | None = None  # type: ignore[valid-type]
    schedule: Label | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,64}$",  # the pattern for the schema
                                   description="attenuation schedule on this UE's channel (static or a name in `schedules`; "
                                               "its file must name that channel)")
    attenuation_db: float | None = Field(None, allow_inf_nan=False, description="attenuation on this UE's channel")


class TransportParams(Strict):
    """Run parameters every lab understands."""

    ues: int | list[UESpec] | None = Field(
        None, description=f"the run's UEs: a count (1..{MAX_UES}), or a list of UEs each with its own name, flows, "
                          "cc, receiver, schedule and attenuation; null: the lab's (virtual: 1; inventory: all)")

    cc: Literal[CONGESTION_CONTROLS] = "cubic"  # type: ignore[valid-type]
    receiver: Literal[RECEIVER_CONTROLS] = "none"  # type: ignore[valid-type]
    schedule: Label = Field("static",
                            description="attenuation schedule played during the workload: static or a name in `schedules`; "
                                        "it moves only the channels its file names")
    faults: Label = Field(NO_FAULT,
                          description="faults injected during the workload: none or a plan's name in `faults` "
                                      "(a factor compares them: none and each plan in one matrix)")
    module_params: dict[Literal[BPF_CCS], dict[str, float]] = Field(  # type: ignore[valid-type]
        default_factory=dict,
        description="server-module parameters for the run, e.g. {c2tcp: {target_ms: 30}}; unnamed ones keep the "
                    "module's defaults (names and ranges: `cellab-modules list`)")

    @field_validator("ues")
    @classmethod
    def _ues(cls, value: int | list[UESpec] | None) -> int | list[UESpec] | None:
        count = value if isinstance(value, int) else len(value) if value is not None else 1
        if not 1 <= count <= MAX_UES:
            raise ValueError(f"{count} UEs: a run has 1..{MAX_UES}")
        if isinstance(value, list):
            names = [ue.name for ue in value]
            repeated = sorted({n for n in names if names.count(n) > 1})
            if repeated:
                raise ValueError(f"UE names repeat: {', '.join(repeated)}")
        return value

    @field_validator("module_params")
    @classmethod
    def _param_names(cls, value: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
        for module, params in value.items():
            for name in params:
                if not re.fullmatch(r"[a-z_]{1,32}", name):
                    raise ValueError(f"{module}.{name}: a parameter name is lower-case letters and _")
        return value


PATH_PARAMS = ("trace", "trace_up", "clock_file")  # lab parameters naming files: relative to the campaign file


class ScheduleSpec(Strict):
    """An attenuation schedule for runs: a schedule file, or a drive log replayed through a calibration."""

    file: str | None = Field(None, description="schedule .yaml/.csv (attenuator/README.md)")
    drive_log: str | None = Field(None, description="RSRP over time (CSV t_s,rsrp_dbm or the Android agent's JSONL)")
    calibration: str = Field("auto", description="calibration JSON, or auto: sweep the lab's attenuator once")
    smoothing_s: float = Field(0.0, ge=0, le=600)
    channel: int | None = Field(None, ge=1, le=64,
                                description="drive log: the attenuator channel it plays on; default: the first UE's")

    @model_validator(mode="after")
    def _one_source(self) -> ScheduleSpec:
        if (self.file is None) == (self.drive_log is None):
            raise ValueError("give exactly one of file or drive_log")
        return self


class BetweenRuns(Strict):
    """What the attenuator does between two runs of the campaign."""

    attenuation: Literal["safe", "hold"] | Annotated[float, Field(allow_inf_nan=False)] = Field(
        "safe",
        description="after a run that played a schedule: safe (the box's safe state, its safe_db or max_db), hold "
                    "(the last value played stays until the next run sets its own), or a level in dB every UE channel "
                    "of the run goes to; a failed run, a fault and the campaign's end always leave the safe state")


class Order(Strict):
    mode: Literal["sequential", "randomized"] = "sequential"
    seed: int = Field(0, ge=0, le=2**63 - 1)


class Workload(Strict):
    """iperf3 (upload or download), or the probe: cellab-send on the server, cellab-probe on the UE
    with the run's receiver control; flows are timed (duration_s) or sized (size_bytes)."""

    kind: Literal["download", "upload"] = "download"
    tool: Literal["iperf3", "probe"] = "iperf3"
    duration_s: float = Field(10.0, gt=0, le=3600)
    flows: int = Field(1, ge=1, le=16)
    size_bytes: int | list[int] | None = Field(None, description="probe: bytes per flow (one value, or one per flow)")
    flow_start_ms: list[int] | None = Field(None, description="probe: start offset of each flow")
    sr_probes: int = Field(0, ge=0, le=256, description="probe: idle-uplink pings before the flows (SR period)")
    sr_probes_max: int | None = Field(
        None, ge=1, le=256, description="probe: the SR budget: more pings while the candidate periods are not told "
                                        "apart, up to this many (default: twice sr_probes); the run records how many "
                                        "it used (sr_probes_used)")
    ping_interval_ms: float | None = Field(200.0, ge=10, le=10_000, description="concurrent ping for RTT; null = off")

    @model_validator(mode="after")
    def _probe_only(self) -> Workload:
        if self.tool == "iperf3":
            for name in ("size_bytes", "flow_start_ms"):
                if getattr(self, name) is not None:
                    raise ValueError(f"{name} needs tool: probe")
            if self.sr_probes or self.sr_probes_max:
                raise ValueError("sr_probes needs tool: probe")
        elif self.kind != "download":
            raise ValueError("the probe workload is a download (the receiver runs on the UE)")
        for name in ("size_bytes", "flow_start_ms"):
            value = getattr(self, name)
            if isinstance(value, list) and len(value) != self.flows:
                raise ValueError(f"{name}: one value per flow ({self.flows})")
        sizes = self.size_bytes if isinstance(self.size_bytes, list) else [self.size_bytes or 1]
        if any(v <= 0 for v in sizes) or any(v < 0 for v in self.flow_start_ms or []):
            raise ValueError("sizes must be positive and start offsets non-negative")
        return self

    def flow_sizes(self) -> list[int | None]:
        if isinstance(self.size_bytes, list):
            return list(self.size_bytes)
        return [self.size_bytes] * self.flows


class Timeouts(Strict):
    run_s: float = Field(300.0, gt=0, description="whole run, configure to collect")
    request_s: float = Field(30.0, gt=0, description="one bus request (workload requests get duration + this)")


MEASUREMENTS = ("throughput", "rtt", "tcp_info", "pcap")
TAG_PATTERN = r"^[a-z0-9][a-z0-9_.-]{0,31}$"
#: `lab: bench`: any bench a cluster's workers offer (`cellab worker --lab`), picked by the campaign's `requires`
ANY_BENCH = "bench"
#: a factor named `lab` runs the same matrix on several labs (embedded kinds or inventories) side by side
LAB_FACTOR = "lab"  # pcap: the server captures its side


class Campaign(Strict):
    name: Name
    description: str = ""
    lab: str = "virtual"
    repeat: int = Field(1, ge=1, le=1000, description="runs of every cell (with `until`: at least)")
    until: StopRule | None = Field(None, description="repeat a cell until its interval is narrow (or `max` runs); "
                                   "`repeat: {min, max, metric, ci_fraction}` says the same")
    comparisons: dict[Name, NamedComparison] = Field(
        {}, description="named comparisons: name -> {factor, level, baseline, metrics}; each level's runs against "
                        "the baseline's in every cell of the other factors (ratio of medians, 95 % bootstrap "
                        "interval, Mann-Whitney U), kept in results.sqlite and shown in the report")
    order: Order = Order()
    between_runs: BetweenRuns = BetweenRuns()
    factors: dict[Name, list[Any] | dict[Name, dict[str, Any]]] = {}  # names and level names: labels people read
    fixed: dict[str, Any] = {}
    schedules: dict[Label, ScheduleSpec] = {}
    faults: dict[Label, list[FaultSpec]] = Field(
        {}, description="fault plans: name -> faults (kind, at_s, duration_s, ue, daemon) injected during the "
                        "workload of the runs whose `faults` parameter names the plan (cellab/faults/spec.py)")
    workload: Workload = Workload()
    measurements: list[Literal[MEASUREMENTS]] = ["throughput", "rtt"]  # type: ignore[valid-type]
    timeouts: Timeouts = Timeouts()
    retry: Retry = Retry()
    requires: list[Annotated[str, Field(pattern=TAG_PATTERN)]] = Field(
        [], description="distributed runs: tags a bench must carry (its inventory's `tags`) to be given a run")

    @model_validator(mode="before")
    @classmethod
    def _repeat_rule(cls, data: Any) -> Any:
        """`repeat: {min, max, metric, ci_fraction}` is `repeat: min` with `until: {metric, ci_fraction, max}`."""
        if isinstance(data, dict) and isinstance(data.get("repeat"), dict):
            rule = dict(data["repeat"])
            if "until" in data:
                raise ValueError("repeat as a rule and `until`: give one of them")
            data = {**data, "repeat": rule.pop("min", 1), "until": rule}
        return data

    @model_validator(mode="after")
    def _min_not_above_max(self) -> Campaign:
        if self.until is not None and self.until.max < self.repeat:
            raise ValueError(f"repeat: min {self.repeat} is above max {self.until.max}")
        return self

    @model_validator(mode="after")
    def _comparisons_name_levels(self) -> Campaign:
        for name, comparison in self.comparisons.items():
            where = f"comparisons.{name}"
            if comparison.factor not in self.factors:
                raise ValueError(f"{where}.factor: {comparison.factor!r} is not a factor of the campaign (allowed: "
                                 f"{', '.join(self.factors) or 'none: the campaign has no factors'})")
            levels = factor_levels(self.factors[comparison.factor])
            for side in ("level", "baseline"):
                if getattr(comparison, side) not in levels:
                    raise ValueError(f"{where}.{side}: {getattr(comparison, side)!r} is not a level of "
                                     f"{comparison.factor} (allowed: {', '.join(levels)})")
            if comparison.level == comparison.baseline:
                raise ValueError(f"{where}: level and baseline are both {comparison.level!r}")
        rule = self.until
        if rule is not None and rule.comparison is not None:
            if rule.comparison not in self.comparisons:
                raise ValueError(f"until.comparison: {rule.comparison!r} is not a comparison in `comparisons` "
                                 f"(allowed: {', '.join(self.comparisons) or 'none: the campaign names none'})")
            if self.repeat < 2:
                raise ValueError("until.comparison: needs repeat (min) of 2 or more: a ratio's interval needs "
                                 "2 runs on each side")
        return self

    @model_validator(mode="after")
    def _probe_budget_fits(self) -> Campaign:
        budget = self.workload.sr_probes_max
        if budget is None:
            return self
        if not self.workload.sr_probes:
            raise ValueError("workload.sr_probes_max: needs workload.sr_probes (the pings it starts with)")
        if budget < self.workload.sr_probes:
            raise ValueError(f"workload.sr_probes_max: {budget} is below workload.sr_probes "
                             f"{self.workload.sr_probes}")
        probes_s = budget * SR_PROBE_MAX_S
        if probes_s + self.workload.duration_s >= self.timeouts.run_s:
            raise ValueError(f"workload.sr_probes_max: {budget} pings take up to {probes_s:g} s, which with the "
                             f"{self.workload.duration_s:g} s workload does not fit timeouts.run_s "
                             f"{self.timeouts.run_s:g}")
        return self


def factor_levels(levels: list[Any] | dict[str, Any]) -> list[str]:
    """A factor's levels as the runs' factors record them, as text: a list's values, a bundle's names."""
    return [str(v) for v in levels]


def run_id(factors: dict[str, Any], repeat: int) -> str:
    """Stable id: the same factor values and repeat give the same id in every plan."""
    key = json.dumps(factors, sort_keys=True, separators=(",", ":")) + f"#{repeat}"
    return hashlib.sha1(key.encode()).hexdigest()[:10]


def lab_params_model(lab: str, source: str | Path) -> type[BaseModel] | None:
    """The lab's own parameter model (None for a lab inventory file: its devices decide)."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if lab in EMBEDDED_LABS:
        try:
            return embedded_lab_class(lab).params_model
        except CellabError as exc:
            raise InputError(source, "lab", str(exc)) from exc
    if lab == ANY_BENCH:  # the bench a cluster gives the run checks its own parameters (`cellab worker --lab`)
        return None
    if not lab.endswith((".yaml", ".yml")):
        raise InputError(source, "lab", f"unknown lab {lab!r}",
                         list(EMBEDDED_LABS) + ["<lab inventory>.yaml", f"{ANY_BENCH} (any bench of a cluster)"])
    return _inventory_params_model(lab)


def _inventory_params_model(lab: str) -> type[BaseModel] | None:
    """A lab inventory's own parameters: the eNB's radio parameters when it lists an eNB, the attenuation in
    front of its UEs when it names an attenuator."""
    from cellab.inventory.lab import inventory_params_model
    from cellab.inventory.lab_attenuator import lab_attenuator
    from cellab.inventory.model import load_inventory

    attenuator = lab_attenuator(lab)
    limits = None
    if attenuator is not None:
        where = f"{attenuator.name} channels {', '.join(str(c) for c in attenuator.ue_channels if c is not None)}"
        limits = (attenuator.config.min_db, attenuator.config.max_db, where)
    return inventory_params_model(load_inventory(lab), limits)


def lab_fault_kinds(lab: str) -> frozenset[str] | None:
    """The faults a lab can inject inside a run (EmbeddedLab.fault_kinds); an inventory's: those it has a device
    for (cellab.inventory.faults); a bench a cluster picks: None (not known before a worker takes the run)."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if lab in EMBEDDED_LABS:
        return frozenset(getattr(embedded_lab_class(lab), "fault_kinds", frozenset()))
    if lab == ANY_BENCH:
        return None
    from cellab.inventory.faults import fault_kinds
    from cellab.inventory.model import load_inventory

    return fault_kinds(load_inventory(lab))


def lab_fault_refusal(lab: str) -> Callable[[Any], tuple[str, str] | None] | None:
    """An inventory's per-fault check: (field, why) naming the device it lacks for a fault; None for other labs."""
    from cellab.labs import EMBEDDED_LABS

    if lab in EMBEDDED_LABS or lab == ANY_BENCH:
        return None
    from cellab.inventory.faults import refusal
    from cellab.inventory.model import load_inventory

    inventory = load_inventory(lab)
    return lambda fault: refusal(inventory, fault)


def lab_fault_daemons(lab: str) -> frozenset[str] | None:
    """The core daemons an embedded lab's core_daemon faults may name (EmbeddedLab.fault_daemons); None: any."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    return getattr(embedded_lab_class(lab), "fault_daemons", None) if lab in EMBEDDED_LABS else None


def params_model_for(lab: str, source: str | Path) -> type[BaseModel]:
    """The run parameters: common ones and the lab's, with the lab model's validators (file checks...)."""
    lab_model = lab_params_model(lab, source)
    if lab_model is None:
        return TransportParams
    return create_model("RunParams", __base__=(TransportParams, lab_model))
