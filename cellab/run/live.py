"""The live view of `cellab run`: each run's line as it finishes with the ETA (cellab.run.view, the lines `cellab
status` prints too), and the running run's last seconds (throughput, RTT, attenuation) from the telemetry it is
writing, for inventory runs as for embedded ones. On a terminal a rich Live line under the finished runs,
refreshed every second; otherwise (a CI log, a pipe) plain lines only: the running run's every PLAIN_EVERY_S. Not
entered (runs on Dask workers, whose telemetry stays there), it prints the finished runs' lines only."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from cellab.run.view import eta_text, headline_metric, last_seconds, now_line, run_line

REFRESH_S = 1.0
PLAIN_EVERY_S = 30.0


class LiveView:
    def __init__(self, console: Console, rows: Any, campaign: dict[str, Any], plain_every_s: float = PLAIN_EVERY_S):
        self.console = console
        self.rows = rows  # () -> the store's rows (ResultStore.rows)
        self.metric = headline_metric(campaign)
        self.plain_every_s = plain_every_s
        self._running: tuple[str, dict[str, Any], Path, float] | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._live: Live | None = None
        self._eta = ""

    def __enter__(self) -> LiveView:
        self._stop.clear()
        if self.console.is_terminal:
            self._live = Live(Text(""), console=self.console, refresh_per_second=4, transient=True)
            self._live.start()
        self._thread = threading.Thread(target=self._loop, name="live-view", daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        if self._live is not None:
            self._live.stop()
        self._thread = self._live = None

    def running(self, run_id: str, factors: dict[str, Any], run_dir: Path) -> None:
        with self._lock:
            self._running = (run_id, factors, run_dir, time.time())

    def finished(self, run_id: str) -> None:
        """A run's record is stored: its line and the ETA, above the live line."""
        with self._lock:
            if self._running and self._running[0] == run_id:
                self._running = None
        rows = self.rows()
        row = next((r for r in rows if r["run_id"] == run_id), None)
        self._eta = eta_text(rows)
        if row is not None:
            self.say(f"{run_line(row, self.metric)}  [{self._eta}]")

    def say(self, text: str) -> None:
        self.console.print(text, highlight=False, markup=False, soft_wrap=True)

    def _now(self) -> str | None:
        with self._lock:
            running = self._running
        if running is None:
            return None
        run_id, factors, run_dir, since = running
        return now_line(run_id, factors, time.time() - since, last_seconds(run_dir))

    def _loop(self) -> None:
        last_plain = time.monotonic()
        while not self._stop.wait(REFRESH_S):
            try:
                line = self._now()
            except OSError:  # a run folder replaced under the reader (a retried attempt): the next second reads it
                continue
            if self._live is not None:
                self._live.update(Text("\n".join(p for p in (line, self._eta) if p)))
            elif line and time.monotonic() - last_plain >= self.plain_every_s:
                last_plain = time.monotonic()
                self.say(line)
