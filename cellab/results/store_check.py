"""A campaign result folder's own files, read defensively: `report` and `run --resume` meet a corrupt
campaign.yaml, plan.json, results.sqlite or manifest.json as an InputError naming the file, and write nothing.

`read_folder` reads a whole folder for the report, each file once: database columns of the wrong type, JSON
that does not parse or holds numbers beyond range, and a folder that contradicts itself (a status that does not
exist, runs the plan lacks, a manifest naming another run) are refused naming the file, run and column; a
run whose metrics alone are unreadable is kept and marked.
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
from contextlib import closing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from pydantic import ValidationError

from cellab.records import PlannedRun
from cellab.errors import CellabError, InputError, from_validation_error
from cellab.inputs import INT64_MAX, JSON_MAX_BYTES, MAX_DEPTH, MAX_FLOAT, read_json, read_yaml

SQLITE_MAGIC = b"SQLite format 3\0"
RUN_COLUMNS = {"run_id", "idx", "repeat", "factors", "status", "error", "attempts", "started_at", "finished_at",
               "metrics"}
PLAN_MAX_BYTES = 256 << 20  # 100,000 runs of a few hundred bytes each
#: results.sqlite's `PRAGMA user_version` this cellab writes and reads up to (cellab.results.store says what each
#: version holds): 0 before versions were recorded, 2 with the comparisons table, 3 with run_flags
STORE_SCHEMA_VERSION = 3


class _Folder(Protocol):
    root: Path
    db_path: Path


def check_folder(store: _Folder) -> None:
    """The folder as the report reads it (read_folder): campaign.yaml a mapping, plan.json planned runs,
    results.sqlite the runs database, and all of them and the manifests agreeing. `run --resume` checked only
    that each parsed, then ran the lab on a folder whose statuses, runs or manifests contradict each other."""
    read_folder(store.root)


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
            check_schema_version(path, db)
            problems = [row[0] for row in db.execute("PRAGMA quick_check")]
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
    except sqlite3.Error as exc:
        raise InputError(path, "", f"corrupt database ({exc}): the folder was left as it is") from None
    if problems != ["ok"]:
        raise InputError(path, "", f"corrupt database ({problems[0]}): the folder was left as it is")
    if not RUN_COLUMNS <= columns:
        missing = sorted(RUN_COLUMNS - columns)
        raise InputError(path, "runs", f"table runs lacks columns {', '.join(missing)}", sorted(RUN_COLUMNS))


def store_schema_version(db: sqlite3.Connection) -> int:
    (version,) = db.execute("PRAGMA user_version").fetchone()
    return int(version)


def check_schema_version(path: Path, db: sqlite3.Connection) -> None:
    """A store from a newer cellab (a schema this one does not know) is refused, naming the file; nothing in it
    is changed. An older one is fine: it is read as it is and brought up to date when the store writes to it."""
    version = store_schema_version(db)
    if version > STORE_SCHEMA_VERSION:
        raise InputError(path, "user_version", f"store schema {version} was written by a newer cellab; this one "
                                               f"reads schema {STORE_SCHEMA_VERSION} and older: open it with that "
                                               "cellab (the folder was left as it is)",
                         [f"0..{STORE_SCHEMA_VERSION}"])


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


# --- a whole result folder, as the report reads it ---------------------------------------------------
# A run id names a folder (runs/<run_id>) and figure files: one path component of plain characters.
RUN_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")
STATUSES = ("pending", "running", "ok", "failed", "aborted", "invalid")  # cellab.results.store's; the report must not import it
UE_COLUMNS = {"run_id", "ue", "slot", "metrics"}
CAMPAIGN_MAPPINGS = ("factors", "fixed", "workload", "schedules", "timeouts", "retry", "order")


@dataclass
class RunRow:
    """One run as results.sqlite holds it, checked against the plan. `unreadable` says why its metrics cannot
    be used (naming the file, run and column); the run is then shown, without metrics."""

    run_id: str
    idx: int
    repeat: int
    status: str
    error: str | None
    factors: dict[str, Any]
    params: dict[str, Any]
    metrics: dict[str, Any] | None
    unreadable: str | None = None


@dataclass
class UERow:
    run_id: str
    ue: str
    slot: int
    metrics: dict[str, Any] | None
    unreadable: str | None = None


@dataclass
class Folder:
    """Everything a report needs from a result folder, each file read once."""

    root: Path
    db_path: Path
    campaign: dict[str, Any]
    plan: list[PlannedRun]
    runs: list[RunRow] = field(default_factory=list)
    ue_runs: list[UERow] = field(default_factory=list)


def read_folder(root: Path) -> Folder:
    """A result folder whose files agree with each other. Corrupt files, identity columns of the wrong type, a
    status that does not exist, runs the plan lacks (or the database lacks), a manifest naming another run:
    an InputError naming the file, run and column. A run whose metrics are unreadable is kept, marked."""
    root = Path(root)
    for needed in ("campaign.yaml", "plan.json", "results.sqlite"):
        if not (root / needed).is_file():
            raise CellabError(f"{root}: not a campaign result folder ({needed} missing)")
    db_path = root / "results.sqlite"
    campaign = _campaign(root / "campaign.yaml")
    plan = read_plan(root / "plan.json")
    planned = _plan_by_id(root / "plan.json", plan)
    check_db(db_path)
    folder = Folder(root, db_path, campaign, plan)
    try:
        with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)) as db:
            db.text_factory = bytes  # text that is not UTF-8 is named below, not a decoding traceback
            folder.runs = [_run_row(db_path, row, planned) for row in db.execute(
                "SELECT rowid, run_id, idx, repeat, status, error, factors, metrics FROM runs ORDER BY rowid")]
            folder.ue_runs = _ue_rows(db_path, db)
    except sqlite3.Error as exc:
        raise InputError(db_path, "", f"cannot read the database ({exc}): the folder was left as it is") from None
    _agree(folder, planned)
    folder.runs.sort(key=lambda r: (r.idx, r.run_id))
    return folder


def _campaign(path: Path) -> dict[str, Any]:
    campaign = read_yaml(path)
    if not isinstance(campaign, dict):
        raise InputError(path, "", "the campaign copy is not a YAML mapping (name, factors, ...)")
    for key in CAMPAIGN_MAPPINGS:
        if campaign.get(key) is not None and not isinstance(campaign[key], dict):
            raise InputError(path, key, f"a mapping, not {type(campaign[key]).__name__}")
    for key in ("name", "lab", "description"):
        if campaign.get(key) is not None and not isinstance(campaign[key], str):
            raise InputError(path, key, f"text, not {type(campaign[key]).__name__}")
    for name, levels in (campaign.get("factors") or {}).items():
        if not isinstance(name, str) or not isinstance(levels, list | dict):
            raise InputError(path, f"factors.{name}", "a factor is a list of values or a mapping of level names")
    return campaign


def _plan_by_id(path: Path, plan: list[PlannedRun]) -> dict[str, PlannedRun]:
    planned: dict[str, PlannedRun] = {}
    for i, run in enumerate(plan):
        if not RUN_ID_PATTERN.fullmatch(run.run_id):
            raise InputError(path, f"[{i}].run_id", f"{run.run_id!r} is not a run id", [RUN_ID_PATTERN.pattern])
        if run.run_id in planned:
            raise InputError(path, f"[{i}].run_id", f"run {run.run_id} is planned twice")
        planned[run.run_id] = run
    return planned


def _text(db_path: Path, field: str, value: Any, *, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, bytes):
        raise InputError(db_path, field, f"{_show(value)} is not text: the database is damaged")
    try:
        return value.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(db_path, field, f"not UTF-8 text (byte offset {exc.start}): the database is damaged") from None


def _show(value: Any) -> str:
    """A database value for a message (text as text, not as the bytes it is read as)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", "backslashreplace")
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _integer(db_path: Path, field: str, value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InputError(db_path, field, f"{_show(value)} is not an integer: the database is damaged")
    return value


def _json_column(db_path: Path, field: str, value: Any) -> Any:
    """A JSON column (NULL is None): UTF-8, no NaN or Infinity, every number finite and within cellab.inputs'
    range (±MAX_FLOAT, 64-bit integers), nesting within MAX_DEPTH."""
    if value is None:
        return None
    if not isinstance(value, bytes):  # an INTEGER or REAL where JSON text belongs
        raise InputError(db_path, field, f"{_show(value)} is not JSON text: the database is damaged")
    try:
        data = json.loads(value.decode("utf-8"), parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise InputError(db_path, field, f"not UTF-8 text (byte offset {exc.start}): the database is damaged") from None
    except json.JSONDecodeError as exc:
        raise InputError(db_path, field, f"not JSON ({exc.msg}, line {exc.lineno}): the database is damaged") from None
    except (ValueError, RecursionError) as exc:
        raise InputError(db_path, field, f"not JSON ({exc}): the database is damaged") from None
    problem = _bad_number(data)
    if problem:
        where, text = problem
        raise InputError(db_path, f"{field}{where}", f"{text}: the database is damaged", ["finite numbers"])
    return data


def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


def _bad_number(value: Any) -> tuple[str, str] | None:
    """(where, what) of the first number out of range or nesting too deep; lists of floats (the series, most
    of a run's metrics) are checked in one numpy pass."""
    stack = [(value, "", 0)]
    while stack:
        item, where, depth = stack.pop()
        if depth > MAX_DEPTH:
            return where, f"nested deeper than {MAX_DEPTH} levels"
        kind = type(item)
        if kind is float:
            if not abs(item) <= MAX_FLOAT:
                return where, f"{item:g} is beyond range"
        elif kind is int:
            if not -INT64_MAX - 1 <= item <= INT64_MAX:
                return where, f"{item} does not fit in 64 bits"
        elif kind is list:
            if item and all(type(x) is float for x in item):
                values = np.fromiter(item, float, len(item))
                bad = np.flatnonzero(~(np.abs(values) <= MAX_FLOAT))
                if bad.size:
                    return f"{where}[{bad[0]}]", f"{values[bad[0]]:g} is beyond range"
            else:
                stack.extend((x, f"{where}[{i}]", depth + 1) for i, x in enumerate(item) if type(x) not in (str, bool))
        elif kind is dict:
            stack.extend((x, f"{where}.{k}", depth + 1) for k, x in item.items() if type(x) not in (str, bool))
    return None


def _run_row(db_path: Path, row: tuple, planned: dict[str, PlannedRun]) -> RunRow:
    rowid, run_id, idx, repeat, status, error, factors, metrics = row
    run_id = _text(db_path, f"runs row {rowid}: run_id", run_id)
    if not RUN_ID_PATTERN.fullmatch(run_id):
        raise InputError(db_path, f"runs row {rowid}: run_id", f"{_show(run_id)} is not a run id")
    where = f"runs.{run_id}"
    plan = planned.get(run_id)
    if plan is None:
        raise InputError(db_path, where, f"run {run_id} is in the database but not in plan.json: the folder "
                                         "contradicts itself")
    idx, repeat = _integer(db_path, f"{where}.idx", idx), _integer(db_path, f"{where}.repeat", repeat)
    status = _text(db_path, f"{where}.status", status)
    if status not in STATUSES:
        raise InputError(db_path, f"{where}.status", f"{_show(status)} is no run status", STATUSES)
    factors = _json_column(db_path, f"{where}.factors", factors)
    if factors != plan.factors or (idx, repeat) != (plan.index, plan.repeat):
        raise InputError(db_path, where, "its index, repeat or factors differ from plan.json's: the folder "
                                         "contradicts itself")
    try:
        error = _text(db_path, f"{where}.error", error, nullable=True)
    except InputError as exc:
        error = exc.message
    out = RunRow(run_id, idx, repeat, status, error, plan.factors, plan.params, None)
    try:
        out.metrics = _json_column(db_path, f"{where}.metrics", metrics)
        if out.metrics is not None and not isinstance(out.metrics, dict):
            raise InputError(db_path, f"{where}.metrics", f"a JSON {type(out.metrics).__name__}, not an object")
    except InputError as exc:
        out.metrics, out.unreadable = None, str(exc)
    return out


def _ue_rows(db_path: Path, db: sqlite3.Connection) -> list[UERow]:
    columns = {row[1].decode() if isinstance(row[1], bytes) else row[1]
               for row in db.execute("PRAGMA table_info(ue_runs)")}
    if not columns:
        return []  # a folder written before per-UE rows existed
    if not UE_COLUMNS <= columns:
        raise InputError(db_path, "ue_runs", f"table ue_runs lacks columns {', '.join(sorted(UE_COLUMNS - columns))}")
    out = []
    for rowid, run_id, ue, slot, metrics in db.execute(
            "SELECT rowid, run_id, ue, slot, metrics FROM ue_runs ORDER BY run_id, slot, rowid"):
        run_id = _text(db_path, f"ue_runs row {rowid}: run_id", run_id)
        where = f"ue_runs.{run_id}"
        row = UERow(run_id, _text(db_path, f"{where}: ue", ue), _integer(db_path, f"{where}.slot", slot), None)
        try:
            row.metrics = _json_column(db_path, f"{where}.{row.ue}.metrics", metrics)
            if row.metrics is not None and not isinstance(row.metrics, dict):
                raise InputError(db_path, f"{where}.{row.ue}.metrics", "not a JSON object")
        except InputError as exc:
            row.metrics, row.unreadable = None, str(exc)
        out.append(row)
    return out


def _agree(folder: Folder, planned: dict[str, PlannedRun]) -> None:
    """The database, the plan and each run's manifest describe the same runs."""
    seen: set[str] = set()
    for run in folder.runs:
        if run.run_id in seen:
            raise InputError(folder.db_path, f"runs.{run.run_id}", "the run appears twice in the database")
        seen.add(run.run_id)
    missing = [run_id for run_id in planned if run_id not in seen]
    if missing:
        raise InputError(folder.db_path, "runs", f"plan.json plans {len(missing)} run(s) the database lacks "
                                                 f"({', '.join(missing[:5])}): the folder contradicts itself")
    for ue in folder.ue_runs:
        if ue.run_id not in seen:
            raise InputError(folder.db_path, f"ue_runs.{ue.run_id}", "a UE row of a run the database lacks")
    for run in folder.runs:
        path = folder.root / "runs" / run.run_id / "manifest.json"
        if not os.path.lexists(path):
            continue
        named = read_manifest(path).get("run_id", run.run_id)
        if named != run.run_id:
            raise InputError(path, "run_id", f"the manifest names run {named!r}, its folder is run {run.run_id}: the "
                                             "folder contradicts itself")
