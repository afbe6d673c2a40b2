"""A campaign's attenuation schedules, ready for the attenuator agent's `play_schedule`.

A schedule is a file (YAML segments or CSV points), or a drive-test log (RSRP over time) turned into
one: calibrate the lab's attenuator (once per campaign, kept in the result folder so a resumed
campaign reuses it), then map each RSRP to the attenuation that gives it (attenuator/mobility.py).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from cellab.bus import Controller
from cellab.campaign import Campaign, ScheduleSpec
from cellab.errors import CellabError, InputError
from cellab.lab_attenuator import LabAttenuator
from cellab.store import write_atomic

CALIBRATION_SWEEP = {"start_db": 0.0, "stop_db": 70.0, "step_db": 5.0, "settle_s": 0.3, "samples": 2}
CALIBRATION_TIMEOUT_S = 120.0


class Schedules:
    def __init__(self, campaign: Campaign, result_dir: Path, ctl: Controller, agent: str,
                 attenuator: LabAttenuator, cell_ctl: str | None):
        self.campaign = campaign
        self.result_dir = result_dir
        self.ctl = ctl
        self.agent = agent
        self.attenuator = attenuator
        self.cell_ctl = cell_ctl
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
        from cellab.attenuator.calibration import Calibration

        cached = self.result_dir / "calibration.json"
        if cached.exists():
            return Calibration.model_validate_json(cached.read_text())
        if self.cell_ctl is None:
            raise CellabError("calibration: auto sweeps the emulated cell's RSRP; on hardware give a calibration "
                              "file (cellab atten calibrate)")
        self.ctl.request(self.agent, "calibrate", {
            "attenuator": self.attenuator.name, "channel": channel, "shield_box": "virtual", "ue": "ue0", "earfcn": 3350, "cell_ctl": self.cell_ctl,
            **CALIBRATION_SWEEP}, timeout_s=10)
        deadline = time.monotonic() + CALIBRATION_TIMEOUT_S
        while time.monotonic() < deadline:
            status = self.ctl.request(self.agent, "status", {"attenuator": self.attenuator.name},
                                      timeout_s=10)["attenuators"][0]
            if not status["calibrating"]:
                if status["calibration_error"] or status["calibration"] is None:
                    raise CellabError(f"calibration failed: {status['calibration_error'] or 'no result'}")
                write_atomic(cached, json.dumps(status["calibration"], indent=2))
                return Calibration.model_validate(status["calibration"])
            time.sleep(0.5)
        raise CellabError(f"calibration did not finish within {CALIBRATION_TIMEOUT_S:.0f} s")
