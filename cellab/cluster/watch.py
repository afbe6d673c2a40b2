"""The running runs of a campaign on Dask, seen from the controller (`--slots N`, `--cluster`): every so often it
asks each worker for its slots' running runs and their last seconds (cellab.cluster.worker.running_views, through
client.run, out of the task slots), says one line per running slot as the single-slot live view does, and keeps
them in the folder's running.json for `cellab status` (cellab.run.view.running_file_lines)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cellab.cluster.worker import running_views
from cellab.envvars import env_seconds
from cellab.records import write_json
from cellab.run.live import PLAIN_EVERY_S
from cellab.run.view import RUNNING_FILE, slot_line

WATCH_ENV = "CELLAB_SLOT_WATCH_S"  # how often the running slots are said (tests shorten it)


class SlotWatch:
    def __init__(self, client: Any, say: Callable[[str], None], root: Path, every_s: float | None = None):
        self.client, self.say, self.root = client, say, root
        self.every_s = env_seconds(WATCH_ENV, PLAIN_EVERY_S, 0.1) if every_s is None else every_s
        self._next = time.monotonic() + self.every_s  # the first runs have nothing to show yet

    def tick(self) -> None:
        """Once every `every_s`: the running slots' lines said, and kept for `cellab status`."""
        if time.monotonic() < self._next:
            return
        self._next = time.monotonic() + self.every_s
        views = self.look()
        write_json(self.root / RUNNING_FILE, {"at": time.time(), "slots": views})
        for view in views:
            self.say(slot_line(view))

    def look(self) -> list[dict[str, Any]]:
        """Every worker's running slots, by worker and slot; none from a worker that does not answer."""
        try:
            answers = self.client.run(running_views)
        except Exception:  # noqa: BLE001 - a worker leaving meanwhile: the next look asks the others again
            return []
        views = [view for answer in answers.values() if isinstance(answer, list) for view in answer
                 if isinstance(view, dict)]
        return sorted(views, key=lambda view: (str(view.get("worker")), str(view.get("slot"))))

    def close(self) -> None:
        (self.root / RUNNING_FILE).unlink(missing_ok=True)
