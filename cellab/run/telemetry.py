"""Telemetry recorded into the run folder: every agent's samples (the bus's PUB/SUB stream) and the
embedded cell's own (its PUB socket), one JSON line each, on the controller's clock.

    <run>/telemetry/<agent>.jsonl     {"t_s": controller time, "topic": ..., <the sample's fields>}
    <run>/telemetry/cell.jsonl        the virtual cell's summaries (per UE, every 100 ms)

An agent's sample is filed by its own time: the moment it describes (`t_s` in the sample, e.g. srsenb's
report timestamp) or else when the agent sent it (`agent_time_s`), both on the agent's clock, which the run's
measured clock offset of that agent turns into the controller's. The cell stamps its TTI; the lab's clock mark
ties a TTI to the controller's clock. Only samples whose time falls inside the run's window are kept: from
`start` to `close_window` (the end of the workload), received until `stop` (the caller waits the lab's
telemetry lag in between, so a late report still reaches its own run and never the next one's).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path
from typing import IO, Any

import zmq

_SAFE_NAME = re.compile(r"[^A-Za-z0-9_.-]")
CELL_TOPIC = b"cell"


class TelemetryRecorder:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._dir: Path | None = None
        self._offsets_s: dict[str, float] = {}
        self._files: dict[str, IO[str]] = {}
        self._cell: _CellSubscriber | None = None
        self._from_s: float | None = None
        self._until_s: float | None = None
        self.samples = 0
        self.dropped = 0  # samples whose own time fell outside the run's window

    def start(self, run_dir: Path, offsets_s: dict[str, float], cell_pub: str | None = None,
              cell_mark: dict[str, float] | None = None) -> None:
        """Record from now into run_dir/telemetry (offsets: agent -> its clock minus the controller's)."""
        self.stop()
        folder = run_dir / "telemetry"
        folder.mkdir(parents=True, exist_ok=True)
        with self._lock:
            self._dir, self._offsets_s, self.samples, self.dropped = folder, dict(offsets_s), 0, 0
            self._from_s, self._until_s = time.time(), None
        if cell_pub and cell_mark:
            self._cell = _CellSubscriber(cell_pub, cell_mark, self._write)
            self._cell.start()

    def close_window(self, until_s: float) -> None:
        """The run's window ends here (controller clock): later samples are not the run's."""
        with self._lock:
            self._until_s = until_s

    def on_sample(self, agent: str, topic: str, data: dict[str, Any]) -> None:
        """The controller's telemetry callback (its telemetry thread)."""
        own = data.get("t_s")
        agent_time = own if _is_time(own) else data.get("agent_time_s")
        with self._lock:
            if self._dir is None:
                return
            offset = self._offsets_s.get(agent, 0.0)
        t_s = float(agent_time) - offset if _is_time(agent_time) else None
        self._write(agent, {**data, "t_s": t_s, "topic": topic})

    def _write(self, stream: str, row: dict[str, Any]) -> None:
        with self._lock:
            if self._dir is None:
                return
            t_s = row.get("t_s")
            if _is_time(t_s) and (t_s < (self._from_s or 0.0) or (self._until_s is not None and t_s > self._until_s)):
                self.dropped += 1
                return
            handle = self._files.get(stream)
            if handle is None:
                handle = self._files[stream] = open(self._dir / f"{_SAFE_NAME.sub('_', stream)}.jsonl", "a")
            handle.write(json.dumps(row, default=str) + "\n")
            handle.flush()  # whole lines on disk as they come: the live view and `cellab status` read the tail
            self.samples += 1

    def stop(self) -> None:
        if self._cell is not None:
            self._cell.stop()
            self._cell = None
        with self._lock:
            for handle in self._files.values():
                handle.close()
            self._files, self._dir = {}, None


def _is_time(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 1e9  # a Unix time


def sample_time_s(sample: dict[str, Any], tti: float, mark: dict[str, float]) -> float:
    """A cell summary's wall time: its `wall_ns` (the cell's own clock; on a recorded stack clock a TTI is not a
    millisecond), else one TTI per millisecond from the mark read before the workload."""
    wall_ns = sample.get("wall_ns")
    return wall_ns / 1e9 if _is_time(wall_ns) else mark["t_s"] + (tti - mark["tti"]) / 1000.0


class _CellSubscriber(threading.Thread):
    """The virtual cell's PUB socket: two frames, `cell` and a JSON summary with the TTI it was taken at."""

    def __init__(self, endpoint: str, mark: dict[str, float], write: Any):
        super().__init__(name="cell-telemetry", daemon=True)
        self.endpoint, self.mark, self.write = endpoint, mark, write
        self._stopping = threading.Event()

    def run(self) -> None:
        ctx = zmq.Context.instance()
        sock = ctx.socket(zmq.SUB)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.SUBSCRIBE, CELL_TOPIC)
        sock.connect(self.endpoint)
        poller = zmq.Poller()
        poller.register(sock, zmq.POLLIN)
        try:
            while not self._stopping.is_set():
                if not poller.poll(100):
                    continue
                frames = sock.recv_multipart()
                try:
                    sample = json.loads(frames[-1])
                    tti = float(sample["tti"])
                except (ValueError, KeyError, TypeError):
                    continue  # not a summary: the cell's format is the emulator room's; skip what we cannot place
                t_s = sample_time_s(sample, tti, self.mark)
                self.write("cell", {"t_s": t_s, "topic": "cell.summary", **sample})
        finally:
            sock.close()

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=2)


def host_cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of every core of this host, from /proc/stat."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return 0, 0
    return sum(fields) - fields[3] - fields[4], sum(fields)


def host_busy_pct(before: tuple[int, int], after: tuple[int, int]) -> float | None:
    """The host's CPU use between two readings, % of all its cores (None when unreadable)."""
    total = after[1] - before[1]
    return round(100.0 * (after[0] - before[0]) / total, 1) if total > 0 else None
