"""A lab's stack clock: the TTIs its radio stack actually ran, against the wall clock (CLOCK_REALTIME, the clock of
packet captures). A real eNB and the virtual lab keep real time (`StackClock.wall()`); srsRAN over ZMQ is clocked
by its samples and runs as fast as the host lets it, so the ZMQ broker records when each TTI passed
(`StackClock.from_file`, ran-config/broker/clock.c). Consumers (SR estimation, fidelity, validity) ask the lab
(`EmbeddedLab.stack_clock`) and never branch on its kind.

The file (one per direction, `stack-clock-dl.bin` / `stack-clock-ul.bin`): one JSON line (at most 4096 bytes)
    {"format": "cellab-stack-clock", "version": 1, "direction": "dl"|"ul", "sample_rate_hz": N,
     "samples_per_tti": N/1000, "clock": "CLOCK_REALTIME", "run_id": "...", "first_tti": K}
then one little-endian int64 per TTI: ns since the epoch at which the last sample of TTI K+i passed the broker,
strictly increasing. So record i is the end of TTI K+i: `tti_at` of its time is K+i+1 (TTI k runs over the
fractional TTIs [k, k+1))."""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellab.errors import CellabError, InputError
from cellab.records import Strict

if TYPE_CHECKING:
    import numpy as np

FORMAT, VERSION = "cellab-stack-clock", 1
HEADER_MAX_BYTES = 4096
RECORD_BYTES = 8
WINDOW_S = 0.1  # the speed's spread: TTIs per window of this many wall seconds
MAX_STALLS = 100  # a summary lists at most this many stalls (the first ones); max_gap_ms holds the worst
MAX_REASONS = 5  # covers() names at most this many gaps, then counts the rest
STALL_MS = 200.0  # a summary's stalls when the campaign sets no bound (retry.max_stack_gap_ms's default)
CLOCK_FILES = {"dl": "stack-clock-dl.bin", "ul": "stack-clock-ul.bin"}


class Stall(Strict):
    at_wall_s: float  # epoch s of the last TTI before the gap
    gap_ms: float  # wall time between that TTI and the next


class ClockSummary(Strict):
    source: str  # "wall" | "stack-clock-dl" | "stack-clock-ul" | "cell-ttilog"
    speed: float | None  # mean stack TTIs per wall second / 1000 (1.0 = real time)
    speed_p5: float | None  # spread over WINDOW_S windows
    speed_p95: float | None
    ttis: int  # TTIs recorded
    stalls: list[Stall]  # wall gaps between two TTIs over the summary's stall_ms
    max_gap_ms: float
    file_sha256: str | None


def _excuse(from_s: float, to_s: float, excused: Sequence[tuple[float, float, str]]) -> str | None:
    """The reason of the excused window holding the whole gap [from, to], or None."""
    return next((why for lo, hi, why in excused if lo <= from_s and to_s <= hi), None)


def _iso(wall_s: float) -> str:
    return datetime.fromtimestamp(wall_s, UTC).strftime("%H:%M:%S.%f")[:-3] + " UTC"


class StackClock:
    """Wall time <-> stack TTI. Built by `wall()` (stack time is wall time: TTI = epoch ms) or `from_file`."""

    def __init__(self, source: str, times_ns: np.ndarray | None = None, first_tti: int = 0,
                 file_sha256: str | None = None, header: dict | None = None, path: Path | None = None):
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        self.source, self.first_tti, self.file_sha256 = source, first_tti, file_sha256
        self.header, self.path = header or {}, path
        self._ns = times_ns if times_ns is not None else np.zeros(0, dtype=np.int64)
        self._base_ns = int(self._ns[0]) if len(self._ns) else 0
        self._t = (self._ns - self._base_ns).astype(np.float64) / 1e9  # s since the first record
        self._k = first_tti + 1.0 + np.arange(len(self._ns), dtype=np.float64)  # the stack TTI at each record

    # ---- building -----------------------------------------------------------------------------
    @classmethod
    def wall(cls) -> StackClock:
        """A stack at real time (a real eNB, the virtual lab): TTI k is epoch millisecond k."""
        return cls("wall")

    @classmethod
    def from_file(cls, path: str | Path, expect_run_id: str | None = None) -> StackClock:
        """The broker's clock file; InputError naming the file and the field or record for a wrong header, a run id
        other than `expect_run_id`, a truncated record or a time not after the one before."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        path = Path(path)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise InputError(path, "", f"cannot read the stack clock: {exc.strerror or exc}") from None
        end = data.find(b"\n", 0, HEADER_MAX_BYTES)
        if end < 0:
            raise InputError(path, "header", f"no JSON line ending in a newline within its first {HEADER_MAX_BYTES} "
                                             f"bytes (a stack clock file starts with one)")
        header = _header(path, data[:end])
        if expect_run_id is not None and header["run_id"] != expect_run_id:
            raise InputError(path, "header.run_id", f"{header['run_id']!r} is another run's clock (this run is "
                                                    f"{expect_run_id!r})")
        body = memoryview(data)[end + 1:]
        whole, rest = divmod(len(body), RECORD_BYTES)
        if rest:
            raise InputError(path, f"record {whole}", f"truncated: {rest} of {RECORD_BYTES} bytes (the file ends "
                                                      f"inside a record)")
        ns = np.frombuffer(body, dtype="<i8").astype(np.int64)
        if len(ns):
            if ns[0] <= 0:
                raise InputError(path, "record 0", f"time {int(ns[0])} ns is not after the epoch")
            back = np.flatnonzero(np.diff(ns) <= 0)
            if len(back):
                i = int(back[0]) + 1
                raise InputError(path, f"record {i}", f"not monotonic: TTI {header['first_tti'] + i} at "
                                                      f"{int(ns[i])} ns is not after record {i - 1}'s "
                                                      f"{int(ns[i - 1])} ns")
        return cls(f"stack-clock-{header['direction']}", ns, header["first_tti"],
                   hashlib.sha256(data).hexdigest(), header, path)

    # ---- the mapping --------------------------------------------------------------------------
    @property
    def ttis(self) -> int:
        return len(self._ns)

    def _mean_rate(self) -> float:
        """TTIs per wall second over the whole clock (1000 with fewer than two records)."""
        if len(self._t) < 2 or self._t[-1] <= 0:
            return 1000.0
        return (len(self._t) - 1) / float(self._t[-1])

    def tti_at(self, wall_s: float) -> float:
        """The fractional stack TTI at a wall time (epoch s); outside the records, extended at the mean rate."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        if self.source == "wall" or not len(self._t):
            return wall_s * 1000.0
        t = wall_s - self._base_ns / 1e9
        if t < 0:
            return float(self._k[0] + t * self._mean_rate())
        if t > self._t[-1]:
            return float(self._k[-1] + (t - self._t[-1]) * self._mean_rate())
        return float(np.interp(t, self._t, self._k))

    def wall_at(self, tti: float) -> float:
        """The wall time (epoch s) of a fractional stack TTI (tti_at's inverse)."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        if self.source == "wall" or not len(self._t):
            return tti / 1000.0
        base = self._base_ns / 1e9
        if tti < self._k[0]:
            return base + (tti - self._k[0]) / self._mean_rate()
        if tti > self._k[-1]:
            return base + float(self._t[-1]) + (tti - self._k[-1]) / self._mean_rate()
        return base + float(np.interp(tti, self._k, self._t))

    def stack_s(self, wall_s: float) -> float:
        """Stack seconds (TTIs / 1000) since the clock's first TTI began, at a wall time (wall: epoch s)."""
        return (self.tti_at(wall_s) - self.first_tti) / 1000.0

    # ---- judging ------------------------------------------------------------------------------
    def _window(self, start_wall_s: float | None, end_wall_s: float | None) -> np.ndarray:
        """Indices of the records in [start, end] plus the one either side (the gaps across the edges)."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        t = self._t + self._base_ns / 1e9
        lo = 0 if start_wall_s is None else max(0, int(np.searchsorted(t, start_wall_s)) - 1)
        hi = len(t) if end_wall_s is None else min(len(t), int(np.searchsorted(t, end_wall_s, side="right")) + 1)
        return np.arange(lo, hi)

    def covers(self, start_wall_s: float, end_wall_s: float, max_gap_ms: float,
               excused: Sequence[tuple[float, float, str]] = ()) -> list[str]:
        """Why the clock does not cover the wall span [start, end] with no wall gap between two TTIs (or between
        an edge and its nearest TTI) over max_gap_ms; [] when it does (always, for the wall clock). A gap wholly
        inside one of the lab's `excused` windows (from, to, why: wall s) is not counted (see excused_gaps)."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        if self.source == "wall":
            return []
        name = self.path.name if self.path else self.source
        if not len(self._t):
            return [f"the stack clock ({name}) recorded no TTI"]
        t = self._t + self._base_ns / 1e9
        reasons = []
        if (t[0] - start_wall_s) * 1000 > max_gap_ms:
            reasons.append(f"the stack clock ({name}) starts {(t[0] - start_wall_s) * 1000:.0f} ms after the "
                           f"workload began (bound {max_gap_ms:g} ms)")
        if (end_wall_s - t[-1]) * 1000 > max_gap_ms:
            reasons.append(f"the stack clock ({name}) ends {(end_wall_s - t[-1]) * 1000:.0f} ms before the "
                           f"workload ended (bound {max_gap_ms:g} ms): the stack stalled or the recording stopped")
        idx = self._window(start_wall_s, end_wall_s)
        gaps_ms = np.diff(t[idx]) * 1000
        over = [j for j in np.flatnonzero(gaps_ms > max_gap_ms)
                if _excuse(float(t[idx[j]]), float(t[idx[j + 1]]), excused) is None]
        for j in over[:MAX_REASONS]:
            i = int(idx[j])
            reasons.append(f"the stack stalled {gaps_ms[j]:.0f} ms after TTI {self.first_tti + i} at "
                           f"{_iso(float(t[i]))} (no TTI passed the broker; bound retry.max_stack_gap_ms "
                           f"{max_gap_ms:g})")
        if len(over) > MAX_REASONS:
            reasons.append(f"and {len(over) - MAX_REASONS} more stalls over {max_gap_ms:g} ms")
        return reasons

    def excused_gaps(self, start_wall_s: float, end_wall_s: float, max_gap_ms: float,
                     excused: Sequence[tuple[float, float, str]]) -> list[dict[str, Any]]:
        """The gaps over max_gap_ms in [start, end] that covers() did not count, each with its window's reason."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        if self.source == "wall" or not excused or not len(self._t):
            return []
        t = (self._t + self._base_ns / 1e9)[self._window(start_wall_s, end_wall_s)]
        gaps_ms = np.diff(t) * 1000
        return [{"at_wall_s": round(float(t[j]), 6), "gap_ms": round(float(gaps_ms[j]), 3), "why": why}
                for j in np.flatnonzero(gaps_ms > max_gap_ms)
                if (why := _excuse(float(t[j]), float(t[j + 1]), excused)) is not None][:MAX_STALLS]

    def summary(self, stall_ms: float, start_wall_s: float | None = None,
                end_wall_s: float | None = None) -> ClockSummary:
        """Speed (mean and spread over WINDOW_S windows), stalls over stall_ms and the worst gap, over the whole
        clock or the wall span [start, end]."""
        import numpy as np  # numpy on use: cellab.labs is imported by lean agents and every validate

        if self.source == "wall":
            return ClockSummary(source="wall", speed=1.0, speed_p5=1.0, speed_p95=1.0, ttis=0, stalls=[],
                                max_gap_ms=0.0, file_sha256=None)
        t = (self._t + self._base_ns / 1e9)[self._window(start_wall_s, end_wall_s)]
        if start_wall_s is not None or end_wall_s is not None:  # the span's own TTIs for speed and count
            inside = t[(t >= (start_wall_s or -math.inf)) & (t <= (end_wall_s if end_wall_s is not None else math.inf))]
        else:
            inside = t
        gaps_ms = np.diff(t) * 1000
        speed = p5 = p95 = None
        if len(inside) >= 2 and inside[-1] > inside[0]:
            speed = round((len(inside) - 1) / float(inside[-1] - inside[0]) / 1000, 4)
            n_windows = int((inside[-1] - inside[0]) // WINDOW_S)
            if n_windows >= 1:
                counts = np.bincount(((inside - inside[0]) // WINDOW_S).astype(int), minlength=n_windows)[:n_windows]
                rates = counts / WINDOW_S / 1000
                p5, p95 = (round(float(v), 4) for v in np.percentile(rates, [5, 95]))
        stalls = [Stall(at_wall_s=round(float(t[j]), 6), gap_ms=round(float(gaps_ms[j]), 3))
                  for j in np.flatnonzero(gaps_ms > stall_ms)[:MAX_STALLS]]
        return ClockSummary(source=self.source, speed=speed, speed_p5=p5, speed_p95=p95, ttis=int(len(inside)),
                            stalls=stalls, max_gap_ms=round(float(gaps_ms.max()), 3) if len(gaps_ms) else 0.0,
                            file_sha256=self.file_sha256)


def _header(path: Path, line: bytes) -> dict:
    """The header line checked field by field (InputError naming the field and what it may be)."""
    try:
        header = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise InputError(path, "header", f"not a JSON line ({exc}); a stack clock file starts with its JSON "
                                         f"header") from None
    if not isinstance(header, dict):
        raise InputError(path, "header", "not a JSON object")
    if header.get("format") != FORMAT:
        raise InputError(path, "header.format", f"{header.get('format')!r} is not a stack clock", [FORMAT])
    if header.get("version") != VERSION:
        raise InputError(path, "header.version", f"{header.get('version')!r} is not a version this reader knows",
                         [VERSION])
    if header.get("direction") not in CLOCK_FILES:
        raise InputError(path, "header.direction", f"{header.get('direction')!r}", list(CLOCK_FILES))
    for key in ("sample_rate_hz", "samples_per_tti", "first_tti"):
        value = header.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or value < (0 if key == "first_tti" else 1):
            raise InputError(path, f"header.{key}", f"{value!r} is not a {'non-negative' if key == 'first_tti' else 'positive'} "
                                                    f"whole number")
    if header["samples_per_tti"] * 1000 != header["sample_rate_hz"]:
        raise InputError(path, "header.samples_per_tti", f"{header['samples_per_tti']} is not sample_rate_hz "
                                                         f"{header['sample_rate_hz']} / 1000 (a TTI is 1 ms)")
    if header.get("clock") != "CLOCK_REALTIME":
        raise InputError(path, "header.clock", f"{header.get('clock')!r}", ["CLOCK_REALTIME"])
    if not isinstance(header.get("run_id"), str):
        raise InputError(path, "header.run_id", f"{header.get('run_id')!r} is not a string")
    return header


def run_clock_timing(lab: object, lab_artifacts_dir: Path, start_wall_s: float, end_wall_s: float,
                     max_gap_ms: float | None, excused: Sequence[tuple[float, float, str]] = ()) -> dict:
    """A run's lab_timing part from its lab's stack clock over the workload [start, end]: {} for a stack at real
    time (or a lab without stack_clock); else {"stack_clock": its ClockSummary over the workload (stalls over
    max_gap_ms, else STALL_MS) and the file's name, "stack_clock_invalid": why it does not cover the workload within
    max_gap_ms (None: not judged)}. An unreadable clock is a reason, not a traceback."""
    stack_clock = getattr(lab, "stack_clock", None)
    if not callable(stack_clock):
        return {}
    try:
        clock = stack_clock(lab_artifacts_dir)
    except CellabError as exc:
        return {"stack_clock_invalid": [f"the stack clock is unusable: {exc}"]}
    if clock.source == "wall":
        return {}
    stall_ms = max_gap_ms if max_gap_ms is not None else STALL_MS
    out: dict = {"stack_clock": clock.summary(stall_ms, start_wall_s, end_wall_s).model_dump(mode="json")
                 | {"file": clock.path.name if clock.path else None}}
    if max_gap_ms is not None and (reasons := clock.covers(start_wall_s, end_wall_s, max_gap_ms, excused)):
        out["stack_clock_invalid"] = reasons
    if max_gap_ms is not None and (gaps := clock.excused_gaps(start_wall_s, end_wall_s, max_gap_ms, excused)):
        out["stack_clock"]["excused_stalls"] = gaps  # beside every stall the summary lists: not counted, and why
    return out
