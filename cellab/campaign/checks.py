"""What `validate` checks of a campaign beyond its schema: the files it names parse (traces as Mahimahi traces,
drive logs and calibrations ordered and finite), the limits the lab would hit at run time (the attenuator's
range and channels, the run timeout against the workload) and the size of the plan (counted, not expanded).
"""

from __future__ import annotations

import json
import math
import subprocess
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellab.contracts.server import ListModulesResult, ModuleInfo, check_param
from cellab.errors import CellabError, InputError, InputErrors
from cellab.inputs import DATA_MAX_BYTES, read_text
from cellab.paths import find_program

if TYPE_CHECKING:
    from cellab.campaign.model import Campaign
    from cellab.inventory.lab_attenuator import LabAttenuator

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
    for plan, faults in campaign.faults.items():  # a deep fade's level: within the box's range, as any level
        for i, fault in enumerate(faults):
            if fault.db is not None and attenuator is not None:
                _check_attenuation(errors, source, f"faults.{plan}[{i}].db", fault.db, attenuator)
    level = campaign.between_runs.attenuation
    if isinstance(level, float) and attenuator is not None:
        _check_attenuation(errors, source, "between_runs.attenuation", level, attenuator)
    elif isinstance(level, float):
        errors.append(InputError(source, "between_runs.attenuation", f"a level ({level:g} dB) needs an attenuator; "
                                 f"lab {campaign.lab} has none in front of its UEs", ["safe", "hold"]))
    _check_module_params(errors, source, [(f, v) for f, n, v in assignments if n == "module_params"])
    lab_ues = LabUEs.of(campaign.lab, attenuator)
    if lab_ues is not None:
        lab_ues = replace(lab_ues, schedule_channels=_schedule_channels(campaign))
    for field, name, value in assignments:
        if name == "ues" and lab_ues is not None:
            errors += lab_ues.problems(source, field, value)
    if lab_ues is not None and lab_ues.names is not None:
        used = lab_ues.used([value for _, name, value in assignments if name == "ues"])
        for field, name, value in assignments:
            if (name == "attenuation_db" and value is not None) or (name == "schedule" and value != "static"):
                errors += lab_ues.run_level_problems(source, field, used)
    if lab_ues is not None:
        used = lab_ues.used([value for _, name, value in assignments if name == "ues"])
        for field, name, value in assignments:
            if name == "schedule" and value != "static" and isinstance(value, str):
                errors += lab_ues.run_schedule_problems(source, field, value, used)
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


def _schedule_channels(campaign: Campaign) -> dict[str, list[int] | None]:
    """The channels each schedule's file moves (a drive log: None, the channel its UE is on or `channel`)."""
    from cellab.contracts.attenuator import planning

    out: dict[str, list[int] | None] = {}
    for name, spec in campaign.schedules.items():
        if spec.file is None:
            out[name] = [spec.channel] if spec.channel is not None else None
            continue
        try:  # the file was checked already (load._check_schedules); one unreadable now is not this check's
            text = read_text(Path(spec.file), DATA_MAX_BYTES)
            points = planning().schedule_points(text, spec.file.lower().endswith(".csv"), spec.file)
        except (InputError, OSError):
            out[name] = None
            continue
        out[name] = sorted({p.channel for p in points})
    return out


def _check_module_params(errors: list[InputError], source: str | Path, assigned: list[tuple[str, Any]]) -> None:
    """Module parameter names and ranges, from this host's server-module loader when it is installed (the
    server agent's own loader checks them again before the first run: its host may have another build)."""
    if not assigned:
        return
    known = local_modules()
    if known is None:
        return
    for field, value in assigned:
        for module, params in (value or {}).items():
            info = known.get(module)
            for param, number in params.items():
                try:
                    check_param(info.param_ranges if info else {}, param, number, source, f"{field}.{module}.{param}",
                                info.param_steps if info else None)
                except InputError as exc:
                    errors.append(exc)


def local_modules() -> dict[str, ModuleInfo] | None:
    """module -> its parameters' ranges and steps as `cellab-modules list` reports them (the server contract's
    listing), or None when this host has no loader or it cannot answer here."""
    try:
        program = find_program(MODULE_LOADER)
        out = subprocess.run([str(program), "list"], capture_output=True, text=True, timeout=20, check=True).stdout
        listing = ListModulesResult.model_validate({**json.loads(out), "available_cc": []})
    except (CellabError, OSError, subprocess.SubprocessError, ValueError):
        return None
    return {m.name: m for m in listing.modules}


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
    from cellab.campaign.traces import read_mahimahi

    read_mahimahi(path)


def _drive_log(path: Path) -> None:
    from cellab.contracts.attenuator import planning  # the attenuator room's parser, not imported

    planning().check_drive_log(str(path))


def _calibration(path: Path) -> None:
    from cellab.contracts.attenuator import planning

    planning().check_calibration_file(str(path))


@dataclass(frozen=True)
class LabUEs:
    """The UEs a lab has, for the run's `ues` (a count, or named UEs with their own attenuation): an inventory's
    by name, each behind its own box and channel; an embedded lab's up to its max_ues, named freely."""

    lab: str
    count: int
    names: tuple[str, ...] | None  # an inventory's UE names (a named UE is that device); None: labels
    boxes: tuple[Any, ...]  # the AttenuatorConfig in front of UE i (None: none)
    driven: str | None  # the box runs drive (LabAttenuator.name): a UE behind another one is not set
    channels: tuple[int | None, ...] = ()  # the channel of the driven box in front of UE i (None: none)
    schedule_channels: Any = None  # schedule name -> the channels its file moves (None: a drive log's, any)

    @classmethod
    def of(cls, lab: str, attenuator: LabAttenuator | None) -> LabUEs | None:
        from cellab.labs import EMBEDDED_LABS, embedded_lab_class

        driven = attenuator.name if attenuator is not None else None
        if lab in EMBEDDED_LABS:
            lab_cls = embedded_lab_class(lab)
            count = int(getattr(lab_cls, "max_ues", 1))
            own = _own_range(lab, lab_cls.params_model)
            box = attenuator.config if attenuator is not None else own
            if own is not None and attenuator is not None and own.max_db < attenuator.config.max_db:
                box = own  # srsran-zmq: a UE's static value must let it attach; its schedules go further
            return cls(lab, count, None, (box,) * count, box.name if box is not None else None,
                       tuple(range(1, count + 1)) if box is not None else (None,) * count)
        if not lab.endswith((".yaml", ".yml")):
            return None  # a bench a cluster picks: known when a worker takes the run
        from cellab.inventory.model import load_inventory

        inventory = load_inventory(lab)
        found = [inventory.ue_attenuator(i) for i in range(len(inventory.devices.ues))]
        return cls(lab, len(found), tuple(u.name for u in inventory.devices.ues),
                   tuple(f[0] if f is not None else None for f in found), driven,
                   tuple(f[1] if f is not None and f[0].name == driven else None for f in found))

    def problems(self, source: str | Path, field: str, value: Any) -> list[InputError]:
        """More UEs than the lab has, a UE name the inventory lacks, attenuation beyond the UE's own box (or
        on a UE no box the runs drive is in front of): what the run would meet, or silently skip."""
        number = _number(value)  # as the run gets it: '3' is 3 UEs
        count = len(value) if isinstance(value, list) else int(number) if number is not None else None
        where = f"lab {self.lab}"
        if count is not None and count > self.count:
            return [InputError(source, field, f"{count} UEs: {where} has {self.count}",
                               list(self.names) if self.names else [f"1..{self.count}"])]
        errors = []
        for i, ue in enumerate(value if isinstance(value, list) else []):
            ue = ue if isinstance(ue, dict) else {}  # each already passed the run parameters' schema
            name, index = ue.get("name"), i
            if self.names is not None:
                if name not in self.names:
                    errors.append(InputError(source, f"{field}[{i}].name", f"UE {name!r} is not in {where}",
                                             list(self.names)))
                    continue
                index = self.names.index(name)
            db = _number(ue.get("attenuation_db"))  # as the run gets it: "70" is 70 dB
            if db is not None:
                errors += self._attenuation(source, f"{field}[{i}].attenuation_db", name or f"#{i}", index, db)
            if ue.get("schedule") not in (None, "static"):  # played on the UE's channel of the driven box, or not
                where_ue = f"{field}[{i}].schedule"
                found = self._attenuation(source, where_ue, name or f"#{i}", index, None)
                errors += found or self._own_schedule(source, where_ue, name or f"#{i}", index, ue["schedule"])
        return errors

    def used(self, ues_values: list[Any]) -> list[int]:
        """The lab's UEs (indices) some run of the campaign uses: the first N for a count, the named ones for a
        list; the first alone when no run sets `ues`."""
        used: set[int] = set() if ues_values else {0}
        for value in ues_values:
            number = _number(value)
            if isinstance(value, list):
                for i, ue in enumerate(value):
                    name = ue.get("name") if isinstance(ue, dict) else None
                    used.add(self.names.index(name) if self.names and name in self.names else i)
            elif number is not None:
                used.update(range(min(int(number), self.count)))
        return sorted(i for i in used if i < self.count)

    def run_level_problems(self, source: str | Path, field: str, used: list[int]) -> list[InputError]:
        """A run's own attenuation or schedule goes to every UE of the run on the box the runs drive: a UE the
        campaign uses that sits behind another box would keep its attenuation without a word."""
        skipped = [self.names[i] if self.names else f"#{i}" for i in used
                   if self.boxes[i] is not None and self.boxes[i].name != self.driven]
        if not skipped:
            return []
        boxes = sorted({self.boxes[i].name for i in used if self.boxes[i] is not None and self.boxes[i].name
                        != self.driven})
        return [InputError(source, field, f"applies to every UE of a run, but UE {', '.join(skipped)} is behind "
                           f"attenuator {', '.join(boxes)}; runs drive {self.driven} (the box in front of the "
                           "inventory's first attenuated UE): give the run only UEs behind it")]

    def _own_schedule(self, source: str | Path, field: str, name: str, index: int, schedule: str) -> list[InputError]:
        """A UE's own schedule moves that UE's channel and no other: its file must name exactly that channel."""
        moves = (self.schedule_channels or {}).get(schedule)
        channel = self.channels[index] if index < len(self.channels) else None
        if moves is None or channel is None or moves == [channel]:
            return []
        return [InputError(source, field, f"schedule {schedule!r} moves channel {_listed(moves)} (its file's "
                           f"channels), but UE {name} is on channel {channel}: a UE's schedule moves its own "
                           "channel only", [f"channels: [{channel}]"])]

    def run_schedule_problems(self, source: str | Path, field: str, schedule: str, used: list[int]) -> list[InputError]:
        """A run's schedule moves the channels its file names, and only those: each must be a channel of a UE
        the campaign uses (a channel of no UE would move nothing the runs measure, or another UE's box)."""
        moves = (self.schedule_channels or {}).get(schedule)
        ue_channels = {self.channels[i]: i for i in used if i < len(self.channels) and self.channels[i] is not None}
        if moves is None or not ue_channels or set(moves) <= set(ue_channels):
            return []
        ues = ", ".join(f"{self.names[i] if self.names else f'#{i}'} on channel {c}"
                        for c, i in sorted(ue_channels.items()))
        return [InputError(source, field, f"schedule {schedule!r} moves channel {_listed(moves)} (its file's "
                           f"channels), but the campaign's UEs are {ues}", sorted(ue_channels))]

    def _attenuation(self, source: str | Path, field: str, name: str, index: int, db: Any) -> list[InputError]:
        box = self.boxes[index] if index < len(self.boxes) else None
        if box is None:
            return [InputError(source, field, f"no attenuator is in front of UE {name} in lab {self.lab}")]
        if box.name != self.driven:
            return [InputError(source, field, f"UE {name} is behind attenuator {box.name}; runs drive {self.driven} "
                                              "(the box in front of the inventory's first attenuated UE)")]
        if isinstance(db, int | float) and not isinstance(db, bool) and not box.min_db <= db <= box.max_db:
            label = box.name if isinstance(box, _Range) else f"attenuator {box.name}"
            return [InputError(source, field, f"{db:g} dB is beyond {label}, which serves UE {name}",
                               [f"{box.min_db:g} .. {box.max_db:g}"])]
        return []


@dataclass(frozen=True)
class _Range:
    name: str
    min_db: float
    max_db: float


def _own_range(lab: str, params_model: Any) -> _Range | None:
    """A lab that attenuates each UE itself (srsran-zmq: the broker's per-UE gain) takes the range of its own
    `attenuation_db` parameter for a UE's; a lab without that parameter has nothing in front of its UEs."""
    info = getattr(params_model, "model_fields", {}).get("attenuation_db")
    if info is None:
        return None
    low = next((getattr(m, "ge", None) for m in info.metadata if getattr(m, "ge", None) is not None), 0.0)
    high = next((getattr(m, "le", None) for m in info.metadata if getattr(m, "le", None) is not None), float("inf"))
    return _Range(f"lab {lab}'s own per-UE attenuation", float(low), float(high))


def _listed(channels: list[int]) -> str:
    return ", ".join(str(c) for c in channels)


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or value is None:
        return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None
