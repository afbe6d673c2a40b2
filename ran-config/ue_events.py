"""srsue's own RRC events, from its log (rendered with `rrc_level = info` and `rrc_hex_limit = 0`: RRC at info
dumps the session keys it derives in hex otherwise), on the wall clock: what the
srsran-zmq lab records of a radio link failure and the way back, in the shape of the virtual cell's events
(cellab.faults.spec: `t310_start`, `rlf`, `reest_start`, `reest_complete`, `connect_complete`), with `t_s`.

srsue writes each line with its local wall time, `2026-11-26T14:13:31.411743 [RRC    ] [I] ...`; the lines
read (srsRAN 4G 23.04, seen in this lab's runs):
- `Detected 1 out-of-sync from PHY. Trying to resync. Starting T310 timer 200 ms`
- `Timer T310 expired: Radio Link Failure`
- `SRB0 - Tx rrcConnectionReestablishmentRequest`, `SRB1 - Tx rrcConnectionReestablishmentComplete`
- `SRB1 - Tx rrcConnectionSetupComplete` (a new connection: the first attach, or after a failed re-establishment)
Timers run on the stack's clock: on a host where srsRAN runs at half speed T310's 200 ms take 400 ms of wall time.
"""

from __future__ import annotations

import re
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

from .logbound import SegmentTail

LINE_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) \[RRC\s*\] \[[IWE]\] (.*)$")
EVENTS = (
    ("t310_start", "Starting T310 timer"),
    ("rlf", "Timer T310 expired"),
    ("reest_start", "Tx rrcConnectionReestablishmentRequest"),
    ("reest_complete", "Tx rrcConnectionReestablishmentComplete"),
    ("connect_complete", "Tx rrcConnectionSetupComplete"),
)
#: the RRC state after each event (a UE ends a run connected unless its last event left it otherwise)
STATE_AFTER = {"t310_start": "connected", "rlf": "reestablishing", "reest_start": "reestablishing",
               "reest_complete": "connected", "connect_complete": "connected"}
MAX_LOG_BYTES = 256 * 1024 * 1024  # a run's share of srsue's log is far less; a runaway log is not read whole
KEEP_EVENTS = 10000  # a tail's memory: far more than a run's RRC events


def parse_rrc_line(line: str, ue: int) -> dict[str, Any] | None:
    """UE `ue`'s RRC event of one srsue log line ({event, ue, t_s}), or None for any other line."""
    if "[RRC" not in line or (match := LINE_RE.match(line)) is None:
        return None
    name = next((event for event, text in EVENTS if text in match.group(2)), None)
    if name is None:
        return None
    try:
        t_s = datetime.fromisoformat(match.group(1)).timestamp()  # srsue's local time, as this host's
    except ValueError:
        return None
    return {"event": name, "ue": ue, "t_s": t_s}


class RrcEventTail:
    """One srsue's RRC events as its log grows, read across its segments (cellab.ran.logbound.SegmentTail: each
    segment read is then pruned but the newest two), so no event is lost to the log's bound however long the
    srsue runs; the newest KEEP_EVENTS are kept. Polled by the lab's pruner and by whoever asks for events."""

    def __init__(self, log_path: Path, ue: int):
        self.ue, self._source = ue, SegmentTail(log_path)
        self._partial, self._events = b"", []
        self._lock = threading.Lock()

    def events(self, since_s: float = 0.0) -> list[dict[str, Any]]:
        """The events at or after `since_s` (wall clock, s), in log order, after reading what the log gained."""
        with self._lock:
            lines = (self._partial + self._source.read_new(MAX_LOG_BYTES)).split(b"\n")
            self._partial = lines.pop()
            new = [e for raw in lines if b"[RRC" in raw
                   and (e := parse_rrc_line(raw.decode(errors="replace"), self.ue)) is not None]
            self._events = (self._events + new)[-KEEP_EVENTS:]
            return [e for e in self._events if e["t_s"] >= since_s]


def rrc_state(events: list[dict[str, Any]], attached: bool) -> str:
    """The UE's RRC state after its events (`attached`: it connected before them, at configure)."""
    state = "connected" if attached else "idle"
    for event in events:
        state = STATE_AFTER.get(event["event"], state)
    return state
