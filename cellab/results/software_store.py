"""Each run's software in the store: results.sqlite's `run_software` table, one row per run and provenance key.

    run_software(run_id, key, value)   key: a dotted path into the manifest's `provenance`, agents by role
                                       (`agents.server.software.modules.c2tcp.sha256`, `lab.running.cellab-cell.sha256`,
                                       `files./data/drive.csv`, ...); `software_sha256`: one digest of them all

Written when a run's record is saved (ResultStore.save_record), from its manifest; the keys that name where or
when (host names, paths, pids) are left out (cellab.results.provenance.comparable), so two runs of the same
software have the same rows and the same `software_sha256`. The table is created when first written: a store
written before it has no rows, and a reader finds none (`load` returns {}).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

from cellab.results.provenance import comparable

TABLE = """CREATE TABLE IF NOT EXISTS run_software (
    run_id TEXT NOT NULL,
    key TEXT NOT NULL,
    value TEXT,
    PRIMARY KEY (run_id, key)
)"""
DIGEST_KEY = "software_sha256"


def rows_of(provenance: dict[str, Any]) -> dict[str, str]:
    """The rows of one run: comparable(provenance) and its digest."""
    flat = comparable(provenance)
    digest = hashlib.sha256(json.dumps(flat, sort_keys=True).encode()).hexdigest()
    return flat | {DIGEST_KEY: digest}


def save(db_path: Path, run_id: str, manifest_path: Path) -> int:
    """A run's rows from its manifest (replacing any earlier attempt's); the number written (0: the run has no
    manifest or no provenance, e.g. it failed before the lab answered)."""
    try:
        manifest = json.loads(Path(manifest_path).read_text())
    except (OSError, ValueError):
        return 0
    provenance = manifest.get("provenance") if isinstance(manifest, dict) else None
    if not isinstance(provenance, dict):
        return 0
    rows = rows_of(provenance)
    with closing(sqlite3.connect(db_path, timeout=30)) as db, db:
        db.execute(TABLE)
        db.execute("DELETE FROM run_software WHERE run_id = ?", (run_id,))
        db.executemany("INSERT INTO run_software (run_id, key, value) VALUES (?, ?, ?)",
                       [(run_id, k, v) for k, v in rows.items()])
    return len(rows)


def load(db_path: Path) -> dict[str, dict[str, str]]:
    """run_id -> {key: value} ({} for a store without the table); read-only."""
    uri = f"file:{Path(db_path).resolve()}?mode=ro"
    with closing(sqlite3.connect(uri, uri=True)) as db:
        found = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_software'").fetchone()
        if not found:
            return {}
        out: dict[str, dict[str, str]] = {}
        for run_id, key, value in db.execute("SELECT run_id, key, value FROM run_software ORDER BY run_id, key"):
            out.setdefault(run_id, {})[key] = value
        return out


def summary(db_path: Path) -> dict[str, str]:
    """run_id -> its software_sha256: runs with the same digest ran the same software."""
    return {run_id: rows.get(DIGEST_KEY, "") for run_id, rows in load(db_path).items()}
