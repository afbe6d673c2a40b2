"""The virtual lab's own software, for a run's provenance (mixed into VirtualLab): the cell's binary by the
sha256 of what its process executes (/proc/PID/exe: a cellab-cell rebuilt while the cell runs shows as
replaced_on_disk) and the build the next start would use."""

from __future__ import annotations

from typing import Any

from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.software import process_record, program_record


class VirtualLabProvenance:
    """Mixin for VirtualLab (provides _cell_pid)."""

    def provenance(self) -> dict[str, Any]:
        try:
            built = program_record(find_program("cellab-cell"), version_argv=None)
        except CellabError:
            built = None
        return {"programs": {"cellab-cell": built},
                "running": {"cellab-cell": process_record(self._cell_pid())}}  # type: ignore[attr-defined]
