"""A swinging host, on purpose: srsenb (of one process tree: a benchmark's own `cellab run`) is stopped and continued
in a loop, the pause redrawn every 300 ms, so the stack's TTI rate swings the way a loaded 2-core host makes it (issue
37: 340-700 TTIs per wall second within a run). `CELLAB_SR_BENCH_SWING=LO-HI` (ms) in the SR bench: each cycle
srsenb runs RUN_MS and stops a pause drawn between LO and HI ms. Only descendants of the given process are touched,
and every one is continued when the swing ends."""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from pathlib import Path

from cellab.errors import InputError

RUN_MS = 20.0
REDRAW_S = 0.3
RESCAN_S = 0.5
TARGET = "srsenb"


def parse_swing(text: str) -> tuple[float, float]:
    """'LO-HI' (ms, 0 < LO <= HI <= 200) -> (LO, HI); InputError naming the variable otherwise."""
    try:
        lo, hi = (float(x) for x in text.split("-"))
    except ValueError:
        raise InputError("CELLAB_SR_BENCH_SWING", "", f"{text!r} is not LO-HI (ms, e.g. 5-35)") from None
    if not 0 < lo <= hi <= 200:
        raise InputError("CELLAB_SR_BENCH_SWING", "", f"{text!r}: needs 0 < LO <= HI <= 200 ms")
    return lo, hi


def _descendants(root: int, name: str) -> list[int]:
    children: dict[int, list[tuple[int, str]]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
        children.setdefault(int(rest.split()[1]), []).append((int(entry.name), comm))
    found, todo = [], [root]
    while todo:
        for pid, comm in children.get(todo.pop(), []):
            todo.append(pid)
            if comm == name:
                found.append(pid)
    return found


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except OSError:  # it ended between the scan and now
            pass


class StackSwing:
    """Stop/continue srsenb under `root` until stop(); seeded, so a swing is repeatable."""

    def __init__(self, root: int, lo_ms: float, hi_ms: float, seed: int = 37):
        self.root, self.lo_ms, self.hi_ms = root, lo_ms, hi_ms
        self._rng = random.Random(seed)
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="stack-swing", daemon=True)

    def start(self) -> StackSwing:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._done.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        pids: list[int] = []
        rescan = redraw = 0.0
        pause_ms = self.lo_ms
        try:
            while not self._done.is_set():
                now = time.monotonic()
                if now >= rescan:
                    pids, rescan = _descendants(self.root, TARGET), now + RESCAN_S
                if now >= redraw:
                    pause_ms, redraw = self._rng.uniform(self.lo_ms, self.hi_ms), now + REDRAW_S
                if pids:
                    _signal(pids, signal.SIGSTOP)
                    time.sleep(pause_ms / 1000)
                    _signal(pids, signal.SIGCONT)
                self._done.wait(RUN_MS / 1000 if pids else RESCAN_S)
        finally:
            _signal(_descendants(self.root, TARGET) if os.path.exists(f"/proc/{self.root}") else pids, signal.SIGCONT)
