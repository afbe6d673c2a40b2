"""A campaign's attenuation schedules, ready for the attenuator agent's `play_schedule`.

A schedule is a file (YAML segments or CSV points), or a drive-test log (RSRP over time) turned into
one: calibrate the lab's attenuator (a sweep through the attenuator agent while the UE agent reports
RSRP, once per campaign, kept in the result folder so a resumed campaign reuses it), then map each
RSRP to the attenuation that gives it (attenuator/mobility.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cellab.contracts.attenuator import AttenuatorConfig
from cellab.bus import Controller
from cellab.campaign import Campaign, ScheduleSpec
from cellab.errors import CellabError, InputError
from cellab.lab_attenuator import LabAttenuator
from cellab.store import write_atomic

CALIBRATION_SWEEP_DB = (0.0, 70.0, 5.0)  # start, stop, step (within the attenuator's limits)
CALIBRATION_SETTLE_S = 0.3  # the emulated UE's RSRP follows within a TTI; a phone needs seconds (its own setting)
CALIBRATION_SAMPLES = 2
VIRTUAL_CELL_EARFCN = 3350  # the carrier a fit is stored under; hardware EARFCNs come with the eNB profile


class Schedules:
    def __init__(self, campaign: Campaign, result_dir: Path, ctl: Controller, agent: str,
                 attenuator: LabAttenuator, ue_agent: str):
        self.campaign = campaign
        self.result_dir = result_dir
        self.ctl = ctl
        self.agent = agent  # the attenuator's
        self.attenuator = attenuator
        self.ue_agent = ue_agent  # reports RSRP for the calibration sweep
        self._play_params: dict[str, dict[str, Any]] = {}

    def play_params(self, name: str) -> dict[str, Any]:
        """`play_schedule` parameters for the schedule of this name (built once per campaign)."""
        if name not in self._play_params:
            spec = self.campaign.schedules[name]
            source = f"schedules.{name}"
            if spec.file is not None:
                path = Path(spec.file)
                try:
                    text = path.read_text()
                except OSError as exc:
                    raise InputError(source, "file", f"cannot read {path}: {exc.strerror}") from None
                key = "schedule_csv" if path.suffix == ".csv" else "schedule_yaml"
                self._play_params[name] = {key: text, "name": name, "attenuator": self.attenuator.name}
            else:
                self._play_params[name] = {"schedule_csv": self._replay(name, spec), "name": name,
                                           "attenuator": self.attenuator.name}
        return self._play_params[name]

    def _replay(self, name: str, spec: ScheduleSpec) -> str:
        from cellab.attenuator.calibration import Calibration
        from cellab.attenuator.mobility import ANDROID_SIGNAL_LOG, ReplayOptions, load_drive_log, replay
        from cellab.attenuator.schedule import to_csv

        assert spec.drive_log is not None
        fmt = ANDROID_SIGNAL_LOG if spec.drive_log.endswith(".jsonl") else None
        log = load_drive_log(spec.drive_log, fmt)
        channel = spec.channel or self.attenuator.ue_channels[0]
        info = self.ctl.request(self.agent, "info", {"attenuator": self.attenuator.name}, timeout_s=10)
        if spec.calibration == "auto":
            calibration = self._auto_calibration(channel)
        else:
            try:
                calibration = Calibration.model_validate_json(Path(spec.calibration).read_text())
            except (OSError, ValueError) as exc:
                raise InputError(f"schedules.{name}", "calibration", f"{spec.calibration}: not a calibration "
                                 f"file: {exc}", ["auto", "<calibration>.json"]) from None
        result = replay(log, calibration, ReplayOptions(channel=channel, min_db=info["min_db"],
                                                         max_db=info["max_db"], step_db=info["step_db"],
                                                         smoothing_s=spec.smoothing_s))
        text = to_csv(result.schedule)
        write_atomic(self.result_dir / f"schedule-{name}.csv", text)
        write_atomic(self.result_dir / f"schedule-{name}.replay.json", result.report.model_dump_json(indent=2))
        return text

    def _auto_calibration(self, channel: int) -> Any:
        """Sweep the attenuator through its agent while the UE agent reports RSRP (`signal`), fit, and keep
        the fit in the result folder (a resumed campaign reuses it)."""
        from cellab.attenuator.calibration import Calibration, CalibrationError, fit, sweep

        cached = self.result_dir / "calibration.json"
        if cached.exists():
            return Calibration.model_validate_json(cached.read_text())
        config = self.attenuator.config
        start_db, stop_db = max(config.min_db, CALIBRATION_SWEEP_DB[0]), min(config.max_db, CALIBRATION_SWEEP_DB[1])
        try:
            points = sweep(_AttenuatorOverBus(self.ctl, self.agent, config), channel, self._read_rsrp, start_db,
                           stop_db, CALIBRATION_SWEEP_DB[2], settle_s=CALIBRATION_SETTLE_S,
                           samples=CALIBRATION_SAMPLES)
            calibration = fit(points, shield_box=config.name, ue=self.ue_agent, earfcn=VIRTUAL_CELL_EARFCN)
        except CalibrationError as exc:
            raise CellabError(f"calibration failed: {exc}") from None
        write_atomic(cached, calibration.model_dump_json(indent=2))
        return calibration

    def _read_rsrp(self) -> float:
        return float(self.ctl.request(self.ue_agent, "signal", {}, timeout_s=10)["rsrp_dbm"])


class _AttenuatorOverBus:
    """What a calibration sweep needs of an attenuator (its config and `set`), done by its agent."""

    def __init__(self, ctl: Controller, agent: str, config: AttenuatorConfig):
        self.ctl, self.agent, self.config = ctl, agent, config

    def set(self, channel: int, db: float) -> float:
        reply = self.ctl.request(self.agent, "set", {"attenuator": self.config.name, "channel": channel, "db": db},
                                 timeout_s=10)
        return float(reply["applied_db"])
