"""A campaign's attenuation schedules, ready for the attenuator agent's `play_schedule`.

A schedule is a file (YAML segments or CSV points), or a drive-test log (RSRP over time) turned into
one: calibrate the lab's attenuator (a sweep through the attenuator agent while the UE agent reports
RSRP, once per campaign, kept in the result folder so a resumed campaign reuses it), then map each
RSRP to the attenuation that gives it. The parsing, replay and fit are the attenuator room's, reached
through its planning service (cellab/contracts/attenuator.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cellab.bus import Controller
from cellab.campaign.model import Campaign, ScheduleSpec
from cellab.contracts.attenuator import AttenuatorClient, planning
from cellab.contracts.ue import UEClient
from cellab.errors import CellabError, InputError
from cellab.inputs import read_text
from cellab.inventory.lab_attenuator import LabAttenuator
from cellab.records import write_atomic

CALIBRATION_SWEEP_DB = (0.0, 70.0, 5.0)  # start, stop, step (within the attenuator's limits)
CALIBRATION_SETTLE_S = 0.3  # the emulated UE's RSRP follows within a TTI; a phone needs seconds (its own setting)
CALIBRATION_SAMPLES = 2
VIRTUAL_CELL_EARFCN = 3350  # the carrier a fit is stored under; hardware EARFCNs come with the eNB profile
SCHEDULE_MAX_BYTES = 8_000_000  # what play_schedule accepts over the bus


class Schedules:
    def __init__(self, campaign: Campaign, result_dir: Path, ctl: Controller, agent: str,
                 attenuator: LabAttenuator, ue_agent: str):
        self.campaign = campaign
        self.result_dir = result_dir
        self.attenuator_agent = AttenuatorClient(ctl, agent, 10.0)
        self.attenuator = attenuator
        self.ue = UEClient(ctl, ue_agent, 10.0)  # reports RSRP for the calibration sweep
        self._play_params: dict[str, dict[str, Any]] = {}
        self.held_db: dict[int, float] = {}  # channel -> the level it keeps between runs (between_runs)

    def play_params(self, name: str) -> dict[str, Any]:
        """`play_schedule` parameters for the schedule of this name. A file is read and checked again for
        every run (one edited mid-campaign fails the run that meets it, naming the row); a drive-log replay
        is built once per campaign and kept in the result folder."""
        spec = self.campaign.schedules[name]
        if spec.file is not None:
            path = Path(spec.file)
            try:
                planning().check_schedule_file(str(path), self.attenuator.config)
            except InputError as exc:
                raise InputError(f"schedules.{name}", "file", exc.render()) from None
            key = "schedule_csv" if path.suffix == ".csv" else "schedule_yaml"
            return {key: read_text(path, SCHEDULE_MAX_BYTES), "name": name, "attenuator": self.attenuator.name}
        if name not in self._play_params:
            self._play_params[name] = {"schedule_csv": self._replay(name, spec), "name": name,
                                       "attenuator": self.attenuator.name}
        return self._play_params[name]

    def merged_play_params(self, wanted: list[tuple[int, str, str, bool]]) -> dict[str, Any] | None:
        """The run's schedules played as one: for each (channel, schedule, UE, first) the schedule's points on that
        UE's channel, and no others (a schedule acts on its file's channels only). A drive log replayed with no
        `channel` of its own is moved to the channel of the UE it is for (`first`: its own, or the run's first UE's).
        None when no point is left (no UE on a channel a schedule moves: validate refuses that campaign)."""
        points, names, missed, whole = [], set(), [], None
        for channel, name, ue, first in wanted:
            params = self.play_params(name)
            is_csv = "schedule_csv" in params
            text = params["schedule_csv"] if is_csv else params["schedule_yaml"]
            spec = self.campaign.schedules[name]
            movable = spec.drive_log is not None and spec.channel is None
            if movable and not first:
                continue
            every = planning().schedule_points(text, is_csv, f"schedules.{name}")
            found = [p for p in every if movable or p.channel == channel]
            if len(found) == len(every) and (not movable or {p.channel for p in every} == {channel}):
                whole = params  # the file as it is (its trailing hold too): nothing left out, nothing moved
            if not found:
                missed.append(f"schedule {name!r} (UE {ue} on channel {channel})")
                continue
            names.add(name)
            points += [p.model_copy(update={"channel": channel, "source": f"{name}: {p.source}"}) for p in found]
        if not points:
            if missed:
                raise CellabError(f"{'; '.join(missed)}: the schedule's file moves none of the run's UEs' channels")
            return None
        if len(names) == 1 and whole is not None and len(points) == len(every):
            return whole
        points.sort(key=lambda p: (p.t_s, p.channel))
        label = "+".join(sorted(names))[:80]
        return {"schedule_csv": planning().points_csv(points), "name": label, "attenuator": self.attenuator.name}

    def held_channels(self, wanted: list[tuple[int, str]]) -> dict[int, float]:
        """With `between_runs.attenuation` hold or a level: channel -> the level it keeps from the last run, for the
        channels of (channel, schedule) a schedule of this run moves (the run's static value is not set there; a
        lab that restarts its radio per run, the virtual cell, gets the level again)."""
        if self.campaign.between_runs.attenuation == "safe":
            return {}
        held = set()
        for channel, name in wanted:
            spec = self.campaign.schedules[name]
            if spec.file is None:
                held.add(channel)
                continue
            text = read_text(Path(spec.file), SCHEDULE_MAX_BYTES)
            points = planning().schedule_points(text, spec.file.lower().endswith(".csv"), f"schedules.{name}")
            held |= {channel} & {p.channel for p in points}
        return {channel: self.held_db[channel] for channel in held if channel in self.held_db}

    def after_run(self, attenuator: AttenuatorClient, channels: set[int], log: Path | None) -> None:
        """A finished run's channels: a level set on them (`between_runs.attenuation: <dB>`), or with `hold` the
        last value its schedule played on each (from the player's log) remembered for the next run."""
        level = self.campaign.between_runs.attenuation
        if isinstance(level, float):
            for channel in sorted(channels):
                self.held_db[channel] = attenuator.set(self.attenuator.name, channel, level).applied_db
        elif level == "hold" and log is not None and log.exists():
            for line in log.read_text().splitlines():
                row = json.loads(line)
                if row.get("channel") in channels and isinstance(row.get("db"), int | float):
                    self.held_db[row["channel"]] = float(row.get("readback_db") or row["db"])

    def _replay(self, name: str, spec: ScheduleSpec) -> str:
        assert spec.drive_log is not None
        channel = spec.channel or next(c for c in self.attenuator.ue_channels if c is not None)
        info = self.attenuator_agent.info(self.attenuator.name)
        if spec.calibration == "auto":
            calibration_json = self._auto_calibration(channel)
        else:
            try:
                calibration_json = planning().check_calibration_file(spec.calibration)
            except InputError as exc:
                raise InputError(f"schedules.{name}", "calibration", exc.render(),
                                 ["auto", "<calibration>.json"]) from None
        csv_text, report = planning().replay_drive_log(spec.drive_log, calibration_json, channel, info.min_db,
                                                       info.max_db, info.step_db, spec.smoothing_s)
        write_atomic(self.result_dir / f"schedule-{name}.csv", csv_text)
        write_atomic(self.result_dir / f"schedule-{name}.replay.json", report)
        return csv_text

    def _auto_calibration(self, channel: int) -> str:
        """Sweep the attenuator through its agent while the UE agent reports RSRP (`signal`), fit, and keep
        the fit in the result folder (a resumed campaign reuses it)."""
        cached = self.result_dir / "calibration.json"
        if cached.exists():
            return planning().check_calibration_file(str(cached))
        config = self.attenuator.config
        start_db, stop_db = max(config.min_db, CALIBRATION_SWEEP_DB[0]), min(config.max_db, CALIBRATION_SWEEP_DB[1])
        calibration_json = planning().calibrate(
            config, self._set_db, self._read_rsrp, channel, start_db, stop_db, CALIBRATION_SWEEP_DB[2],
            settle_s=CALIBRATION_SETTLE_S, samples=CALIBRATION_SAMPLES, shield_box=config.name, ue=self.ue.agent,
            earfcn=VIRTUAL_CELL_EARFCN)
        write_atomic(cached, calibration_json)
        return calibration_json

    def _set_db(self, channel: int, db: float) -> float:
        return self.attenuator_agent.set(self.attenuator.name, channel, db).applied_db

    def _read_rsrp(self) -> float:
        return self.ue.signal().rsrp_dbm
