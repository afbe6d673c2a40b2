"""The attenuator room's schedule, replay and calibration logic as the controller uses it (the
`SchedulePlanning` service of cellab/contracts/attenuator.py, entry point `cellab.services: attenuator`)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from cellab.contracts.attenuator import AttenuatorConfig, Point
from cellab.errors import CellabError

from .bridge import virtual_lab_attenuator
from .calibration import CalibrationError, fit, load_calibration, parse_calibration, sweep
from .mobility import ANDROID_SIGNAL_LOG, ReplayOptions, load_drive_log, replay
from .schedule import SafetyLimits, Schedule, check, load, parse_csv, parse_yaml, to_csv


class _BusAttenuator:
    """What a sweep needs of an attenuator, done by the caller's `set_db` (its agent, over the bus)."""

    def __init__(self, config: AttenuatorConfig, set_db: Callable[[int, float], float]):
        self.config, self._set_db = config, set_db

    def set(self, channel: int, db: float) -> float:
        return self._set_db(channel, db)


class AttenuatorPlanning:
    def check_schedule_file(self, path: str, config: AttenuatorConfig) -> None:
        check(load(path), SafetyLimits.from_config(config))

    def schedule_points(self, text: str, is_csv: bool, source: str) -> list[Point]:
        return list((parse_csv if is_csv else parse_yaml)(text, source).points)

    def points_csv(self, points: list[Point]) -> str:
        duration_s = max((p.t_s for p in points), default=0.0)
        return to_csv(Schedule(name="merged", points=points, duration_s=duration_s))

    def replay_drive_log(self, drive_log: str, calibration_json: str, channel: int, min_db: float, max_db: float,
                         step_db: float, smoothing_s: float) -> tuple[str, str]:
        fmt = ANDROID_SIGNAL_LOG if drive_log.endswith(".jsonl") else None
        calibration = parse_calibration(json.loads(calibration_json), "calibration")
        result = replay(load_drive_log(drive_log, fmt), calibration,
                        ReplayOptions(channel=channel, min_db=min_db, max_db=max_db, step_db=step_db,
                                      smoothing_s=smoothing_s))
        return to_csv(result.schedule), result.report.model_dump_json(indent=2)

    def check_drive_log(self, path: str) -> None:
        load_drive_log(path, ANDROID_SIGNAL_LOG if path.endswith(".jsonl") else None)

    def check_calibration_file(self, path: str) -> str:
        return load_calibration(Path(path)).model_dump_json(indent=2)

    def calibrate(self, config: AttenuatorConfig, set_db: Callable[[int, float], float],
                  read_rsrp_dbm: Callable[[], float], channel: int, start_db: float, stop_db: float, step_db: float,
                  settle_s: float, samples: int, shield_box: str, ue: str, earfcn: int) -> str:
        try:
            points = sweep(_BusAttenuator(config, set_db), channel, read_rsrp_dbm, start_db, stop_db, step_db,
                           settle_s=settle_s, samples=samples)
            return fit(points, shield_box=shield_box, ue=ue, earfcn=earfcn).model_dump_json(indent=2)
        except CalibrationError as exc:
            raise CellabError(f"calibration failed: {exc}") from None

    def virtual_lab_attenuator(self, pty_link: str, ues: int, max_db: float = 95.0) -> AttenuatorConfig:
        return virtual_lab_attenuator(pty_link, ues=ues, max_db=max_db)


PLANNING = AttenuatorPlanning()
