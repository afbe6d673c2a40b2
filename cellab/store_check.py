"""A campaign result folder's own files, read defensively: `report` and `run --resume` meet a corrupt
campaign.yaml, plan.json, results.sqlite or manifest.json as an InputError naming the file, and write nothing.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any, Protocol

from pydantic import ValidationError

from cellab.records import PlannedRun
from cellab.errors import InputError, from_validation_error
from cellab.inputs import JSON_MAX_BYTES, read_json, read_yaml

SQLITE_MAGIC = b"SQLite format 3\0"
RUN_COLUMNS = {"run_id", "idx", "repeat", "factors", "status", "error", "attempts", "started_at", "finished_at",
               "metrics"}
PLAN_MAX_BYTES = 256 << 20  # 100,000 runs of a few hundred bytes each


class _Folder(Protocol):
    root: Path
    db_path: Path


def check_folder(store: _Folder) -> None:
    """campaign.yaml parses as a mapping, plan.json as planned runs, results.sqlite as the runs database."""
    campaign = read_yaml(store.root / "campaign.yaml")
    if not isinstance(campaign, dict):
        raise InputError(store.root / "campaign.yaml", "", "the campaign copy is not a YAML mapping (name, factors, ...)")
    read_plan(store.root / "plan.json")
    check_db(store.db_path)


def read_plan(path: Path) -> list[PlannedRun]:
    data = read_json(path, PLAN_MAX_BYTES)
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError(path, "", "not a plan: expected a JSON list of planned runs")
    runs = []
    for index, row in enumerate(data):
        try:
            runs.append(PlannedRun(**row))
        except (ValidationError, TypeError) as exc:
            if isinstance(exc, ValidationError):
                raise from_validation_error(path, exc, f"[{index}]") from None
            raise InputError(path, f"[{index}]", "not a planned run") from None
    return runs


def check_db(path: Path) -> None:
    """A SQLite database (header, integrity) with the runs table; opened read-only."""
    if _head(path) != SQLITE_MAGIC:
        raise InputError(path, "", "not a SQLite database (its header is wrong): the folder was left as it is",
                         ["results.sqlite written by cellab run"])
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    except sqlite3.Error as exc:
        raise InputError(path, "", f"corrupt database ({exc}): the folder was left as it is") from None
    if problems != ["ok"]:
        raise InputError(path, "", f"corrupt database ({problems[0]}): the folder was left as it is")
    if not RUN_COLUMNS <= columns:
        missing = sorted(RUN_COLUMNS - columns)
        raise InputError(path, "runs", f"table runs lacks columns {', '.join(missing)}", sorted(RUN_COLUMNS))


def _head(path: Path) -> bytes:
    if not path.is_file():  # not a FIFO or a device: opening one could block
        raise InputError(path, "", "not a regular file", ["results.sqlite written by cellab run"])
    try:
        with path.open("rb") as fh:
            return fh.read(16)
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror}") from None


def db_json(path: Path, field: str, text: str | None) -> Any:
    """A JSON column of the database (None stays None)."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except (ValueError, TypeError, RecursionError):
        raise InputError(path, field, "not JSON: the database is damaged") from None


def read_manifest(path: Path) -> dict[str, Any]:
    data = read_json(path, JSON_MAX_BYTES)
    if not isinstance(data, dict):
        raise InputError(path, "", "a manifest is a JSON object (params, versions, hosts, clock offsets, seed)")
    return data
