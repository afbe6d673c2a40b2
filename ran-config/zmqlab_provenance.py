"""The srsran-zmq lab's own software, for a run's provenance (mixed into SrsranZmqLab): each srsue by the sha256
of the binary its process executes and the version srsue prints, the ZMQ broker by hash, and the core's flavour
and version as its daemons printed them. srsenb and the EPC daemons are reported by their own agents (the eNB
and core agents' `provenance`), each by the binary its process runs."""

from __future__ import annotations

from typing import Any

from cellab.errors import CellabError
from cellab.software import process_record, program_record

from .srsue_proc import SrsueError, find_srsue


def _pid(managed: Any) -> int | None:
    proc = getattr(managed, "proc", None)  # a ManagedProcess holds its Popen as .proc
    return proc.pid if proc is not None and proc.poll() is None else None


class ZmqLabProvenance:
    """Mixin for SrsranZmqLab (provides bin_dir, _ues, _broker, core_record)."""

    def provenance(self) -> dict[str, Any]:
        try:
            srsue = program_record(find_srsue(self.bin_dir))  # type: ignore[attr-defined]
        except (SrsueError, CellabError):
            srsue = None
        running = {f"srsue{i}": process_record(_pid(ue.proc)) for i, ue in enumerate(self._ues)  # type: ignore[attr-defined]
                   if ue.proc is not None}
        broker = self._broker  # type: ignore[attr-defined]
        if broker is not None and broker.proc is not None:
            running["cellab-zmq-broker"] = process_record(_pid(broker.proc))
        return {"programs": {"srsue": srsue}, "running": running, "core": self.core_record()}  # type: ignore[attr-defined]
