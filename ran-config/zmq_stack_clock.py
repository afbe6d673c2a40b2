"""The rehearsal stack's clock folders (zmq_stack): the broker records the stack clock from each radio start, 8 B
per TTI a direction (0.7 GB a day each), bounded as every lab's log is (cellab.envvars.lab_log_max_bytes, N). A
start N records into clock/N; past N/2 on its downlink file the broker records into a new folder, clock/N-2,
clock/N-3, ... (its clock_start completes the previous folder's files on disk), and only the latest two folders
stay: each direction holds at most N on disk, its latest N/2 at least."""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import Protocol

KEEP_FOLDERS = 2


class ClockRecorder(Protocol):
    def clock_start(self, run_id: str, folder: Path) -> object: ...


class ClockFolders:
    """clock/N[-K] under `root`, oldest first in `folders`."""

    def __init__(self, root: Path):
        self.root = root
        self.folders: list[Path] = []
        self._start = 0
        self._segment = 1

    def begin(self, broker: ClockRecorder, start: int) -> None:
        """A radio start: its broker records into clock/START."""
        self._start, self._segment = start, 1
        self._record(broker, str(start))

    def bound(self, broker: ClockRecorder, max_bytes: int) -> None:
        """A new folder once the current one's downlink file passed max_bytes / 2 (0: no bound)."""
        if not max_bytes or not self.folders:
            return
        try:
            size = (self.folders[-1] / "stack-clock-dl.bin").stat().st_size
        except OSError:
            return
        if size > max_bytes // 2:
            self._segment += 1
            self._record(broker, f"{self._start}-{self._segment}")

    def _record(self, broker: ClockRecorder, name: str) -> None:
        folder = self.root / name
        folder.mkdir(parents=True, exist_ok=True)
        broker.clock_start(f"rehearsal-{name}", folder)
        self.folders.append(folder)
        for old in self.folders[:-KEEP_FOLDERS]:
            for path in old.glob("stack-clock-*.bin"):
                path.unlink(missing_ok=True)
            with suppress(OSError):  # a file of someone else's in it: the folder stays, the supervisor goes on
                old.rmdir()
        del self.folders[:-KEEP_FOLDERS]
