"""Telemetry from the files a workload is writing: an agent tails them once a second and publishes the newest row of
each (ping's replies on a UE, the sender's TCP_INFO samples on the server), so the live view of `cellab run` and
`cellab status` show the running run's RTT from the run's telemetry, on every lab. Whole lines only; a file that is
not there yet is looked for again at the next tick."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

FEED_INTERVAL_S = 1.0
_PING_REPLY = re.compile(r"^\[(?P<t>\d+(?:\.\d+)?)\].*time=(?P<rtt>\d+(?:\.\d+)?) ms")


def ping_sample(line: str) -> dict[str, Any] | None:
    """A reply line of `ping -D` -> {t_s (the agent's clock), rtt_ms}."""
    match = _PING_REPLY.match(line)
    return {"t_s": float(match["t"]), "rtt_ms": float(match["rtt"])} if match else None


def flow_sample(line: str) -> dict[str, Any] | None:
    """A TCP_INFO sample of cellab-send's flow log -> {t_s, flow_id, rtt_ms, delivery_rate_bps}."""
    try:
        row = json.loads(line)
        return {"t_s": row["t_ns"] / 1e9, "flow_id": int(row["flow_id"]), "rtt_ms": row["rtt_us"] / 1000.0,
                "delivery_rate_bps": float(row["delivery_rate_bps"])}
    except (ValueError, KeyError, TypeError):
        return None


class FileFeed:
    """Tail `paths()` every `interval_s`; publish the newest row `parse` makes of each file's new whole lines."""

    def __init__(self, paths: Callable[[], list[Path]], parse: Callable[[str], dict[str, Any] | None],
                 publish: Callable[[str, dict], None], topic: str, interval_s: float = FEED_INTERVAL_S):
        self.paths, self.parse, self.publish, self.topic, self.interval_s = paths, parse, publish, topic, interval_s
        self._offsets: dict[Path, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"feed-{topic}", daemon=True)

    def start(self) -> FileFeed:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            for path in self.paths():
                row = self._newest(path)
                if row is not None:
                    row["source"] = f"{path.parent.name}/{path.name}"  # several UEs' flows on one server apart
                    try:
                        self.publish(self.topic, row)
                    except Exception:  # noqa: BLE001 - telemetry is best effort: never stop the workload
                        pass

    def _newest(self, path: Path) -> dict[str, Any] | None:
        try:
            with open(path, "rb") as handle:
                handle.seek(self._offsets.get(path, 0))
                data = handle.read()
        except OSError:
            return None
        whole = data[:data.rfind(b"\n") + 1]
        self._offsets[path] = self._offsets.get(path, 0) + len(whole)
        rows = [self.parse(line) for line in whole.decode(errors="replace").splitlines()]
        return next((row for row in reversed(rows) if row is not None), None)
