"""A run's recovery figures as events on its timeline (issue 41): per fault and per UE it hit, when the fault
started and ended, the UE lost sync and its radio link, re-attached, got its first byte again (the user plane
restored) and its throughput back, a killed core daemon listening again, in seconds from the workload's start. The report draws them on one time axis."""

from __future__ import annotations

import math
from typing import Any

#: (a recovery row's figure, its event), in the order they happen
EVENT_OF = (("start_s", "fault_start"), ("end_s", "fault_end"), ("out_of_sync_s", "out_of_sync"), ("rlf_s", "rlf"),
            ("reattach_s", "reattach"), ("user_plane_restored_s", "user_plane_restored"),
            ("throughput_back_s", "throughput_back"), ("daemon_listening_s", "daemon_back"))
# the fault's own: every UE of the row shares them (its window; a killed core daemon listening again)
FAULT_WIDE = ("start_s", "end_s", "daemon_listening_s")


def fault_events(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The timeline events of recovery rows (cellab.faults.recovery, with each row's `other_ues`), sorted by time."""
    events = []
    for row in rows:
        for ue_row in [row, *(row.get("other_ues") or [])]:
            for figure, event in EVENT_OF:
                t = (row if figure in FAULT_WIDE else ue_row).get(figure)
                if isinstance(t, (int, float)) and not isinstance(t, bool) and math.isfinite(t):
                    events.append({"t_s": float(t), "event": event, "fault": row.get("fault"),
                                   "kind": row.get("kind"), "ue": ue_row.get("ue")})
    return sorted(events, key=lambda e: (e["t_s"], e["ue"] if isinstance(e["ue"], int) else -1))
