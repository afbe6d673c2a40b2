"""What `validate` checks of a campaign beyond its schema: the files it names parse (traces as Mahimahi traces,
drive logs and calibrations ordered and finite), the limits the lab would hit at run time (the attenuator's
range and channels, the run timeout against the workload) and the size of the plan (counted, not expanded).
"""

from __future__ import annotations

import json
import math
import subprocess
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellab.contracts.server import ListModulesResult, check_param
from cellab.errors import CellabError, InputError, InputErrors
from cellab.paths import find_program

if TYPE_CHECKING:
    from cellab.campaign import Campaign
    from cellab.lab_attenuator import LabAttenuator

MAX_PLANNED_RUNS = 100_000
MODULE_LOADER = "cellab-modules"  # the server room's loader program (build/bin), asked with `list`
FILE_PARAMS = ("trace", "trace_up")


def planned_count(campaign: Campaign) -> int:
    """Runs the plan will have: factor levels multiplied, times repeat (nothing is expanded)."""
    repeats = campaign.until.max if campaign.until is not None else campaign.repeat  # the most it may grow to
    return math.prod(len(values) for values in campaign.factors.values()) * repeats


def check_plan_size(campaign: Campaign, source: str | Path) -> None:
    count = planned_count(campaign)
    if count > MAX_PLANNED_RUNS:
        raise InputError(source, "factors", f"the plan has {count} runs (factor levels × repeat {campaign.repeat})",
                         [f"up to {MAX_PLANNED_RUNS} runs"])


def check_campaign(campaign: Campaign, source: str | Path, assignments: list[tuple[str, str, Any]],
                   attenuator: LabAttenuator | None) -> list[InputError]:
    """Every problem found, each naming the campaign, the field and (inside) the file it read."""
    errors: list[InputError] = []
    workload_s = _workload_s(campaign)
    if campaign.timeouts.run_s <= workload_s:
        errors.append(InputError(source, "timeouts.run_s", f"{campaign.timeouts.run_s:g} s is not longer than the "
                                 f"workload ({workload_s:g} s)", [f"more than {workload_s:g} s"]))
    for field, name, value in assignments:
        if name in FILE_PARAMS and isinstance(value, str):
            _read(errors, source, field, _trace, value)
        if name == "attenuation_db" and attenuator is not None:
            _check_attenuation(errors, source, field, value, attenuator)
    _check_module_params(errors, source, [(f, v) for f, n, v in assignments if n == "module_params"])
    for name, spec in campaign.schedules.items():
        if spec.channel is not None and attenuator is not None and spec.channel > attenuator.config.channels:
            errors.append(InputError(source, f"schedules.{name}.channel", f"{attenuator.name} has "
                                     f"{attenuator.config.channels} channels",
                                     list(range(1, attenuator.config.channels + 1))))
        if spec.drive_log is not None:
            _read(errors, source, f"schedules.{name}.drive_log", _drive_log, spec.drive_log)
            if spec.calibration != "auto":
                _read(errors, source, f"schedules.{name}.calibration", _calibration, spec.calibration)
    return errors


def _check_module_params(errors: list[InputError], source: str | Path, assigned: list[tuple[str, Any]]) -> None:
    """Module parameter names and ranges, from this host's server-module loader when it is installed (the
    server agent's own loader checks them again before the first run: its host may have another build)."""
    if not assigned:
        return
    ranges = _local_module_ranges()
    if ranges is None:
        return
    for field, value in assigned:
        for module, params in (value or {}).items():
            for param, number in params.items():
                try:
                    check_param(ranges.get(module, {}), param, number, source, f"{field}.{module}.{param}")
                except InputError as exc:
                    errors.append(exc)


def _local_module_ranges() -> dict[str, dict[str, Any]] | None:
    """module -> parameter ranges as `cellab-modules list` reports them (the server contract's listing), or
    None when this host has no loader or it cannot answer here."""
    try:
        program = find_program(MODULE_LOADER)
        out = subprocess.run([str(program), "list"], capture_output=True, text=True, timeout=20, check=True).stdout
        listing = ListModulesResult.model_validate({**json.loads(out), "available_cc": []})
    except (CellabError, OSError, subprocess.SubprocessError, ValueError):
        return None
    return {m.name: m.param_ranges for m in listing.modules}


def _workload_s(campaign: Campaign) -> float:
    workload = campaign.workload
    return workload.duration_s + max(workload.flow_start_ms or [0]) / 1000


def _check_attenuation(errors: list[InputError], source: str | Path, field: str, value: Any,
                       attenuator: LabAttenuator) -> None:
    limits = attenuator.config
    for db in value if isinstance(value, list) else [value]:
        if isinstance(db, int | float) and not isinstance(db, bool) and not limits.min_db <= db <= limits.max_db:
            errors.append(InputError(source, field, f"{db} dB is beyond the attenuator {limits.name} "
                                     f"({limits.min_db:g}..{limits.max_db:g} dB)",
                                     [f"{limits.min_db:g} .. {limits.max_db:g}"]))
            return


def _read(errors: list[InputError], source: str | Path, field: str, reader: Any, path: str) -> None:
    try:
        reader(Path(path))
    except InputError as exc:
        errors.append(InputError(source, field, exc.render()))
    except InputErrors as exc:
        errors += [InputError(source, field, e.render()) for e in exc.errors]


def _trace(path: Path) -> None:
    from cellab.traces import read_mahimahi

    read_mahimahi(path)


def _drive_log(path: Path) -> None:
    from cellab.contracts.attenuator import planning  # the attenuator room's parser, not imported

    planning().check_drive_log(str(path))


def _calibration(path: Path) -> None:
    from cellab.contracts.attenuator import planning

    planning().check_calibration_file(str(path))
