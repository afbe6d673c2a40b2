"""`make bench` (attenuator): player timing at 10 updates/s against the Mini-Circuits serial emulator.

Measures, over CELLAB_BENCH_SECONDS (default 600 = the issue's 10 minutes):
  p99 of |applied − planned| (target ≤ 5 ms) and the drift at the end (target ≤ 1 ms),
for the player (absolute deadlines on the monotonic clock) and, in the same run and at the same
time in a second process with its own emulator, a bare loop of time.sleep(interval) + set.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import statistics
import tempfile
import time
from pathlib import Path

RATE_HZ = 10.0


def _device_and_driver(folder: Path):
    from .config import AttenuatorConfig
    from .driver import create
    from .emulators.minicircuits import MiniCircuitsDevice

    dev = MiniCircuitsDevice()
    srv = dev.serve_pty(link=str(folder / "tty"))
    drv = create(AttenuatorConfig(name="bench", model="minicircuits-rcdat", transport="serial", address=srv.port,
                                  min_db=0, max_db=100, timeout_s=1.0))
    return srv, drv


def _values(n: int) -> list[float]:
    return [20.0 + (k % 160) * 0.25 for k in range(n)]  # a slow sawtooth: every update changes the value


def run_player(seconds: float, folder: str, out: mp.Queue[list[float]]) -> None:
    from .player import Player
    from .schedule import Point, Schedule

    n = int(seconds * RATE_HZ)
    srv, drv = _device_and_driver(Path(folder))
    points = [Point(t_s=k / RATE_HZ, channel=1, db=v) for k, v in enumerate(_values(n))]
    log = Path(folder) / "player.jsonl"
    try:
        res = Player(drv, Schedule(name="bench", points=points, duration_s=points[-1].t_s), log_path=log).run()
    finally:
        drv.close()
        srv.stop()
    if res.status != "completed":
        raise RuntimeError(f"player {res.status}: {res.error}")
    out.put([json.loads(line)["late_ms"] for line in log.read_text().splitlines() if '"planned_s"' in line])


def run_sleep_loop(seconds: float, folder: str, out: mp.Queue[list[float]]) -> None:
    n = int(seconds * RATE_HZ)
    srv, drv = _device_and_driver(Path(folder))
    late: list[float] = []
    try:
        t0 = time.monotonic()
        for k, v in enumerate(_values(n)):
            if k:
                time.sleep(1.0 / RATE_HZ)  # what a naive player does: sleep the interval
            drv.set(1, v)
            late.append((drv.last_applied_s - t0 - k / RATE_HZ) * 1000.0)
    finally:
        drv.close()
        srv.stop()
    out.put(late)


def _p99_abs(values: list[float]) -> float:
    ordered = sorted(abs(v) for v in values)
    return ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]


def _end_drift(values: list[float]) -> float:
    # median of the last 10 updates minus the first 10: how far the schedule slid, ignoring jitter
    return statistics.median(values[-10:]) - statistics.median(values[:10])


def _line(name: str, value: float, baseline: float, target: str) -> str:
    ratio = value / baseline if baseline else float("inf")
    return f"attenuator {name}: {value:.3f} ms | baseline (sleep loop) {baseline:.3f} ms | ratio {ratio:.3f} | target {target}"


def main() -> None:
    seconds = float(os.environ.get("CELLAB_BENCH_SECONDS", "600"))
    if seconds < 2:
        raise SystemExit("CELLAB_BENCH_SECONDS must be ≥ 2")
    ctx = mp.get_context("fork")
    with tempfile.TemporaryDirectory(prefix="cellab-att-bench-") as tmp:
        q_player: mp.Queue[list[float]] = ctx.Queue()
        q_sleep: mp.Queue[list[float]] = ctx.Queue()
        (Path(tmp) / "p").mkdir()
        (Path(tmp) / "s").mkdir()
        procs = [ctx.Process(target=run_player, args=(seconds, str(Path(tmp) / "p"), q_player)),
                 ctx.Process(target=run_sleep_loop, args=(seconds, str(Path(tmp) / "s"), q_sleep))]
        for p in procs:
            p.start()
        player = q_player.get(timeout=seconds + 120)
        sleep_loop = q_sleep.get(timeout=seconds + 120)
        for p in procs:
            p.join(30)
    print(f"attenuator player: {len(player)} updates at {RATE_HZ:g}/s over {seconds:g} s (serial emulator on a pty)")
    print(_line("p99 |applied-planned|", _p99_abs(player), _p99_abs(sleep_loop), "<= 5 ms"))
    print(_line("end drift", abs(_end_drift(player)), abs(_end_drift(sleep_loop)), "<= 1 ms"))


if __name__ == "__main__":
    main()
