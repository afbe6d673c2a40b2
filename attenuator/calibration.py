"""Calibration of a shield box: sweep the attenuation, read the UE's RSRP, fit RSRP = a − b·dB.

A fit is stored per (shield box, UE, EARFCN); one whose residuals are too large (a saturated or
flaky measurement, a leaky box) is refused rather than silently used by mobility replay.
"""

from __future__ import annotations

import math
import os
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from cellab.errors import CellabError, InputError, from_validation_error
from cellab.inputs import JSON_MAX_BYTES, read_json
from cellab.labs.cellctl import CellControl

from .config import AttenuatorConfig
from .driver import quantize_db

ReadRsrp = Callable[[], float]
MAX_RESIDUAL_DB = 6.0  # one point this far off the line is a fault (4x the RMS a fit may have), not noise
MAX_RISE_DB = 3.0  # RSRP may rise this much between sweep steps (measurement noise, twice the RMS allowed)
RESIDUAL_AGREE_DB = 0.01  # stated residuals vs the points' own (a fit rounds to 1e-6 dB)


class CalibrationError(CellabError):
    """The sweep or the fit cannot be trusted."""


class SweepPoint(BaseModel):
    db: float
    rsrp_dbm: float
    samples: int


class Calibration(BaseModel):
    shield_box: str
    ue: str
    earfcn: int
    a_dbm: float = Field(description="RSRP at 0 dB attenuation (intercept)")
    b_db_per_db: float = Field(description="RSRP drop per dB of attenuation (slope, ~1)")
    residual_rms_db: float
    max_residual_db: float
    min_db: float
    max_db: float
    points: list[SweepPoint] = []
    excluded: int = Field(0, description="sweep points outside the UE's reporting range")
    created: str = ""

    @model_validator(mode="after")
    def _usable(self) -> Calibration:
        for name in ("a_dbm", "b_db_per_db", "residual_rms_db", "max_residual_db", "min_db", "max_db"):
            if not math.isfinite(getattr(self, name)):
                raise ValueError(f"{name}: {getattr(self, name)} is not a finite number")
        if not 0 < self.b_db_per_db <= 10:
            raise ValueError(f"b_db_per_db: slope {self.b_db_per_db} must lie in (0, 10] dB/dB (RSRP falls as "
                             "attenuation rises; 0 would divide by zero)")
        if self.min_db >= self.max_db:
            raise ValueError(f"min_db ({self.min_db}) must be below max_db ({self.max_db})")
        plausible_fit(self)
        return self

    def rsrp_at(self, db: float) -> float:
        return self.a_dbm - self.b_db_per_db * db

    def db_for(self, rsrp_dbm: float) -> float:
        return (self.a_dbm - rsrp_dbm) / self.b_db_per_db


class FitPolicy(BaseModel):
    max_residual_rms_db: float = 1.5
    min_slope: float = 0.5  # an attenuator step should move RSRP by about one dB
    max_slope: float = 1.5
    min_points: int = 3
    # UE reporting range (36.133: RSRP is reported from −140 to −44 dBm); saturated points are dropped
    rsrp_floor_dbm: float = -140.0
    rsrp_ceiling_dbm: float = -44.0


def in_range(points: list[SweepPoint], pol: FitPolicy) -> list[SweepPoint]:
    """The points inside the UE's reporting range: the ones a fit uses."""
    return [p for p in points if pol.rsrp_floor_dbm < p.rsrp_dbm < pol.rsrp_ceiling_dbm and math.isfinite(p.rsrp_dbm)]


def rise(points: list[SweepPoint]) -> tuple[SweepPoint, SweepPoint] | None:
    """The first two points, in attenuation order, where RSRP rises by more than MAX_RISE_DB as attenuation
    rises: more attenuation never brings more signal, so such a sweep measured something else."""
    ordered = sorted(points, key=lambda p: p.db)
    for before, after in zip(ordered, ordered[1:], strict=False):
        if after.db > before.db and after.rsrp_dbm - before.rsrp_dbm > MAX_RISE_DB:
            return before, after
    return None


def plausible_fit(cal: Calibration, pol: FitPolicy | None = None) -> None:
    """A stored fit as `fit` would have made it: residuals within the policy (and RMS <= largest), points that
    fall as attenuation rises, and stated residuals that the points' own residuals from the line confirm."""
    pol = pol or FitPolicy()
    rms, worst = cal.residual_rms_db, cal.max_residual_db
    if not 0 <= rms <= pol.max_residual_rms_db:
        raise ValueError(f"residual_rms_db: {rms} dB outside [0, {pol.max_residual_rms_db}] dB: a fit that poor "
                         "is refused")
    if not rms - 1e-6 <= worst <= MAX_RESIDUAL_DB:
        raise ValueError(f"max_residual_db: {worst} dB outside [residual_rms_db ({rms}), {MAX_RESIDUAL_DB}] dB")
    bad = rise([p for p in cal.points if math.isfinite(p.rsrp_dbm)])
    used = in_range(cal.points, pol)
    if bad:
        raise ValueError(f"points: RSRP rises from {bad[0].rsrp_dbm} dBm at {bad[0].db} dB to {bad[1].rsrp_dbm} dBm "
                         f"at {bad[1].db} dB (by more than {MAX_RISE_DB} dB): points that rise and fall are no "
                         "calibration")
    if not used:
        return
    residuals = [p.rsrp_dbm - cal.rsrp_at(p.db) for p in used]
    found_rms = math.sqrt(sum(r * r for r in residuals) / len(residuals))
    found_worst = max(abs(r) for r in residuals)
    if abs(found_rms - rms) > RESIDUAL_AGREE_DB or abs(found_worst - worst) > RESIDUAL_AGREE_DB:
        raise ValueError(f"points: their residuals from a_dbm - b_db_per_db * db are {found_rms:.3f} dB RMS, "
                         f"{found_worst:.3f} dB at most; the file says {rms} and {worst}")


def fit(
    points: list[SweepPoint], shield_box: str, ue: str, earfcn: int, policy: FitPolicy | None = None
) -> Calibration:
    pol = policy or FitPolicy()
    used = in_range(points, pol)
    if len(used) < pol.min_points:
        raise CalibrationError(
            f"calibration {shield_box}/{ue}/{earfcn}: {len(used)} usable points (need {pol.min_points}); "
            f"{len(points) - len(used)} were outside the UE's RSRP range ({pol.rsrp_floor_dbm}, {pol.rsrp_ceiling_dbm}) dBm"
        )
    n = len(used)
    mx = sum(p.db for p in used) / n
    my = sum(p.rsrp_dbm for p in used) / n
    sxx = sum((p.db - mx) ** 2 for p in used)
    if sxx <= 0:
        raise CalibrationError(f"calibration {shield_box}/{ue}/{earfcn}: all points at one attenuation")
    slope = sum((p.db - mx) * (p.rsrp_dbm - my) for p in used) / sxx
    a = my - slope * mx
    b = -slope
    residuals = [p.rsrp_dbm - (a - b * p.db) for p in used]
    rms = math.sqrt(sum(r * r for r in residuals) / n)
    worst = max(abs(r) for r in residuals)
    where = f"calibration {shield_box}/{ue}/{earfcn}"
    if not pol.min_slope <= b <= pol.max_slope:
        raise CalibrationError(f"{where}: slope {b:.3f} dB/dB outside [{pol.min_slope}, {pol.max_slope}]: is the UE behind this attenuator?")
    if rms > pol.max_residual_rms_db:
        raise CalibrationError(f"{where}: residual RMS {rms:.2f} dB > {pol.max_residual_rms_db} dB (max {worst:.2f} dB): fit refused")
    if worst > MAX_RESIDUAL_DB:
        raise CalibrationError(f"{where}: a point {worst:.2f} dB off the line (> {MAX_RESIDUAL_DB} dB): fit refused")
    bad = rise([p for p in points if math.isfinite(p.rsrp_dbm)])
    if bad:
        raise CalibrationError(f"{where}: RSRP rises from {bad[0].rsrp_dbm:.1f} dBm at {bad[0].db} dB to "
                               f"{bad[1].rsrp_dbm:.1f} dBm at {bad[1].db} dB: fit refused")
    return Calibration(
        shield_box=shield_box, ue=ue, earfcn=earfcn, a_dbm=round(a, 6), b_db_per_db=round(b, 6),
        residual_rms_db=round(rms, 6), max_residual_db=round(worst, 6),
        min_db=min(p.db for p in used), max_db=max(p.db for p in used), points=points,
        excluded=len(points) - len(used), created=datetime.now(UTC).isoformat(timespec="seconds"),
    )


class SweepTarget(Protocol):
    """What a sweep needs of an attenuator: a driver here, or one driven through its agent."""

    config: AttenuatorConfig

    def set(self, channel: int, db: float) -> float: ...


def sweep(
    attenuator: SweepTarget,
    channel: int,
    read_rsrp: ReadRsrp,
    start_db: float,
    stop_db: float,
    step_db: float,
    settle_s: float = 1.0,
    samples: int = 3,
    sample_interval_s: float = 0.2,
    should_stop: Callable[[], bool] = lambda: False,
) -> list[SweepPoint]:
    """Set each attenuation, wait for the UE to settle, average `samples` RSRP readings."""
    if step_db <= 0:
        raise InputError("calibration", "step_db", "must be > 0")
    count = math.floor(abs(stop_db - start_db) / step_db + 1e-9) + 1
    if count > 10_000:
        raise InputError("calibration", "step_db", f"{count} steps: too many")
    sign = 1 if stop_db >= start_db else -1
    out: list[SweepPoint] = []
    for k in range(count):
        if should_stop():
            break
        target = quantize_db(start_db + sign * k * step_db, attenuator.config.step_db)
        applied = attenuator.set(channel, target)
        time.sleep(settle_s)
        readings = []
        for i in range(samples):
            if i:
                time.sleep(sample_interval_s)
            readings.append(float(read_rsrp()))
        out.append(SweepPoint(db=applied, rsrp_dbm=sum(readings) / len(readings), samples=len(readings)))
    return out


class SweepOptions(BaseModel):
    """A sweep's settings as a person gives them (`cellab atten calibrate`): checked before any device is touched."""

    model_config = ConfigDict(extra="forbid")
    start_db: float = Field(ge=0, le=200, allow_inf_nan=False)
    stop_db: float = Field(ge=0, le=200, allow_inf_nan=False)
    step_db: float = Field(gt=0, le=200, allow_inf_nan=False)
    settle_s: float = Field(ge=0, le=600, allow_inf_nan=False)
    samples: int = Field(ge=1, le=1000)
    ue_index: int = Field(ge=0, le=15)
    earfcn: int = Field(ge=0, le=262143)  # 36.101's EARFCN range
    channel: int = Field(ge=1, le=64)


def check_sweep_options(source: str, **values: object) -> SweepOptions:
    """The options named as a person typed them (`--settle-s`), with their ranges."""
    try:
        return SweepOptions.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        option = "--" + str(err["loc"][0]).replace("_", "-")
        bounds = {k: v for k, v in (err.get("ctx") or {}).items() if k in ("ge", "gt", "le", "lt")}
        raise InputError(source, option, f"{values.get(str(err['loc'][0]))!r}: {err['msg']}",
                         [" ".join(f"{k} {v}" for k, v in bounds.items())] if bounds else None) from None


def cell_rsrp_reader(endpoint: str, ue_index: int, timeout_s: float = 2.0) -> ReadRsrp:
    """RSRP of one UE of the emulated cell, from its `stats` control operation."""
    ctl = CellControl(endpoint, int(timeout_s * 1000))

    def read() -> float:
        return float(ctl.ue_stats(ue_index)["rsrp_dbm"])

    return read


_SAFE_KEY = re.compile(r"[^A-Za-z0-9_.-]+")


class CalibrationStore:
    """One JSON file per (shield box, UE, EARFCN) in a folder; writes are atomic."""

    def __init__(self, folder: str | Path):
        self.folder = Path(folder)

    def path_for(self, shield_box: str, ue: str, earfcn: int) -> Path:
        key = "__".join(_SAFE_KEY.sub("_", part) for part in (shield_box, ue, str(earfcn)))
        return self.folder / f"{key}.json"

    def save(self, cal: Calibration) -> Path:
        self.folder.mkdir(parents=True, exist_ok=True)
        path = self.path_for(cal.shield_box, cal.ue, cal.earfcn)
        tmp = path.with_suffix(".json.tmp")
        tmp.write_text(cal.model_dump_json(indent=2))
        os.replace(tmp, path)
        return path

    def load(self, shield_box: str, ue: str, earfcn: int) -> Calibration:
        path = self.path_for(shield_box, ue, earfcn)
        if not path.exists():
            have = sorted(p.stem for p in self.folder.glob("*.json")) if self.folder.exists() else []
            raise InputError(path, "", f"no calibration for box {shield_box!r}, UE {ue!r}, EARFCN {earfcn}", have or None)
        return load_calibration(path)


def load_calibration(path: str | Path) -> Calibration:
    """A calibration JSON file: parsed, finite, slope positive, limits in order (InputError naming the field)."""
    return parse_calibration(read_json(path, JSON_MAX_BYTES), path)


def parse_calibration(data: object, source: str | Path) -> Calibration:
    if not isinstance(data, dict):
        raise InputError(source, "", "a calibration is a JSON object", list(Calibration.model_fields))
    try:
        return Calibration.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
