"""What an eNB agent runs, for a run's provenance (mixed into EnbAgent): srsenb by the sha256 of the binary the
running process executes (/proc/PID/exe: a binary rebuilt while it runs shows as replaced_on_disk) and by the
version it prints (`srsenb --version`); the configured binary by hash when none runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cellab.software import process_record, program_record

from .srsenb_proc import SrsenbError, find_srsenb


class EnbProvenance:
    """Mixin for the eNB agent (provides srsenb_bin and _proc, its SrsenbProcess)."""

    srsenb_bin: str | Path | None
    _proc: Any

    def software_report(self) -> dict[str, Any]:
        try:
            binary: Path | None = find_srsenb(self.srsenb_bin)
        except SrsenbError:
            binary = None
        proc = self._proc
        running = process_record(proc.pid) if proc is not None and proc.running() else None
        return {"programs": {"srsenb": program_record(binary) if binary else None},
                "running": {"srsenb": running}}
