"""The schedule player: absolute deadlines on the monotonic clock, one log line per applied point.

Deadlines are t0 + t_s (never "sleep the interval"), so lateness does not add up over a long
schedule. The playing thread asks for SCHED_FIFO (root or CAP_SYS_NICE): a wake-up at a deadline then
does not queue behind ordinary work, which on a busy 2-core host cut the p99 lateness from about 5 ms
to under 1 ms. Without the privilege it sleeps until ~1 ms before a deadline and then yields in short
sleeps, which keeps the error near the scheduler's wake-up latency without spinning a core. Any error
(device refusal, disconnect) stops playback, puts every channel in its safe state and marks the run
failed; lines already logged stay on disk (each line is flushed as it is written).
"""

from __future__ import annotations

import csv
import json
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field

from .driver import Attenuator
from .schedule import SafetyLimits, Schedule, check

Publish = Callable[[str, dict], None]
SPIN_S = 0.001  # last stretch before a deadline: short sleeps instead of one long one (ordinary scheduling)
RT_PRIORITY = 10  # SCHED_FIFO priority of the playing thread: above ordinary work, below the kernel's threads (50)


def _realtime_thread() -> tuple[int, os.sched_param] | None:
    """SCHED_FIFO for the calling thread; returns its previous policy and parameters (None: not allowed)."""
    try:
        previous = (os.sched_getscheduler(0), os.sched_getparam(0))
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(RT_PRIORITY))
    except (AttributeError, OSError):  # no such call here, or no privilege: ordinary scheduling
        return None
    return previous


class PlayResult(BaseModel):
    status: Literal["completed", "failed", "stopped"]
    error: str = ""
    applied: int = 0
    planned: int = 0
    log_path: str = ""
    skipped: int = 0  # stale points passed over because the next value for their channel was already due
    max_late_ms: float = 0.0
    end_drift_ms: float = 0.0
    safe_state: dict[int, str] = Field(default_factory=dict)


class _Log:
    """JSONL (default) or CSV, chosen by the suffix of the caller's path; flushed every line."""

    FIELDS = ("planned_s", "applied_s", "late_ms", "channel", "db", "readback_db", "source")

    def __init__(self, path: Path | None):
        self.path = path
        self._fh = None
        self._csv = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fh = path.open("w", newline="")
            if path.suffix.lower() == ".csv":
                self._csv = csv.writer(self._fh)
                self._csv.writerow(self.FIELDS)

    def header(self, data: dict) -> None:
        if self._fh is not None and self._csv is None:
            self._write_json({"event": "start", **data})

    def point(self, row: dict) -> None:
        if self._fh is None:
            return
        if self._csv is not None:
            self._csv.writerow([row[k] for k in self.FIELDS])
            self._fh.flush()
        else:
            self._write_json(row)

    def event(self, data: dict) -> None:
        if self._fh is None:
            return
        if self._csv is not None:
            self._csv.writerow([f"# {json.dumps(data)}"])
            self._fh.flush()
        else:
            self._write_json(data)

    def _write_json(self, data: dict) -> None:
        assert self._fh is not None
        self._fh.write(json.dumps(data) + "\n")
        self._fh.flush()

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()


class Player:
    def __init__(
        self,
        attenuator: Attenuator,
        schedule: Schedule,
        log_path: str | Path | None = None,
        publish: Publish | None = None,
        limits: SafetyLimits | None = None,
        start_delay_s: float = 0.05,
        safe_on_finish: bool = False,
        clock: Callable[[], float] = time.monotonic,
        on_done: Callable[[PlayResult], None] | None = None,
        skip_stale: bool = True,
    ):
        self.attenuator = attenuator
        lim = limits or SafetyLimits.from_config(attenuator.config, attenuator.min_interval_s)
        # Checked again here, so a schedule never reaches a device without passing the lab limits.
        self.schedule = check(schedule, lim)
        self.log_path = Path(log_path) if log_path is not None else None
        self.publish = publish
        self.start_delay_s = start_delay_s
        self.safe_on_finish = safe_on_finish
        self.clock = clock
        self.on_done = on_done
        self.skip_stale = skip_stale
        self._stop = threading.Event()
        self._hold_on_stop = False
        self._thread: threading.Thread | None = None
        self.result: PlayResult | None = None
        self.applied = 0
        self._spin_s = SPIN_S

    # ----- control -----
    def stop(self, hold: bool = False) -> None:
        """Stop playing: the box goes to its safe state, or keeps the last value played with `hold`."""
        self._hold_on_stop = hold
        self._stop.set()

    def start(self) -> Player:
        """Play in a background thread; `wait()` returns the result."""
        self._thread = threading.Thread(target=self.run, name="attenuator-player", daemon=True)
        self._thread.start()
        return self

    def wait(self, timeout_s: float | None = None) -> PlayResult | None:
        if self._thread is not None:
            self._thread.join(timeout_s)
        return self.result

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    # ----- playback -----
    def _sleep_until(self, deadline: float) -> bool:
        """False if stopped before the deadline."""
        while True:
            left = deadline - self.clock()
            if left <= 0:
                return True
            if left > self._spin_s:
                if self._stop.wait(left - self._spin_s):
                    return False
            else:
                time.sleep(0)  # yield; returns within the scheduler's latency
                if self._stop.is_set():
                    return False

    def run(self) -> PlayResult:
        """Play in the calling thread, at real-time priority when allowed (restored afterwards)."""
        previous = _realtime_thread()
        self._spin_s = SPIN_S if previous is None else 0.0  # a SCHED_FIFO wake-up is prompt: no need to spin
        try:
            return self._play(realtime=previous is not None)
        finally:
            if previous is not None:
                os.sched_setscheduler(0, *previous)

    def _play(self, realtime: bool) -> PlayResult:
        log = _Log(self.log_path)
        points = self.schedule.points
        result = PlayResult(status="completed", planned=len(points), log_path=str(self.log_path or ""))
        t0 = self.clock() + self.start_delay_s
        log.header(
            {
                "schedule": self.schedule.name,
                "attenuator": self.attenuator.config.name,
                "t0_monotonic_s": t0,
                "t0_wall_s": time.time() + self.start_delay_s,
                "points": len(points),
                "clipped": self.schedule.clip_report.clipped,
                "realtime": realtime,
            }
        )
        late_ms = 0.0
        # index of the next point on the same channel: when that one is already due, this one is stale
        next_same: list[int | None] = [None] * len(points)
        seen: dict[int, int] = {}
        for i in range(len(points) - 1, -1, -1):
            next_same[i] = seen.get(points[i].channel)
            seen[points[i].channel] = i
        try:
            for i, p in enumerate(points):
                if not self._sleep_until(t0 + p.t_s):
                    result.status = "stopped"
                    break
                nxt = next_same[i]
                if self.skip_stale and nxt is not None and self.clock() >= t0 + points[nxt].t_s:
                    # a slow device fell behind: apply the newest due value, not every old one
                    result.skipped += 1
                    continue
                readback = self.attenuator.set(p.channel, p.db)
                applied = self.attenuator.last_applied_s - t0
                late_ms = (applied - p.t_s) * 1000.0
                result.max_late_ms = max(result.max_late_ms, abs(late_ms))
                row = {
                    "planned_s": round(p.t_s, 6),
                    "applied_s": round(applied, 6),
                    "late_ms": round(late_ms, 3),
                    "channel": p.channel,
                    "db": p.db,
                    "readback_db": readback,
                    "source": p.source,
                }
                log.point(row)
                self.applied += 1
                if self.publish is not None:
                    try:
                        self.publish("attenuation", {"attenuator": self.attenuator.config.name, **row})
                    except Exception:  # noqa: BLE001 - telemetry must never stop playback
                        pass
            else:
                # hold the last value until the schedule's end (a trailing hold segment)
                if not self._sleep_until(t0 + self.schedule.duration_s):
                    result.status = "stopped"
        except Exception as exc:  # noqa: BLE001 - any failure: safe state, run marked failed
            result.status = "failed"
            result.error = f"{type(exc).__name__}: {exc}"
        result.applied = self.applied
        result.end_drift_ms = round(late_ms, 3)
        held = result.status == "stopped" and self._hold_on_stop
        if (result.status != "completed" and not held) or self.safe_on_finish:
            result.safe_state = self.attenuator.safe_state()
        log.event({"event": "end", **result.model_dump(exclude={"log_path"})})
        log.close()
        self.result = result
        if self.on_done is not None:
            try:
                self.on_done(result)
            except Exception:  # noqa: BLE001 - a broken callback must not hide the result
                pass
        return result
