"""srsenb's own record of its S1-MME link, from its log (the eNB agent renders `[log] s1ap_level = info`), on the
wall clock: when it lost its MME and when an MME answered its S1 Setup again. The lines read (srsRAN 4G 23.04,
srsenb/src/stack/s1ap/s1ap.cc; each line stamped with the wall time in UTC,
`2026-11-28T22:10:31.411743 [S1AP   ] [I] ...`):
- `SCTP Association Shutdown. Association: N`: the MME's side of the association went away (srsenb then releases
  its UEs and starts a new S1 connection);
- `Proc "..." - Failed to initiate S1 connection. Attempting reconnection in N seconds`: a try refused (no MME
  listening yet); the next after srsenb's `s1_connect_timer`, counted on the stack's clock;
- `Proc "..." - S1Setup procedure completed successfully`: the MME answered S1 Setup: S1 is up.
The console prints the first two only, so the log is read, not the console."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

S1AP_LOG_LEVEL = "info"  # the level that shows the S1 Setup's outcome (warning and above hide it)
LINE_RE = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+) \[S1AP\s*\] \[[IWE]\] (.*)$")
EVENTS = (
    ("s1_lost", "SCTP Association Shutdown"),
    ("s1_connect_failed", "Failed to initiate S1 connection"),
    ("s1_setup", "S1Setup procedure completed successfully"),
)


def parse_s1_line(line: str) -> dict[str, Any] | None:
    """One S1 event of srsenb's log line ({"event", "t_s"}), or None for any other line."""
    match = LINE_RE.match(line.strip())
    if match is None:
        return None
    name = next((event for event, text in EVENTS if text in match.group(2)), None)
    if name is None:
        return None
    try:
        t_s = datetime.fromisoformat(match.group(1)).replace(tzinfo=UTC).timestamp()  # srslog stamps UTC
    except ValueError:
        return None
    return {"event": name, "t_s": t_s}
