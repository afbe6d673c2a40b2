"""The throughput/delay frontier of constant windows on one trace slice, and where C2TCP and Cubic sit on it.

Issue 18 asks C2TCP for at least 0.8 x Cubic's throughput at no more than 0.5 x its average delay on the thin
slice of TMobile-LTE-driving. Whether any sender of the same kind can do that on that slice is a measurement:
`cubic_cap` holds a constant window, and a range of caps draws the points a constant window reaches there
(the paper's Table I setup, table1.play). A point above the curve is better than every constant window."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from . import experiment, modules, table1

THIN_TRACE = "TMobile-LTE-driving.down"
THIN_OFFSET_MS = 285_000   # 4.5 Mbit/s, delivers in 7 % of its milliseconds, gaps up to 1 s
CAPS_PKTS = (16, 24, 32, 40, 48, 64)
ISSUE_THROUGHPUT_SHARE = 0.8  # issue 18: C2TCP >= 0.8 x Cubic's throughput ...
ISSUE_DELAY_SHARE = 0.5       # ... at <= 0.5 x Cubic's average delay


@dataclass(frozen=True)
class Point:
    name: str
    throughput_mbit: float
    delay_ms: float


def throughput_at_delay(curve: list[Point], delay_ms: float) -> float:
    """The frontier's throughput at a given delay: linear between the neighbouring points of the upper
    envelope (a point is kept only if every point of lower delay has less throughput); flat beyond the
    largest delay, NaN below the smallest (the smallest cap should be chosen below the delays judged)."""
    envelope: list[Point] = []
    for p in sorted(curve, key=lambda p: p.delay_ms):
        if not envelope or p.throughput_mbit > envelope[-1].throughput_mbit:
            envelope.append(p)
    if not envelope or delay_ms < envelope[0].delay_ms:
        return float("nan")
    for a, b in zip(envelope, envelope[1:], strict=False):
        if a.delay_ms <= delay_ms <= b.delay_ms:
            f = (delay_ms - a.delay_ms) / (b.delay_ms - a.delay_ms) if b.delay_ms > a.delay_ms else 1.0
            return a.throughput_mbit + f * (b.throughput_mbit - a.throughput_mbit)
    return envelope[-1].throughput_mbit


@dataclass(frozen=True)
class Frontier:
    cubic: Point
    c2tcp: Point
    constant_windows: list[Point]

    @property
    def c2tcp_vs_frontier(self) -> float:
        """C2TCP's throughput / the constant windows' at C2TCP's delay (>= 1: on or above the curve)."""
        return self.c2tcp.throughput_mbit / throughput_at_delay(self.constant_windows, self.c2tcp.delay_ms)

    @property
    def frontier_at_issue_delay(self) -> float:
        """The constant windows' throughput at 0.5 x Cubic's delay, as a share of Cubic's (issue bar: 0.8)."""
        at = throughput_at_delay(self.constant_windows, ISSUE_DELAY_SHARE * self.cubic.delay_ms)
        return at / self.cubic.throughput_mbit


def measure(trace: Path, offset_ms: int, logs: Path, caps: tuple[int, ...] = CAPS_PKTS,
            progress: Callable[[str], None] = print) -> Frontier:
    """Cubic, C2TCP (Target 50 ms) and cubic_cap at every cap, one table1.SLICE_MS flow each on the same slice."""
    sliced = experiment.rotated_trace(trace, offset_ms, logs / f"{trace.stem}-{offset_ms}.down")
    points: dict[str, Point] = {}

    def run(name: str, cc: str) -> None:
        one = table1.play(sliced, cc, logs / name)
        points[name] = Point(name, one.throughput_mbit, one.delay_ms)
        progress(f"  {name}: {one.throughput_mbit:.2f} Mbit/s at {one.delay_ms:.1f} ms mean queueing delay")

    with experiment.loaded(["c2tcp", "cubic_cap"]):
        modules.set_param("c2tcp", "target_ms", table1.TARGET_MS)
        run("cubic", "cubic")
        run("c2tcp", "c2tcp")
        for cap in caps:
            modules.set_param("cubic_cap", "cwnd_cap_pkts", cap)
            run(f"window {cap}", "cubic_cap")
    return Frontier(points["cubic"], points["c2tcp"], [points[f"window {cap}"] for cap in caps])
