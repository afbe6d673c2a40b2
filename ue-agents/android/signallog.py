"""A 1 Hz signal log: one JSON object per line, the drive-log format the mobility replay reads
(attenuator/mobility.py ANDROID_SIGNAL_LOG: `time_ms` (Unix ms), `rsrp_dbm`; an unavailable RSRP
is written as 2147483647, which the replay skips), plus the other radio fields for people."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from pathlib import Path

from cellab.contracts.ue import SignalReading
from cellab.errors import CellabError

from .telephony import UNAVAILABLE

PERIOD_S = 1.0


class SignalLogger:
    """Reads `read()` every period_s in a thread, appends a line to `path`, hands each reading to `on_sample`.
    A failed read (phone gone, no LTE) is a line with the unavailable RSRP and the error, not a stop."""

    def __init__(self, read: Callable[[], SignalReading], path: Path, *, period_s: float = PERIOD_S,
                 on_sample: Callable[[SignalReading], None] | None = None,
                 on_error: Callable[[str], None] | None = None):
        self.read, self.path, self.period_s, self.on_sample = read, Path(path), period_s, on_sample
        self.on_error = on_error
        self.samples = 0
        self.errors = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> SignalLogger:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._loop, name=f"signal-log-{self.path.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(10)

    def __enter__(self) -> SignalLogger:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _loop(self) -> None:
        with open(self.path, "a", buffering=1) as out:  # line-buffered: a crash keeps what was logged
            next_s = time.monotonic()
            while not self._stop.is_set():
                out.write(json.dumps(self.sample()) + "\n")
                next_s += self.period_s
                self._stop.wait(max(0.0, next_s - time.monotonic()))

    def sample(self) -> dict:
        time_ms = int(time.time() * 1000)
        try:
            reading = self.read()
        except CellabError as exc:
            self.errors += 1
            if self.on_error is not None:
                self.on_error(str(exc))
            return {"time_ms": time_ms, "rsrp_dbm": UNAVAILABLE, "error": str(exc)[:200]}
        self.samples += 1
        if self.on_sample is not None:
            self.on_sample(reading)
        return {"time_ms": time_ms, **reading.model_dump(exclude_none=True)}
