"""Flags on a run whose numbers need a second look (docs/metrics.md "Flags"): kept in results.sqlite's `run_flags`
(one row per run and flag) and shown by the report beside the run.

- `host-saturated`: the controller host's CPU was at least HOST_SATURATED_PCT busy during the workload
  (`host_cpu_pct`): an emulated cell or a real stack on a saturated host loses time, and the run measures the host.
- `probe-partial`: the receiver probe's summary says `partial` (a flow incomplete or missing, read errors: a probe
  under emulation that fell behind), for the run or any of its UEs; its throughput can hold spikes that never
  crossed the radio.
- `stale-telemetry`: an agent's first RSRP reading of the run is STALE_JUMP_DB or more away from its second while
  the attenuation in front of it moved by less: the first report describes the level before the run (a phone
  caches its signal strength), not the run's; or the run's start waited in vain for its attenuation to read back
  and for each UE's signal sample taken after that (`first_sample.stale`, cellab.run.first_sample).

The flags are computed from the run's own metrics (its timeline included), so a folder written before they were
kept gets the same flags (cellab.results.store migrates older stores through `backfill`).
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from cellab.inputs import is_number

HOST_SATURATED_PCT = 95.0
STALE_JUMP_DB = 6.0
FLAGS = ("host-saturated", "probe-partial", "stale-telemetry")

TABLE_SQL = """
CREATE TABLE IF NOT EXISTS run_flags (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    flag TEXT NOT NULL CHECK (flag IN ('host-saturated', 'probe-partial', 'stale-telemetry')),
    detail TEXT NOT NULL,
    PRIMARY KEY (run_id, flag)
);
"""


def _points(timeline: dict[str, Any], name: str) -> list[tuple[float, float]]:
    entry = timeline.get(name)
    if not isinstance(entry, dict) or not isinstance(entry.get("t_s"), list) or not isinstance(entry.get("v"), list):
        return []
    pairs = [(float(t), float(v)) for t, v in zip(entry["t_s"], entry["v"], strict=False)
             if is_number(t) and is_number(v)]
    return sorted(pairs)


def _level_at(points: list[tuple[float, float]], t_s: float) -> float:
    """A setting's value at t_s: its last change at or before t_s (its first value before any change)."""
    value = points[0][1]
    for t, v in points:
        if t > t_s:
            break
        value = v
    return value


def _levels_at(points: list[tuple[float, float]], t_s: float, start_db: list[float]) -> list[float]:
    """A setting's possible values at t_s: before its line's first point, the levels the run began with (the
    values its start read back: a schedule's log begins at its first point), else its value then."""
    return start_db if t_s < points[0][0] and start_db else [_level_at(points, t_s)]


def _stale_telemetry(timeline: dict[str, Any], start_db: list[float]) -> list[str]:
    """Each agent whose first RSRP reading jumps to its second by more than the attenuation moved in between."""
    found = []
    atten_lines = [k for k in timeline if k == "attenuation_db" or k.startswith("attenuation_db.")]
    for key in sorted(k for k in timeline if k.startswith("rsrp_dbm.")):
        agent = key.split(".", 1)[1]
        rsrp = _points(timeline, key)
        if len(rsrp) < 2:
            continue
        (t0, first), (t1, second) = rsrp[0], rsrp[1]
        own = f"attenuation_db.{agent}"
        lines = [_points(timeline, name) for name in ([own] if own in timeline else atten_lines)]
        moved = [after - before for p in lines if p for before in _levels_at(p, t0, start_db)
                 for after in _levels_at(p, t1, start_db)] or [0.0]
        # RSRP falls as attenuation rises: a jump that the attenuation explains is rsrp change = -attenuation change
        unexplained = min(abs((second - first) + d) for d in moved)
        if unexplained >= STALE_JUMP_DB:
            found.append(f"{agent}: first RSRP {first:g} dBm at {t0:.1f} s, then {second:g} dBm at {t1:.1f} s "
                         f"({unexplained:.0f} dB the attenuation does not explain)")
    return found


def run_flags(metrics: dict[str, Any] | None, ue_metrics: dict[str, dict[str, Any]] | None = None
              ) -> dict[str, str]:
    """flag -> what it saw, for one finished run (its metrics and, with several UEs, each UE's)."""
    metrics = metrics if isinstance(metrics, dict) else {}
    flags: dict[str, str] = {}
    cpu = metrics.get("host_cpu_pct")
    if is_number(cpu) and cpu >= HOST_SATURATED_PCT:
        flags["host-saturated"] = f"host_cpu_pct {cpu:.1f} % (at least {HOST_SATURATED_PCT:g} %)"
    partial = (["run"] if metrics.get("probe_status") == "partial" else []) + [
        name for name, m in (ue_metrics or {}).items() if isinstance(m, dict) and m.get("probe_status") == "partial"]
    if partial:
        flags["probe-partial"] = "probe_status partial: " + ", ".join(dict.fromkeys(partial))
    timeline = metrics.get("timeline")
    first = metrics.get("first_sample")  # what the run's start read back and waited for (cellab.run.first_sample)
    first = first if isinstance(first, dict) else {}
    confirmed = first.get("confirmed_db")
    start_db = [float(v) for v in confirmed.values() if is_number(v)] if isinstance(confirmed, dict) else []
    stale = _stale_telemetry(timeline, start_db) if isinstance(timeline, dict) else []
    if isinstance(first.get("stale"), list):  # the start's wait ran out
        stale = [f"run start: {why}" for why in first["stale"] if isinstance(why, str)] + stale
    if stale:
        flags["stale-telemetry"] = "; ".join(stale)
    return flags


def write(db: sqlite3.Connection, run_id: str, flags: dict[str, str]) -> None:
    """Replace a run's flags (inside the caller's transaction)."""
    db.execute("DELETE FROM run_flags WHERE run_id = ?", (run_id,))
    db.executemany("INSERT INTO run_flags (run_id, flag, detail) VALUES (?, ?, ?)",
                   [(run_id, flag, detail) for flag, detail in flags.items()])


def backfill(db: sqlite3.Connection) -> None:
    """Flags for the finished runs of a store written before they were kept (inside the caller's transaction)."""
    per_ue: dict[str, dict[str, Any]] = {}
    for run_id, ue, text in db.execute("SELECT run_id, ue, metrics FROM ue_runs"):
        per_ue.setdefault(run_id, {})[ue] = _json(text)
    for run_id, text in db.execute("SELECT run_id, metrics FROM runs WHERE metrics IS NOT NULL").fetchall():
        write(db, run_id, run_flags(_json(text), per_ue.get(run_id)))


def _json(text: str | None) -> Any:
    try:
        return json.loads(text) if text else None
    except ValueError:
        return None  # a damaged cell flags nothing; the store's readers name it


def read_flags(db: sqlite3.Connection) -> dict[str, dict[str, str]]:
    """run_id -> flag -> detail ({} for a store without the table)."""
    if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_flags'").fetchone() is None:
        return {}
    out: dict[str, dict[str, str]] = {}
    for run_id, flag, detail in db.execute("SELECT run_id, flag, detail FROM run_flags ORDER BY rowid"):
        out.setdefault(run_id, {})[flag] = detail
    return out


__all__ = ["FLAGS", "HOST_SATURATED_PCT", "STALE_JUMP_DB", "TABLE_SQL", "backfill", "read_flags", "run_flags",
           "write"]
