"""Shield-box mobility replay: a drive-test RSRP log → target RSRP series → attenuation schedule.

The calibration maps RSRP to attenuation (dB = (a − RSRP)/b). Targets the box cannot reach are
clipped to the attenuator's range and counted; the report also gives the RSRP error that remains
after quantizing to the device step, so a user knows how faithful the replay is before playing it.
"""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from cellab.errors import InputError
from cellab.inputs import DATA_MAX_BYTES, csv_dicts, parse_json, read_text

from .calibration import Calibration
from .driver import quantize_db
from .schedule import Point, Schedule

# Android reports an unavailable RSRP as Integer.MAX_VALUE (CellInfo.UNAVAILABLE).
ANDROID_UNAVAILABLE = 2147483647


class DriveLogFormat(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["csv", "jsonl"] = "csv"
    time_column: str = "t_s"
    rsrp_column: str = "rsrp_dbm"
    time_unit: Literal["s", "ms", "iso"] = "s"


# The Android agent's signal log (one JSON object per line); to be confirmed with the ue-agents room.
ANDROID_SIGNAL_LOG = DriveLogFormat(kind="jsonl", time_column="time_ms", rsrp_column="rsrp_dbm", time_unit="ms")


class Sample(BaseModel):
    t_s: float
    rsrp_dbm: float


class DriveLog(BaseModel):
    source: str
    samples: list[Sample]
    skipped: int = 0  # rows without a usable RSRP (empty, unavailable)


def _time(value: object, unit: str, source: str, where: str, column: str) -> float:
    try:
        if unit == "iso":
            return datetime.fromisoformat(str(value)).timestamp()  # 3.11 accepts a trailing Z
        t = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise InputError(source, f"{where}.{column}", f"{value!r} is not a time in unit {unit!r}", ["s", "ms", "iso"]) from None
    if not math.isfinite(t):
        raise InputError(source, f"{where}.{column}", f"{value!r} is not a finite time")
    return t / 1000.0 if unit == "ms" else t


MAX_SPAN_S = 7 * 24 * 3600  # a replay longer than a week is a unit error (ms read as s), not a drive


def _rsrp(raw: object, source: str, field: str) -> float:
    """One RSRP cell as a finite number; NaN, infinities and text that is not an ASCII number are refused
    (a row skipped silently would shorten the replay without a word)."""
    if isinstance(raw, bool) or not isinstance(raw, (int, float, str)) or (
            isinstance(raw, str) and not raw.strip().isascii()):
        raise InputError(source, field, f"{raw!r} is not a number", ["dBm, e.g. -95.5", "empty: no service"])
    try:
        value = float(raw)
    except (ValueError, OverflowError):
        raise InputError(source, field, f"{raw!r} is not a number", ["dBm, e.g. -95.5", "empty: no service"]) from None
    if not math.isfinite(value):
        raise InputError(source, field, f"{raw!r} is not a finite number", ["dBm, e.g. -95.5", "empty: no service"])
    return value


def parse_drive_log(text: str, fmt: DriveLogFormat, source: str = "<drive log>") -> DriveLog:
    rows: list[tuple[str, dict]] = []
    if fmt.kind == "csv":
        _, cells = csv_dicts(text, source, (fmt.time_column, fmt.rsrp_column), comment=None)
        rows = [(f"row {line}", r) for line, r in cells]
    else:
        for i, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                obj = parse_json(line, source)
            except InputError as exc:
                raise InputError(source, f"line {i}", exc.message, exc.allowed) from None
            if not isinstance(obj, dict):
                raise InputError(source, f"line {i}", "not a JSON object")
            rows.append((f"line {i}", obj))
    samples: list[Sample] = []
    skipped = 0
    t_first: float | None = None
    last = -math.inf
    for where, row in rows:
        if fmt.time_column not in row:
            raise InputError(source, f"{where}.{fmt.time_column}", "missing")
        raw = row.get(fmt.rsrp_column)
        if raw is None or (isinstance(raw, str) and not raw.strip()):
            skipped += 1  # the phone had no service at that moment: nothing to replay
            continue
        rsrp = _rsrp(raw, source, f"{where}.{fmt.rsrp_column}")
        if rsrp == ANDROID_UNAVAILABLE or not -200 < rsrp < 0:
            skipped += 1  # Android's "unavailable" and out-of-range readings: no cell measured
            continue
        t = _time(row[fmt.time_column], fmt.time_unit, source, where, fmt.time_column)
        if t_first is None:
            t_first = t
        if t <= last:
            raise InputError(source, f"{where}.{fmt.time_column}",
                             "time goes back" if t < last else "a second sample at the same instant",
                             ["strictly increasing times"])
        if t - t_first > MAX_SPAN_S:
            raise InputError(source, f"{where}.{fmt.time_column}", f"{t - t_first:.0f} s after the first sample",
                             [f"a drive of at most {MAX_SPAN_S // 3600} h"])
        last = t
        samples.append(Sample(t_s=round(t - t_first, 6), rsrp_dbm=rsrp))
    if not samples:
        raise InputError(source, fmt.rsrp_column, f"no usable RSRP samples ({skipped} skipped)")
    return DriveLog(source=source, samples=samples, skipped=skipped)


def load_drive_log(path: str | Path, fmt: DriveLogFormat | None = None) -> DriveLog:
    p = Path(path)
    return parse_drive_log(read_text(p, DATA_MAX_BYTES), fmt or DriveLogFormat(), str(p))


def smooth(samples: list[Sample], window_s: float) -> list[Sample]:
    """Centred moving average over ±window_s/2 (in the dB domain), O(n)."""
    if window_s <= 0 or len(samples) < 2:
        return list(samples)
    half = window_s / 2
    out: list[Sample] = []
    lo = hi = 0
    total = 0.0
    for s in samples:
        while hi < len(samples) and samples[hi].t_s <= s.t_s + half + 1e-9:
            total += samples[hi].rsrp_dbm
            hi += 1
        while samples[lo].t_s < s.t_s - half - 1e-9:
            total -= samples[lo].rsrp_dbm
            lo += 1
        out.append(Sample(t_s=s.t_s, rsrp_dbm=total / (hi - lo)))
    return out


class ReplayOptions(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a NaN bound ended in a traceback
    channel: int = Field(1, ge=1)
    min_db: float
    max_db: float
    step_db: float = Field(ge=0.01)  # no box steps finer; a denormal step overflowed the quantizer
    smoothing_s: float = Field(0.0, ge=0)
    drop_repeats: bool = True  # consecutive equal values need no device write


class ReplayReport(BaseModel):
    samples: int
    skipped: int
    clipped: int
    clipped_share: float
    points: int
    # RSRP the box will give (after clipping and quantization) minus the target, dB
    quantization_error_mean_abs_db: float
    quantization_error_max_abs_db: float
    total_error_rms_db: float
    total_error_max_abs_db: float


class Replay(BaseModel):
    schedule: Schedule
    report: ReplayReport


def replay(log: DriveLog, calibration: Calibration, options: ReplayOptions) -> Replay:
    if options.min_db >= options.max_db:
        raise InputError("replay options", "min_db", f"must be below max_db ({options.max_db})")
    # the reachable range must lie on the device grid
    lo = quantize_db(options.min_db, options.step_db)
    if lo < options.min_db - 1e-9:
        lo = round(lo + options.step_db, 6)
    hi = quantize_db(options.max_db, options.step_db)
    if hi > options.max_db + 1e-9:
        hi = round(hi - options.step_db, 6)
    targets = smooth(log.samples, options.smoothing_s)
    points: list[Point] = []
    clipped = 0
    q_errors: list[float] = []
    all_errors: list[float] = []
    last_db: float | None = None
    for i, s in enumerate(targets):
        want = calibration.db_for(s.rsrp_dbm)
        q = quantize_db(want, options.step_db)
        if q < lo or q > hi:
            clipped += 1
            q = min(max(q, lo), hi)
        else:
            q_errors.append(calibration.rsrp_at(q) - s.rsrp_dbm)
        all_errors.append(calibration.rsrp_at(q) - s.rsrp_dbm)
        if options.drop_repeats and last_db is not None and q == last_db:
            continue
        last_db = q
        points.append(Point(t_s=s.t_s, channel=options.channel, db=q, source=f"sample {i + 1}"))
    n = len(targets)
    report = ReplayReport(
        samples=n,
        skipped=log.skipped,
        clipped=clipped,
        clipped_share=clipped / n,
        points=len(points),
        quantization_error_mean_abs_db=sum(abs(e) for e in q_errors) / len(q_errors) if q_errors else 0.0,
        quantization_error_max_abs_db=max((abs(e) for e in q_errors), default=0.0),
        total_error_rms_db=math.sqrt(sum(e * e for e in all_errors) / n),
        total_error_max_abs_db=max(abs(e) for e in all_errors),
    )
    duration = targets[-1].t_s
    return Replay(schedule=Schedule(name=f"replay of {log.source}", points=points, duration_s=duration), report=report)
