"""Attenuation schedules: a CSV of points (`t_s,channel,db`) or a YAML of segments, and their checks.

Both load into a `Schedule`: points sorted by time, each remembering where it came from (CSV row or
YAML segment) so every error names the file, the row/segment and the field.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cellab.contracts.attenuator import Point
from cellab.errors import InputError, from_validation_error
from cellab.inputs import DATA_MAX_BYTES, MAX_FLOAT, YAML_MAX_BYTES, bounded_int, csv_rows, read_text
from cellab.inputs import parse_yaml as guarded_yaml

from .driver import quantize_db

MAX_POINTS = 2_000_000  # a schedule that expands past this is a mistake, not an experiment
MAX_DURATION_S = 7 * 86400.0  # a week: longer is a typo (and overflows the player's ns arithmetic sooner or later)
MIN_SEGMENT_S = 0.001  # the player's resolution (player.SPIN_S): a shorter ramp, step or sine is a hidden jump
MIN_SINE_SAMPLES = 2  # samples per period below which a sampled sine is no sine (Nyquist)


class ClipReport(BaseModel):
    clipped: int = 0
    total: int = 0
    first_source: str = ""

    @property
    def share(self) -> float:
        return self.clipped / self.total if self.total else 0.0


class Schedule(BaseModel):
    name: str
    points: list[Point]
    duration_s: float
    clip: bool = False  # the file asked for out-of-range values to be clipped (and reported)
    clip_report: ClipReport = Field(default_factory=ClipReport)

    @property
    def channels(self) -> list[int]:
        return sorted({p.channel for p in self.points})


class SafetyLimits(BaseModel):
    """What the lab allows on one attenuator (from its inventory entry and the device)."""

    channels: list[int] = [1]
    min_db: float = 0.0
    max_db: float
    step_db: float = 0.25
    max_slew_db_per_s: float | None = None
    min_interval_s: float = 0.0  # mechanical relays: refuse faster schedules

    @classmethod
    def from_config(cls, config: object, min_interval_s: float = 0.0) -> SafetyLimits:
        from .config import AttenuatorConfig

        assert isinstance(config, AttenuatorConfig)
        return cls(
            channels=list(range(1, config.channels + 1)),
            min_db=config.min_db,
            max_db=config.max_db,
            step_db=config.step_db,
            max_slew_db_per_s=config.max_slew_db_per_s,
            min_interval_s=max(min_interval_s, config.min_interval_s),
        )


# ---------------------------------------------------------------- CSV
def parse_csv(text: str, source: str = "<csv>") -> Schedule:
    rows = csv_rows(text, source)
    if not rows:
        raise InputError(source, "header", "empty schedule: expected a header t_s,channel,db")
    if len(rows) > MAX_POINTS + 1:
        raise InputError(source, f"row {rows[MAX_POINTS + 1][0]}", f"more than {MAX_POINTS} points")
    header = [h.strip() for h in rows[0][1]]
    if header != ["t_s", "channel", "db"]:
        raise InputError(source, "header", f"got {','.join(header)!r}", ["t_s,channel,db"])
    points: list[Point] = []
    last_t = -math.inf
    at_instant: dict[int, str] = {}  # channel -> row of its point at last_t
    for line, row in rows[1:]:
        where = f"row {line}"
        if len(row) != 3:
            raise InputError(source, where, f"expected 3 columns, got {len(row)}")
        try:
            t_s = float(row[0])
        except ValueError:
            raise InputError(source, f"{where}.t_s", f"{row[0]!r} is not a number") from None
        channel = bounded_int(row[1], source, f"{where}.channel")
        try:
            db = float(row[2])
        except ValueError:
            raise InputError(source, f"{where}.db", f"{row[2]!r} is not a number") from None
        if not math.isfinite(t_s) or not 0 <= t_s <= MAX_DURATION_S:
            raise InputError(source, f"{where}.t_s", f"{row[0]!r}: time must be a finite number in 0..{MAX_DURATION_S} s")
        if not math.isfinite(db) or abs(db) > MAX_FLOAT:
            raise InputError(source, f"{where}.db", f"{row[2]!r}: attenuation must be a finite number")
        if t_s < last_t:
            raise InputError(source, f"{where}.t_s", f"time {t_s} goes back (previous row {last_t}): times must be non-decreasing")
        if t_s > last_t:
            at_instant.clear()
        if channel in at_instant:
            raise InputError(source, f"{where}.t_s", f"channel {channel} has a second value at t={t_s} s ({at_instant[channel]} "
                             "sets one): a channel holds one value at one instant", ["one row per channel and time"])
        at_instant[channel] = where
        last_t = t_s
        points.append(Point(t_s=t_s, channel=channel, db=db, source=where))
        if len(points) > MAX_POINTS:
            raise InputError(source, where, f"more than {MAX_POINTS} points")
    if not points:
        raise InputError(source, "rows", "the schedule has a header but no points")
    return Schedule(name=source, points=points, duration_s=points[-1].t_s)


# ---------------------------------------------------------------- YAML segments
def _unique_channels(value: list[int] | None) -> list[int] | None:
    if value is not None and len(set(value)) != len(value):
        raise ValueError(f"channels {value} name a channel twice (two values at one instant on one channel)")
    return value


MinSegmentS = Annotated[float, Field(ge=MIN_SEGMENT_S, allow_inf_nan=False,
                                     description=f"at least {MIN_SEGMENT_S} s (the player's resolution)")]


class _Seg(BaseModel):
    model_config = ConfigDict(extra="forbid")
    channels: list[int] | None = Field(None, min_length=1, description="default: the file's channels")

    _channels_once = field_validator("channels")(_unique_channels)


class Hold(_Seg):
    kind: Literal["hold"]
    db: float = Field(allow_inf_nan=False)
    duration_s: float = Field(ge=0, allow_inf_nan=False, description=f"0 (the last segment only) or at least "
                                                                      f"{MIN_SEGMENT_S} s")

    @field_validator("duration_s")
    @classmethod
    def _playable(cls, value: float) -> float:
        if 0 < value < MIN_SEGMENT_S:
            raise ValueError(f"{value} s is shorter than the player's {MIN_SEGMENT_S} s: a hidden jump")
        return value


class Ramp(_Seg):
    kind: Literal["ramp"]
    from_db: float = Field(allow_inf_nan=False)
    to_db: float = Field(allow_inf_nan=False)
    duration_s: MinSegmentS


class Steps(_Seg):
    kind: Literal["steps"]
    values_db: list[Annotated[float, Field(allow_inf_nan=False)]] = Field(min_length=1)
    dwell_s: MinSegmentS


class Sine(_Seg):
    kind: Literal["sine"]
    mean_db: float = Field(allow_inf_nan=False)
    amplitude_db: float = Field(ge=0, allow_inf_nan=False)
    period_s: MinSegmentS
    duration_s: MinSegmentS
    phase_deg: float = Field(0.0, allow_inf_nan=False)


class Repeat(_Seg):
    kind: Literal["repeat"]
    times: int = Field(ge=1, le=100_000)
    segments: list[Segment] = Field(min_length=1)

    @model_validator(mode="after")
    def _no_zero_hold(self) -> Repeat:
        if any(isinstance(seg, Hold) and seg.duration_s == 0 for seg in self.segments):
            raise ValueError("a 0 s hold inside a repeat is replaced at once by the next segment's value: two values "
                             "at one instant on one channel")
        return self


Segment = Annotated[Hold | Ramp | Steps | Sine | Repeat, Field(discriminator="kind")]
Repeat.model_rebuild()


class ScheduleFile(BaseModel):
    """A YAML schedule: segments played one after the other."""

    model_config = ConfigDict(extra="forbid")
    channels: list[int] = Field([1], min_length=1)
    update_interval_s: float = Field(0.1, ge=0.001, le=60, allow_inf_nan=False, description="sampling of ramp and sine")
    clip: bool = Field(False, description="clip out-of-range values to the limits (reported) instead of refusing")
    segments: list[Segment] = Field(min_length=1)

    _channels_once = field_validator("channels")(_unique_channels)

    @model_validator(mode="after")
    def _playable(self) -> ScheduleFile:
        for i, seg in enumerate(self.segments, start=1):
            if isinstance(seg, Hold) and seg.duration_s == 0 and i < len(self.segments):
                raise ValueError(f"segment {i}: a 0 s hold before the last segment is replaced at once by the next "
                                 "segment's value: two values at one instant on one channel (hold at least "
                                 f"{MIN_SEGMENT_S} s)")
        for i, seg in _sines(self.segments, "segment "):
            if seg.period_s < MIN_SINE_SAMPLES * self.update_interval_s:
                raise ValueError(f"{i}: period_s {seg.period_s} s is under {MIN_SINE_SAMPLES} samples of "
                                 f"update_interval_s ({self.update_interval_s} s): the sine cannot be played")
        return self


def _sines(segs: list, label: str) -> list[tuple[str, Sine]]:
    out: list[tuple[str, Sine]] = []
    for i, seg in enumerate(segs, start=1):
        if isinstance(seg, Sine):
            out.append((f"{label}{i}", seg))
        elif isinstance(seg, Repeat):
            out.extend(_sines(seg.segments, f"{label}{i}.segment "))
    return out


def _expand(segs: list, chans: list[int], dt: float, t: float, label: str, out: list[Point]) -> float:
    for i, seg in enumerate(segs, start=1):
        where = f"{label}{i} ({seg.kind})"
        ch = seg.channels or chans

        def emit(t_s: float, db: float, ch: list[int] = ch, where: str = where) -> None:
            for c in ch:
                out.append(Point(t_s=round(t_s, 9), channel=c, db=db, source=where))
            if len(out) > MAX_POINTS:
                raise ValueError(f"{where}: schedule expands to more than {MAX_POINTS} points")

        if isinstance(seg, Hold):
            emit(t, seg.db)
            t += seg.duration_s
        elif isinstance(seg, Ramp):
            n = max(1, round(seg.duration_s / dt))
            for k in range(n + 1):
                emit(t + seg.duration_s * k / n, seg.from_db + (seg.to_db - seg.from_db) * k / n)
            t += seg.duration_s
        elif isinstance(seg, Steps):
            for k, v in enumerate(seg.values_db):
                emit(t + k * seg.dwell_s, v)
            t += len(seg.values_db) * seg.dwell_s
        elif isinstance(seg, Sine):
            n = max(1, round(seg.duration_s / dt))
            phase = math.radians(seg.phase_deg)
            for k in range(n):
                tk = seg.duration_s * k / n
                emit(t + tk, seg.mean_db + seg.amplitude_db * math.sin(2 * math.pi * tk / seg.period_s + phase))
            t += seg.duration_s
        else:
            for r in range(seg.times):
                t = _expand(seg.segments, ch, dt, t, f"{label}{i}.repeat{r + 1}.segment ", out)
    return t


def _planned(segs: list, chans: list[int], dt: float) -> tuple[int, float]:
    """(points, seconds) the segments expand to, counted before expanding (a huge repeat is refused at once)."""
    points, seconds = 0, 0.0
    for seg in segs:
        ch = len(seg.channels or chans)
        if isinstance(seg, Hold):
            points, seconds = points + ch, seconds + seg.duration_s
        elif isinstance(seg, Ramp | Sine):
            points, seconds = points + (max(1, round(seg.duration_s / dt)) + 1) * ch, seconds + seg.duration_s
        elif isinstance(seg, Steps):
            points, seconds = points + len(seg.values_db) * ch, seconds + len(seg.values_db) * seg.dwell_s
        else:
            inner_points, inner_s = _planned(seg.segments, seg.channels or chans, dt)
            points, seconds = points + seg.times * inner_points, seconds + seg.times * inner_s
        if points > MAX_POINTS or seconds > MAX_DURATION_S:
            break
    return points, seconds


def _dedupe(points: list[Point]) -> list[Point]:
    """A later point at the same time on the same channel replaces the earlier (segment joins)."""
    last: dict[tuple[float, int], int] = {}
    for idx, p in enumerate(points):
        last[(p.t_s, p.channel)] = idx
    return [p for idx, p in enumerate(points) if last[(p.t_s, p.channel)] == idx]


def parse_yaml(text: str, source: str = "<yaml>") -> Schedule:
    data = guarded_yaml(text, source)
    if not isinstance(data, dict):
        raise InputError(source, "", "expected a mapping with 'segments'", ["channels", "update_interval_s", "clip", "segments"])
    try:
        spec = ScheduleFile.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
    count, seconds = _planned(spec.segments, spec.channels, spec.update_interval_s)
    if count > MAX_POINTS:
        raise InputError(source, "segments", f"the schedule expands to more than {MAX_POINTS} points",
                         [f"up to {MAX_POINTS} points"])
    if seconds > MAX_DURATION_S:
        raise InputError(source, "segments", f"the schedule lasts more than {MAX_DURATION_S:g} s",
                         [f"up to {MAX_DURATION_S:g} s"])
    out: list[Point] = []
    try:
        end = _expand(spec.segments, spec.channels, spec.update_interval_s, 0.0, "segment ", out)
    except ValueError as exc:
        raise InputError(source, "segments", str(exc)) from None
    points = _dedupe(out)
    if not points:
        raise InputError(source, "segments", "the schedule has no points")
    return Schedule(name=source, points=points, duration_s=max(end, points[-1].t_s), clip=spec.clip)


def load(path: str | Path) -> Schedule:
    """A CSV (.csv) or YAML (.yaml/.yml) schedule file."""
    p = Path(path)
    if p.suffix.lower() == ".csv":
        return parse_csv(read_text(p, DATA_MAX_BYTES), str(p))
    if p.suffix.lower() in (".yaml", ".yml"):
        return parse_yaml(read_text(p, YAML_MAX_BYTES), str(p))
    raise InputError(p, "suffix", f"unknown schedule format {p.suffix!r}", [".csv", ".yaml", ".yml"])


# ---------------------------------------------------------------- safety
def check(schedule: Schedule, limits: SafetyLimits) -> Schedule:
    """The schedule quantized to the device step, or InputError naming the first offending row.

    Values outside [min_db, max_db] are refused unless the file asked for clipping; then they are
    clipped and counted in `clip_report`. Slew and update spacing are always enforced.
    """
    src = schedule.name
    out: list[Point] = []
    report = ClipReport(total=len(schedule.points))
    for p in schedule.points:
        if p.channel not in limits.channels:
            raise InputError(src, f"{p.source}.channel", f"no channel {p.channel} on this attenuator", limits.channels)
        q = quantize_db(p.db, limits.step_db)
        if q < limits.min_db - 1e-9 or q > limits.max_db + 1e-9:
            if not schedule.clip:
                raise InputError(
                    src,
                    f"{p.source}.db",
                    f"{p.db} dB at t={p.t_s} s is outside the safety limits [{limits.min_db}, {limits.max_db}] dB "
                    "(set clip: true in a YAML schedule to clip instead)",
                )
            q = min(max(q, limits.min_db), limits.max_db)
            # re-quantize inside the limits (a limit need not sit on the step grid)
            q = quantize_db(q, limits.step_db)
            if q > limits.max_db + 1e-9:
                q = round(q - limits.step_db, 6)
            if q < limits.min_db - 1e-9:
                q = round(q + limits.step_db, 6)
            report.clipped += 1
            report.first_source = report.first_source or p.source
        out.append(p.model_copy(update={"db": q}))
    prev: dict[int, Point] = {}
    last_t: float | None = None
    for p in out:
        if limits.min_interval_s > 0 and last_t is not None and 0 < p.t_s - last_t < limits.min_interval_s - 1e-9:
            raise InputError(
                src,
                f"{p.source}.t_s",
                f"updates {p.t_s - last_t:.3f} s apart; this attenuator needs ≥ {limits.min_interval_s} s (mechanical relays)",
            )
        if last_t is None or p.t_s > last_t:
            last_t = p.t_s
        before = prev.get(p.channel)
        if before is not None and limits.max_slew_db_per_s is not None:
            change = abs(p.db - before.db)
            dt = p.t_s - before.t_s
            if change > limits.step_db / 2 and (dt <= 0 or change / dt > limits.max_slew_db_per_s + 1e-9):
                rate = "an instant jump" if dt <= 0 else f"{change / dt:.2f} dB/s"
                raise InputError(
                    src,
                    f"{p.source}.db",
                    f"{before.db} → {p.db} dB in {dt:.3f} s is {rate}, above max_slew_db_per_s={limits.max_slew_db_per_s}",
                )
        prev[p.channel] = p
    return schedule.model_copy(update={"points": out, "clip_report": report})


def to_csv(schedule: Schedule) -> str:
    lines = ["t_s,channel,db"] + [f"{p.t_s:.9g},{p.channel},{p.db:.6g}" for p in schedule.points]
    return "\n".join(lines) + "\n"

