"""Loading a campaign and planning it: the file read and validated, its files resolved, every run's parameters
checked against its lab (the lab's own model, schedules, fault daemons), and the run matrix in run order."""

from __future__ import annotations

import itertools
import json
import random
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from cellab.campaign import keys  # noqa: F401  (the campaign's key hints for error messages)
from cellab.campaign.model import (
    LAB_FACTOR,
    PATH_PARAMS,
    Campaign,
    lab_fault_daemons,
    lab_fault_kinds,
    lab_fault_refusal,
    params_model_for,
    run_id,
)
from cellab.campaign.rules import LATE_TTI_THRESHOLDS_MS, STOP_METRICS, Retry, StopRule  # noqa: F401  (re-exported)
from cellab.errors import InputError, InputErrors, from_validation_error, shown_key, unknown_key
from cellab.faults.spec import NO_FAULT, check_fault_plans
from cellab.inputs import read_yaml
from cellab.pathnames import check_text_tree
from cellab.records import PlannedRun


CAMPAIGN_PATH_KEYS = ("lab", "file", "drive_log", "calibration", *PATH_PARAMS)


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
    check_text_tree(data, path, CAMPAIGN_PATH_KEYS)  # before any file name reaches the system
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
                                    lab_fault_kinds(campaign.lab), source, daemons=lab_fault_daemons(campaign.lab),
                                    refuse=lab_fault_refusal(campaign.lab))
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
    if not errors:  # faults on UEs the runs have, stopping rules on metrics they report
        from cellab.campaign.run_checks import needs_runs, run_problems

        errors += run_problems(campaign, plan(campaign, source), source) if needs_runs(campaign) else []
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
