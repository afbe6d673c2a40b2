"""What the cluster did to a campaign besides running its runs, kept in the campaign folder for the report.

    <campaign>/cluster-events.json   {"events": [{"kind": ..., "at": unix seconds, ...}, ...]}

- `retired`: a bench worker left the pool (quarantine): `worker`, `bench`, `reason`, `run_id` (the run whose
  failure or health check retired it).
- `serialized`: a run was held back from a host because a run in flight there had another value of a
  host-scoped module parameter: `run_id`, `host`, `param` (module.param), `value`, `other` (the value in flight).

The controller is the only writer (read, append, write by rename: a reader sees the old list or the new one).
Reading checks every entry: a file that is not such a list, or entries of the wrong shape, are named as a
problem and left out, never a traceback in the report.
"""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

from cellab.safepath import write_file

EVENTS_FILE = "cluster-events.json"
KINDS = ("retired", "serialized")
FIELDS = {"retired": ("worker", "bench", "reason", "run_id"),
          "serialized": ("run_id", "host", "param", "value", "other")}
MAX_EVENTS = 10_000  # more than any campaign's runs: one event per held run at most
MAX_BYTES = 8 << 20
MAX_TEXT = 500


def add_event(root: Path, kind: str, **fields: Any) -> None:
    """Append one event (its fields as text, cut to MAX_TEXT) to the campaign folder's list."""
    events, _ = read_events(root)
    if len(events) >= MAX_EVENTS:
        return
    entry = {"kind": kind, "at": time.time()} | {k: str(fields.get(k))[:MAX_TEXT] for k in FIELDS[kind]}
    write_file(root, EVENTS_FILE, json.dumps({"events": [*events, entry]}, indent=1) + "\n")


def _checked(entry: Any) -> dict[str, Any] | None:
    if type(entry) is not dict or entry.get("kind") not in KINDS:
        return None
    at = entry.get("at")
    if type(at) not in (int, float) or not math.isfinite(at) or not 0 <= at < 1e11:
        return None
    wanted = FIELDS[entry["kind"]]
    if any(type(entry.get(k)) is not str or len(entry[k]) > MAX_TEXT for k in wanted):
        return None
    return {"kind": entry["kind"], "at": float(at)} | {k: entry[k] for k in wanted}


def read_events(root: Path) -> tuple[list[dict[str, Any]], str | None]:
    """(the well-formed events, oldest first; what was wrong with the file or its entries, or None)."""
    path = Path(root) / EVENTS_FILE
    try:
        if path.is_symlink() or (path.exists() and not path.is_file()):
            return [], f"{path}: not a regular file"
        if path.stat().st_size > MAX_BYTES:
            return [], f"{path}: larger than {MAX_BYTES >> 20} MiB"
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return [], None
    except (OSError, ValueError) as exc:
        return [], f"{path}: unreadable ({type(exc).__name__}: {exc})"
    raw = data.get("events") if type(data) is dict else None
    if type(raw) is not list:
        return [], f"{path}: not an object with a list of events"
    events = [e for e in map(_checked, raw[:MAX_EVENTS]) if e is not None]
    dropped = len(raw) - len(events)
    return events, (f"{path}: {dropped} entr{'y' if dropped == 1 else 'ies'} of the wrong shape left out"
                    if dropped else None)
