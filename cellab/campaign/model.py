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
import itertools
import json
import random
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, ValidationError, create_model, field_validator, model_validator

from cellab.contracts.server import CC_MODULES, KERNEL_CCS
from cellab.contracts.ue import SR_PROBE_MAX_S
from cellab.errors import CellabError, InputError, InputErrors, from_validation_error, shown_key, unknown_key
from cellab.faults.plans import NO_FAULT, FaultSpec, check_fault_plans
from cellab.inputs import Label, Name, name_type, read_yaml
from cellab.campaign.rules import LATE_TTI_THRESHOLDS_MS, STOP_METRICS, Retry, StopRule  # noqa: F401  (re-exported)
from cellab.records import PlannedRun, Strict

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
                                   description="attenuation schedule on this UE's channel (static or a name in `schedules`)")
    attenuation_db: float | None = Field(None, allow_inf_nan=False, description="attenuation on this UE's channel")


class TransportParams(Strict):
    """Run parameters every lab understands."""

    ues: int | list[UESpec] | None = Field(
        None, description=f"the run's UEs: a count (1..{MAX_UES}), or a list of UEs each with its own name, flows, "
                          "cc, receiver, schedule and attenuation; null: the lab's (virtual: 1; inventory: all)")

    cc: Literal[CONGESTION_CONTROLS] = "cubic"  # type: ignore[valid-type]
    receiver: Literal[RECEIVER_CONTROLS] = "none"  # type: ignore[valid-type]
    schedule: Label = Field("static",
                            description="attenuation schedule played during the workload: static or a name in `schedules`")
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


PATH_PARAMS = ("trace", "trace_up")  # lab parameters naming files: relative to the campaign file


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
    order: Order = Order()
    factors: dict[Name, list[Any] | dict[Name, dict[str, Any]]] = {}  # names and level names: labels people read
    fixed: dict[str, Any] = {}
    schedules: dict[Label, ScheduleSpec] = {}
    faults: dict[Label, list[FaultSpec]] = Field(
        {}, description="fault plans: name -> faults (kind, at_s, duration_s, ue, daemon) injected during the "
                        "workload of the runs whose `faults` parameter names the plan (cellab/faults/plans.py)")
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
    from cellab.inventory.model import load_inventory
    from cellab.inventory.lab import inventory_params_model
    from cellab.inventory.lab_attenuator import lab_attenuator

    attenuator = lab_attenuator(lab)
    limits = None
    if attenuator is not None:
        where = f"{attenuator.name} channels {', '.join(str(c) for c in attenuator.ue_channels if c is not None)}"
        limits = (attenuator.config.min_db, attenuator.config.max_db, where)
    return inventory_params_model(load_inventory(lab), limits)


def lab_fault_kinds(lab: str) -> frozenset[str] | None:
    """The faults a lab can inject inside a run (EmbeddedLab.fault_kinds); an inventory's: none yet; a bench a
    cluster picks: None (not known before a worker takes the run)."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if lab in EMBEDDED_LABS:
        return frozenset(getattr(embedded_lab_class(lab), "fault_kinds", frozenset()))
    if lab == ANY_BENCH:
        return None
    return frozenset()


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


def load_campaign(path: str | Path, lab: str | None = None) -> Campaign:
    """Read and validate a campaign; `lab` overrides the file's lab (the CLI's --lab).
    Files it names (lab inventory, traces, schedules, drive logs) are made absolute, relative to the
    campaign file (an inventory given with --lab: to the caller)."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "a campaign is a YAML mapping (name, lab, factors, ...)")
    if lab is not None:
        data["lab"] = lab
    lab_value = data.get("lab")
    if isinstance(lab_value, str) and lab_value.endswith((".yaml", ".yml")):
        base = Path.cwd() if lab is not None else path.parent
        data["lab"] = str((base / lab_value).resolve())
    factors = data.get("factors")
    if isinstance(factors, dict) and isinstance(factors.get(LAB_FACTOR), list):
        factors[LAB_FACTOR] = [str((path.parent / v).resolve()) if isinstance(v, str) and v.endswith((".yaml", ".yml"))
                               else v for v in factors[LAB_FACTOR]]
    try:
        campaign = Campaign.model_validate(data)  # not **data: a YAML key may be no string (`? x`)
    except ValidationError as exc:
        raise from_validation_error(path, exc) from exc
    _resolve_paths(campaign, path.parent.resolve())
    validate_parameters(campaign, path)
    return campaign


def _resolve_paths(campaign: Campaign, base: Path) -> None:
    def absolute(value: Any) -> Any:
        return str(base / value) if isinstance(value, str) and value and not Path(value).is_absolute() else value

    for name in PATH_PARAMS:
        if name in campaign.fixed:
            campaign.fixed[name] = absolute(campaign.fixed[name])
    for name, values in campaign.factors.items():
        if isinstance(values, dict):
            for level in values.values():
                for key in PATH_PARAMS:
                    if key in level:
                        level[key] = absolute(level[key])
        elif name in PATH_PARAMS:
            campaign.factors[name] = [absolute(v) for v in values]
    for spec in campaign.schedules.values():
        spec.file, spec.drive_log = absolute(spec.file), absolute(spec.drive_log)
        if spec.calibration != "auto":
            spec.calibration = absolute(spec.calibration)


def _assignments(campaign: Campaign) -> list[tuple[str, str, Any]]:
    """Every (field, parameter, value) the campaign sets: fixed values, factor values, bundle values."""
    out = [(f"fixed.{shown_key(name)}", name, value) for name, value in campaign.fixed.items()]
    for name, values in campaign.factors.items():
        if isinstance(values, dict):
            for level, params in values.items():
                out += [(f"factors.{name}.{level}.{shown_key(key)}", key, value) for key, value in params.items()]
        else:
            out += [(f"factors.{name}[{i}]", name, value) for i, value in enumerate(values)]
    return out


def lab_levels(campaign: Campaign) -> list[str]:
    """The labs the campaign runs on: the `lab` factor's levels, else its one lab."""
    levels = campaign.factors.get(LAB_FACTOR)
    return list(levels) if isinstance(levels, list) else [campaign.lab]


def on_lab(campaign: Campaign, lab: str) -> Campaign:
    """The campaign as one lab sees it: that lab, and no `lab` factor."""
    return campaign.model_copy(update={"lab": lab, "factors": {k: v for k, v in campaign.factors.items()
                                                               if k != LAB_FACTOR}})


def validate_parameters(campaign: Campaign, source: str | Path) -> None:
    """Names must be run parameters of the lab (bundle factor names are labels); every value allowed. With a
    `lab` factor, the campaign is checked once per lab."""
    if LAB_FACTOR in campaign.factors:
        levels = campaign.factors[LAB_FACTOR]
        if not isinstance(levels, list) or not levels or not all(isinstance(v, str) for v in levels):
            raise InputError(source, f"factors.{LAB_FACTOR}", "a list of labs",
                             ["virtual", "wired", "virtual-android", "srsran-zmq", "<lab inventory>.yaml"])
        if len(set(levels)) != len(levels):
            raise InputError(source, f"factors.{LAB_FACTOR}", "repeated lab")
        for lab in levels:
            try:
                validate_parameters(on_lab(campaign, lab), source)
            except (InputError, InputErrors) as exc:
                raise InputError(source, f"factors.{LAB_FACTOR}", f"on lab {lab}: {exc}") from None
        return
    model = params_model_for(campaign.lab, source)
    known = sorted(model.model_fields)
    errors: list[InputError] = []
    for name, values in campaign.factors.items():
        if isinstance(values, dict) and name in model.model_fields:
            errors.append(InputError(source, f"factors.{name}", "a bundle factor's name is a label, not a parameter; "
                                     "list the parameter's values instead"))
        elif not isinstance(values, dict) and name not in model.model_fields:
            errors.append(unknown_key(source, f"factors.{name}", name, known, "campaign", "unknown parameter"))
        if not values:
            errors.append(InputError(source, f"factors.{name}", "empty list: a factor needs at least one value"))
        if isinstance(values, list) and len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            errors.append(InputError(source, f"factors.{name}", "repeated value"))
    for field, name, _ in _assignments(campaign):
        if not field.endswith("]") and name not in model.model_fields:  # fixed values and bundle levels
            errors.append(unknown_key(source, field, name, known, "campaign", "unknown parameter"))
    errors += [InputError(source, field, "the run's UEs are set with `ues` (a count or a list of UEs)", ["ues"])
               for field, name, _ in _assignments(campaign) if name == "n_ues"]
    receivers = [value for _, name, value in _assignments(campaign) if name == "receiver"]
    if any(r != "none" for r in receivers) and campaign.workload.tool == "iperf3":
        errors.append(InputError(source, "workload.tool", "receiver control (exll, dfcsd) runs in cellab-probe",
                                 ["probe"]))
    allowed_schedules = ["static", *campaign.schedules]
    for field, name, value in _assignments(campaign):
        if name == "schedule" and value not in allowed_schedules:
            errors.append(InputError(source, field, f"unknown schedule {value!r}", allowed_schedules))
        if name == "ues" and isinstance(value, list):
            for i, ue in enumerate(value):
                if isinstance(ue, dict) and ue.get("schedule") not in (None, *allowed_schedules):
                    errors.append(InputError(source, f"{field}[{i}].schedule", f"unknown schedule {ue['schedule']!r}",
                                             allowed_schedules))
    used_plans = [(field, value) for field, name, value in _assignments(campaign) if name == "faults"]
    if campaign.faults or used_plans:
        errors += check_fault_plans(campaign.faults, used_plans, campaign.workload.duration_s, campaign.lab,
                                    lab_fault_kinds(campaign.lab), source, daemons=lab_fault_daemons(campaign.lab))
        scheduled = [field for field, name, value in _assignments(campaign) if name == "schedule" and value != "static"]
        radio = [name for _, name in used_plans if any(f.kind == "radio_outage" for f in campaign.faults.get(name, []))]
        if scheduled and radio:  # both would drive the same attenuator channel
            errors.append(InputError(source, scheduled[0], f"a schedule and the radio_outage faults of plan "
                                     f"{radio[0]!r} would both drive the UE's attenuator; keep schedules static in "
                                     "a campaign with radio outages", ["static"]))
    for name in set(campaign.factors) & set(campaign.fixed):
        errors.append(InputError(source, f"fixed.{name}", "is also a factor; keep it in one place"))
    if campaign.schedules:
        _check_schedules(campaign, source, errors)
    if errors:
        raise InputErrors(errors)
    for field, name, value in _assignments(campaign):
        _check_value(model, source, field, name, value, errors)
    if not errors:  # files named, lab limits, plan size (cellab/campaign/checks.py)
        from cellab.campaign.checks import check_campaign, check_plan_size
        from cellab.inventory.lab_attenuator import lab_attenuator

        check_plan_size(campaign, source)
        errors += check_campaign(campaign, source, _assignments(campaign), lab_attenuator(campaign.lab))
    if not errors and campaign.faults:
        errors += _check_run_fault_daemons(campaign, source)
    if errors:
        raise InputErrors(errors)


def _check_run_fault_daemons(campaign: Campaign, source: str | Path) -> list[InputError]:
    """Each run's core_daemon faults against what that run's lab can kill, when a run parameter decides it
    (EmbeddedLab.run_fault_daemons; srsran-zmq: its `core`): one error per fault and setting."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if campaign.lab not in EMBEDDED_LABS or not any(f.kind == "core_daemon" for p in campaign.faults.values() for f in p):
        return []  # the plan is expanded only when a core_daemon fault needs it
    of_run = embedded_lab_class(campaign.lab).run_fault_daemons
    errors: list[InputError] = []
    seen: set[tuple[str, str]] = set()
    for run in plan(campaign, source):
        name = run.params.get("faults", NO_FAULT)
        for i, fault in enumerate(campaign.faults.get(name, [])):
            found = of_run(run.params) if fault.kind == "core_daemon" else None
            if found is None or fault.daemon in found[1]:
                continue
            field, (setting, daemons) = f"faults.{name}[{i}].daemon", found
            if (field, setting) not in seen:
                seen.add((field, setting))
                errors.append(InputError(source, field, f"lab {campaign.lab} with {setting} cannot kill "
                                         f"{fault.daemon}", sorted(daemons)))
    return errors


def _check_schedules(campaign: Campaign, source: str | Path, errors: list[InputError]) -> None:
    """Schedules need the lab's attenuator; files must keep its safety limits (rejected here, naming the row,
    not at the run). `calibration: auto` sweeps while the UE agent reports RSRP: every UE kind's `signal`
    does (the virtual UE from the emulated cell, a phone from its modem)."""
    from cellab.contracts.attenuator import planning
    from cellab.inventory.lab_attenuator import lab_attenuator

    attenuator = lab_attenuator(campaign.lab)
    for name, spec in campaign.schedules.items():
        if attenuator is None:
            errors.append(InputError(source, f"schedules.{name}", f"lab {campaign.lab} has no attenuator in front of "
                                     "its UE (a lab inventory names one in devices.ues[].attenuator)"))
            continue
        if spec.file is not None:
            try:
                planning().check_schedule_file(spec.file, attenuator.config)
            except InputError as exc:
                errors.append(InputError(source, f"schedules.{name}.file", exc.render()))


def _check_value(model: type[BaseModel], source: str | Path, field: str, name: str, value: Any,
                 errors: list[InputError]) -> None:
    try:
        model(**{name: value})
    except ValidationError as exc:
        for err in from_validation_error(source, exc).errors:
            inner = err.field[len(name):] if err.field.startswith(name) else ""  # ues[0].name: which UE, which field
            errors.append(InputError(source, field + inner, err.message, err.allowed))


def plan(campaign: Campaign, source: str | Path = "<campaign>") -> list[PlannedRun]:
    """Every factor combination × repeat, in sequential or seeded-random order."""
    from cellab.campaign.checks import check_plan_size

    check_plan_size(campaign, source)  # counted before anything is expanded
    models = {lab: params_model_for(lab, source) for lab in lab_levels(campaign)}
    names = sorted(campaign.factors)
    levels = [list(campaign.factors[n]) for n in names]  # a bundle's levels are its keys
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(*levels)]
    cells = [(factors, rep) for rep in range(campaign.repeat) for factors in combos]
    if campaign.order.mode == "randomized":
        random.Random(campaign.order.seed).shuffle(cells)
    runs = []
    for index, (factors, rep) in enumerate(cells):
        values = dict(campaign.fixed)
        for name, level in factors.items():
            bundle = campaign.factors[name]
            values |= bundle[level] if isinstance(bundle, dict) else {name: level}
        lab = values.pop(LAB_FACTOR, campaign.lab)
        try:
            params = models[lab](**values).model_dump(mode="json")
        except ValidationError as exc:  # a rule across parameters (ul_prb > n_prb) in this combination
            label = ", ".join(f"{k}={v}" for k, v in factors.items()) or "fixed"
            raise from_validation_error(source, exc, f"run {label}") from None
        if LAB_FACTOR in factors:
            params[LAB_FACTOR] = lab
        runs.append(PlannedRun(index=index, run_id=run_id(factors, rep), repeat=rep, factors=factors, params=params))
    return runs
