"""A step repeated on a daemon thread (the labs' log bounds: ran-config/logbound.py, core-config/logbound.py): a
step that raises is logged and the next period tries again, since a file that went away under it is no reason to
stop bounding the others."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable


class Periodic:
    """`step()` every `period_s` from `start()` until `stop()`; `what` names the step in the warning of one that
    failed."""

    def __init__(self, step: Callable[[], None], period_s: float, name: str, what: str, logger: logging.Logger):
        self._step, self.period_s, self._what, self._log = step, period_s, what, logger
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        if not self._thread.is_alive() and not self._stop.is_set():
            self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.period_s):
            try:
                self._step()
            except Exception:  # noqa: BLE001 (a file gone under it: the next period tries again)
                self._log.warning("%s failed", self._what, exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=5)
