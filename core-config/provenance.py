"""What a core agent runs, for a run's provenance (mixed into CoreAgent): each running daemon by the sha256 of
the binary its process executes (/proc/PID/exe), and the version the daemons print when they start (Open5GS
v2.7.7, NextEPC, srsEPC 23.04.0: CoreAgent._daemon_version)."""

from __future__ import annotations

import threading
from typing import Any

from cellab.software import process_record


class CoreProvenance:
    """Mixin for the core agent (provides _lock, _procs, _flavour and _daemon_version)."""

    _lock: threading.Lock
    _procs: dict[str, Any]
    _flavour: str | None

    def software_report(self) -> dict[str, Any]:
        with self._lock:
            procs, flavour = dict(self._procs), self._flavour
            version = self._daemon_version()  # type: ignore[attr-defined]
        running = {name: process_record(proc.proc.pid) for name, proc in sorted(procs.items()) if proc.running()}
        return {"flavour": flavour, "version": version, "running": running}
