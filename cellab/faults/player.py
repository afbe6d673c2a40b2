"""Faults played on a run's timeline: each step at its time through the box that owns it (the attenuator agent's
channel for a radio outage, the lab's typed inject_fault for the rest), every fault ended when the run stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from cellab.faults.spec import FaultSpec


class FaultPlayer:
    """Plays a run's faults on a thread, timed from the workload's start `t0` (wall clock): `apply(i, active)`
    starts or ends fault i and returns what the box replied. `finish()` ends every fault still active (also
    when the workload failed) and returns the log: per fault, when it was asked and applied."""

    def __init__(self, faults: list[FaultSpec], apply: Callable[[int, bool], dict[str, Any]], t0: float):
        self.faults, self.apply, self.t0 = faults, apply, t0
        self.log: list[dict[str, Any]] = []
        self.active: set[int] = set()
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._play, name="faults", daemon=True)

    def start(self) -> FaultPlayer:
        self._thread.start()
        return self

    def _step(self, i: int, active: bool, planned_s: float) -> None:
        with self._lock:
            if active == (i in self.active):
                return
            asked = time.time()
            try:
                reply = self.apply(i, active)
            except Exception as exc:  # noqa: BLE001 - any failure of the box is the run's: it is reported
                reply = {"error": f"{type(exc).__name__}: {exc}"}
                self.errors.append(f"fault {i} ({self.faults[i].kind}) {'start' if active else 'end'}: "
                                   f"{reply['error']}")
            done = time.time()
            (self.active.add if active else self.active.discard)(i)
            self.log.append({"fault": i, "kind": self.faults[i].kind, "action": "start" if active else "end",
                             "planned_s": planned_s, "asked_s": asked - self.t0, "applied_s": done - self.t0,
                             "reply": reply})

    def _play(self) -> None:
        steps = sorted([(f.at_s, 1, i, True) for i, f in enumerate(self.faults)]
                       + [(f.end_s, 0, i, False) for i, f in enumerate(self.faults)])
        for at, _, i, active in steps:
            if self._stop.wait(max(0.0, self.t0 + at - time.time())):
                return
            self._step(i, active, at)

    def finish(self) -> list[dict[str, Any]]:
        self._stop.set()
        self._thread.join(timeout=30)
        for i in sorted(self.active):
            self._step(i, False, self.faults[i].end_s)
        return self.log
