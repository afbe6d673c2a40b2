"""The result store: one folder per campaign, one row per run in results.sqlite, atomic files.

    runs/out/<campaign>-<stamp>/
        campaign.yaml   as run (the file's own text)
        plan.json       every planned run: index, run_id, repeat, factors, params
        results.sqlite  runs(run_id, idx, repeat, factors, status, error, attempts, started_at, finished_at, metrics,
                             placement: where it ran, {host, lab, instance, worker, slot})
                        ue_runs(run_id, ue, slot, metrics): one row per run and UE of a finished run
                        run_software(run_id, key, value): each run's provenance (cellab.results.software_store)
                        comparisons(kind, name, factor, level, baseline, stratum, metric, n_level, n_base,
                                    median_level, median_base, ratio, low, high, p_value, note, interval, test):
                                    one row per comparison and metric (cellab.results.comparisons)
                        run_flags(run_id, flag, detail): a finished run's flags (cellab.results.flags)
        repeats.json    with a stopping rule (`until`): per cell, how many runs it took and why it stopped
        runs/<run_id>/  manifest.json, metrics.json, the agents' artifacts; ues/<ue>/ each UE's, with its metrics.json

A run row goes pending → running → ok | failed | aborted. A row left `running` by a killed controller
is redone on --resume; ok and failed rows are finished and never repeated.

The database's `PRAGMA user_version` is its schema version (STORE_SCHEMA_VERSION): 0, a store written before
versions were recorded, has runs and ue_runs; 2 adds comparisons; 3 adds run_flags. An older store opens as it is
(readers find no comparisons, and the report computes the flags from the metrics) and is brought up to date the
first time the store writes to it (its finished runs' flags filled in from their stored metrics); a newer one is refused, naming
the file (cellab.results.store_check.check_db), and nothing in it is changed.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from contextlib import closing
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from cellab.errors import CellabError
from cellab.inputs import name_problem
from cellab.records import PlannedRun, write_atomic, write_json
from cellab.results import flags
from cellab.results.store_check import (STORE_SCHEMA_VERSION, check_folder, check_schema_version, db_json,
                                        read_manifest, read_plan, store_schema_version)

FLAGS_SINCE_VERSION = 3  # stores before it have no run_flags: the migration fills them in

FINISHED = ("ok", "failed", "invalid")  # invalid: the lab lost real time; its numbers are of the host, not the model
STATUSES = ("pending", "running", "ok", "failed", "aborted", "invalid")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY,
    idx INTEGER NOT NULL,
    repeat INTEGER NOT NULL,
    factors TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('pending', 'running', 'ok', 'failed', 'aborted', 'invalid')),
    error TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    started_at REAL,
    finished_at REAL,
    metrics TEXT,
    placement TEXT
);
CREATE TABLE IF NOT EXISTS ue_runs (
    run_id TEXT NOT NULL REFERENCES runs(run_id),
    ue TEXT NOT NULL,
    slot INTEGER NOT NULL,
    metrics TEXT,
    PRIMARY KEY (run_id, ue)
);
CREATE TABLE IF NOT EXISTS comparisons (
    kind TEXT NOT NULL CHECK (kind IN ('factor', 'named')),
    name TEXT NOT NULL,
    factor TEXT NOT NULL,
    level TEXT NOT NULL,
    baseline TEXT NOT NULL,
    stratum TEXT NOT NULL,
    metric TEXT NOT NULL,
    n_level INTEGER NOT NULL,
    n_base INTEGER NOT NULL,
    median_level REAL,
    median_base REAL,
    ratio REAL,
    low REAL,
    high REAL,
    p_value REAL,
    note TEXT NOT NULL,
    interval TEXT NOT NULL,
    test TEXT NOT NULL,
    PRIMARY KEY (kind, name, stratum, metric)
);
""" + flags.TABLE_SQL


class ResultStore:
    def __init__(self, root: Path):
        self.root = Path(root)
        self.db_path = self.root / "results.sqlite"
        self._schema_checked = False
        self.retry_failed = False  # `cellab run --resume DIR --retry-failed`: failed runs are pending again

    # --- creation and opening -------------------------------------------------------------
    @classmethod
    def create(cls, out_dir: Path, name: str, campaign_text: str, runs: list[PlannedRun]) -> ResultStore:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        root = Path(out_dir) / f"{name}-{stamp}"
        suffix = 1
        while root.exists():
            suffix += 1
            root = Path(out_dir) / f"{name}-{stamp}-{suffix}"
        root.mkdir(parents=True)
        store = cls(root)
        write_atomic(root / "campaign.yaml", campaign_text)
        write_json(root / "plan.json", [r.model_dump() for r in runs])
        store._create_db(runs)
        return store

    def _create_db(self, runs: list[PlannedRun]) -> None:
        """The database with its schema and every planned run, built in memory and written whole: a reader
        (the report, a watcher) or a crash never finds a results.sqlite without its table."""
        with closing(sqlite3.connect(":memory:")) as db:
            db.executescript(_SCHEMA)
            db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")
            with db:
                db.executemany(
                    "INSERT INTO runs (run_id, idx, repeat, factors, status) VALUES (?, ?, ?, ?, 'pending')",
                    [(r.run_id, r.index, r.repeat, json.dumps(r.factors, sort_keys=True)) for r in runs],
                )
            write_atomic(self.db_path, db.serialize())

    @classmethod
    def open(cls, root: Path) -> ResultStore:
        """A campaign folder whose campaign copy, plan and database are sound; a corrupt one is an InputError
        naming the file, and nothing in the folder is written."""
        root = Path(root)
        for needed in ("campaign.yaml", "plan.json", "results.sqlite"):
            if not (root / needed).is_file():
                raise CellabError(f"{root}: not a campaign result folder ({needed} missing)")
        store = cls(root)
        check_folder(store)
        return store

    def _db(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.db_path, timeout=30, isolation_level=None)
        db.execute("PRAGMA synchronous=FULL")
        if not self._schema_checked:  # once per store object: a controller storing runs fast pays it once
            try:
                check_schema_version(self.db_path, db)  # a newer cellab's store: refused before anything changes
            except BaseException:
                db.close()
                raise
            before = store_schema_version(db)
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)
            columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
            if "placement" not in columns:  # a folder written before runs were placed on workers
                db.execute("ALTER TABLE runs ADD COLUMN placement TEXT")
            (table_sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'runs'").fetchone()
            if "'invalid'" not in table_sql:  # written before runs could be invalid: the CHECK is part of the table
                _widen_status_check(db)
            if before < FLAGS_SINCE_VERSION:
                with _Tx(db, close=False) as tx:
                    flags.backfill(tx)
            db.execute(f"PRAGMA user_version = {STORE_SCHEMA_VERSION}")  # every table above is there now
            self._schema_checked = True
        return _Tx(db)

    def settle(self) -> None:
        """Back to a rollback journal once a campaign's runs are stored. WAL lets readers (a report, a watcher)
        read while runs are written, but a read-only reader of a WAL database leaves empty -wal and -shm files
        beside it (SQLite keeps them when the last connection is read-only): a finished folder stays as written."""
        try:
            with closing(sqlite3.connect(self.db_path, timeout=1)) as db:
                db.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.Error:
            pass  # another process has it open (a report reading it): it stays WAL, nothing is lost

    # --- reading ------------------------------------------------------------------------
    def campaign_path(self) -> Path:
        return self.root / "campaign.yaml"

    def planned(self) -> list[PlannedRun]:
        return read_plan(self.root / "plan.json")

    def manifest(self, run_id: str) -> dict[str, Any]:
        """A run's manifest.json (InputError naming the file when it is not a JSON object)."""
        return read_manifest(self.run_dir(run_id) / "manifest.json")

    def run_dir(self, run_id: str) -> Path:
        return self.root / "runs" / run_id

    def rows(self) -> list[dict[str, Any]]:
        with closing(sqlite3.connect(self.db_path)) as db:
            db.row_factory = sqlite3.Row
            out = []
            for row in db.execute("SELECT * FROM runs ORDER BY idx"):
                item = dict(row)
                item["factors"] = db_json(self.db_path, f"runs.{item['run_id']}.factors", item["factors"])
                item["metrics"] = db_json(self.db_path, f"runs.{item['run_id']}.metrics", item["metrics"])
                out.append(item)
            return out

    def ue_rows(self) -> list[dict[str, Any]]:
        """One row per run and UE (runs that finished ok), with the run's factors."""
        with closing(sqlite3.connect(self.db_path)) as db:
            db.row_factory = sqlite3.Row
            db.executescript(_SCHEMA)  # a folder written before per-UE rows existed has no such table
            out = []
            for row in db.execute("SELECT u.run_id, u.ue, u.slot, u.metrics, r.factors, r.idx FROM ue_runs u "
                                  "JOIN runs r USING (run_id) ORDER BY r.idx, u.slot"):
                item = dict(row)
                item["factors"] = json.loads(item["factors"])
                item["metrics"] = json.loads(item["metrics"]) if item["metrics"] else None
                out.append(item)
            return out

    def status(self, run_id: str) -> str:
        with closing(sqlite3.connect(self.db_path)) as db:
            row = db.execute("SELECT status FROM runs WHERE run_id = ?", (run_id,)).fetchone()
        if row is None:
            raise CellabError(f"{self.root}: run {run_id} is not in the plan")
        return row[0]

    def pending(self) -> Iterator[PlannedRun]:
        """Planned runs not finished yet, in plan order (a `running` leftover of a crash is redone; a failed one too
        with `retry_failed`)."""
        done = tuple(s for s in FINISHED if not (self.retry_failed and s == "failed"))
        finished = {r["run_id"] for r in self.rows() if r["status"] in done}
        return (r for r in self.planned() if r.run_id not in finished)

    # --- state changes ----------------------------------------------------------------------
    def start(self, run: PlannedRun) -> Path:
        """Mark running and give the run a clean folder (a crashed attempt's partial files go)."""
        folder = self.start_folder(run)
        self.start_attempt(run)
        return folder

    def start_attempt(self, run: PlannedRun) -> None:
        """Mark running, one more attempt (the folder is the caller's: a worker's run arrives whole)."""
        with self._db() as db:
            db.execute(
                "UPDATE runs SET status='running', attempts=attempts+1, started_at=?, finished_at=NULL, error=NULL "
                "WHERE run_id=?",
                (time.time(), run.run_id),
            )

    def finish(self, run: PlannedRun, status: str, *, metrics: dict[str, Any] | None = None,
               error: str | None = None, ue_metrics: dict[str, dict[str, Any]] | None = None,
               new_attempts: int = 0, placement: dict[str, Any] | None = None, started_at: float | None = None,
               finished_at: float | None = None) -> None:
        """ue_metrics: UE name -> its metrics, in the run's UE order (written to ues/<name>/metrics.json).
        new_attempts: attempts to add (a record from a worker arrives without a `start`); one transaction."""
        if status not in STATUSES[2:]:
            raise ValueError(f"finish status {status!r}")
        for name in ue_metrics or {}:  # each UE's metrics go to ues/<name>/: a name is one folder name, no more
            problem = name_problem(name)
            if problem:
                raise CellabError(f"run {run.run_id}: the UE name {str(name)[:60]!r} {problem}; nothing of the run "
                                  "is stored outside its folder (allowed: letters, digits, '_', '.', '-')")
        if metrics is not None:
            write_json(self.run_dir(run.run_id) / "metrics.json", metrics)
        for name, values in (ue_metrics or {}).items():
            write_json(self.run_dir(run.run_id) / "ues" / name / "metrics.json", values)
        with self._db() as db:
            db.execute("DELETE FROM ue_runs WHERE run_id=?", (run.run_id,))
            db.executemany("INSERT INTO ue_runs (run_id, ue, slot, metrics) VALUES (?, ?, ?, ?)",
                           [(run.run_id, name, slot, json.dumps(values, sort_keys=True))
                            for slot, (name, values) in enumerate((ue_metrics or {}).items())])
            db.execute(
                "UPDATE runs SET status=?, error=?, finished_at=?, metrics=?, attempts=attempts+?, "
                "placement=COALESCE(?, placement), started_at=COALESCE(?, started_at) WHERE run_id=?",
                (status, error, finished_at or time.time(),
                 json.dumps(metrics, sort_keys=True) if metrics is not None else None, new_attempts,
                 json.dumps(placement, sort_keys=True) if placement is not None else None, started_at, run.run_id),
            )
            flags.write(db, run.run_id, flags.run_flags(metrics, ue_metrics))

    def save_record(self, run: PlannedRun, record: Any, started: bool = True) -> None:
        """A run step's record (cellab.run.step.RunRecord): status, metrics, attempts and where it ran; the run's
        folder already holds its files. `started`: the run was marked running (`start`), which counted one
        attempt; a worker's record arrives without it."""
        self.finish(run, record.status, metrics=record.metrics, error=record.error, ue_metrics=record.ue_metrics,
                    new_attempts=max(record.attempts, 1) - (1 if started else 0), placement=record.placement,
                    started_at=record.started_at or None, finished_at=record.finished_at or None)
        from cellab.results import software_store  # the run's software, from its manifest: run_software rows

        software_store.save(self.db_path, run.run_id, self.run_dir(run.run_id) / "manifest.json")

    def append_runs(self, runs: list[PlannedRun]) -> None:
        """More planned runs (a stopping rule asked for them): the plan file rewritten whole, their rows added."""
        plan = self.planned()
        known = {r.run_id for r in plan}
        new = [r for r in runs if r.run_id not in known]
        if not new:
            return
        write_json(self.root / "plan.json", [r.model_dump() for r in [*plan, *new]])
        with self._db() as db:
            db.executemany(
                "INSERT INTO runs (run_id, idx, repeat, factors, status) VALUES (?, ?, ?, ?, 'pending')",
                [(r.run_id, r.index, r.repeat, json.dumps(r.factors, sort_keys=True)) for r in new])

    def import_files(self, run: PlannedRun, files: dict[str, bytes]) -> Path:
        """A run's folder as a worker sent it (path relative to the folder -> content): a fresh folder, every
        path checked to stay inside it (no absolute paths, no `..`), written atomically."""
        folder = self.start_folder(run)
        for rel, data in files.items():
            parts = Path(rel).parts
            if not parts or Path(rel).is_absolute() or any(p in ("..", "") for p in parts):
                raise CellabError(f"run {run.run_id}: a worker sent the file {rel!r}, outside its run folder")
            write_atomic(folder.joinpath(*parts), data)
        return folder

    def start_folder(self, run: PlannedRun) -> Path:
        folder = self.run_dir(run.run_id)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder


def _widen_status_check(db: sqlite3.Connection) -> None:
    """Rebuild an older `runs` table with today's status list (SQLite cannot alter a CHECK), rows kept."""
    db.execute("BEGIN IMMEDIATE")
    try:
        db.execute("ALTER TABLE runs RENAME TO runs_before")
        db.execute(_SCHEMA.split("CREATE TABLE IF NOT EXISTS ue_runs")[0].strip())  # execute: stays in the transaction
        names = ", ".join(row[1] for row in db.execute("PRAGMA table_info(runs_before)"))
        db.execute(f"INSERT INTO runs ({names}) SELECT {names} FROM runs_before")
        db.execute("DROP TABLE runs_before")
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise


class _Tx:
    """A connection used as `with store._db() as db:` that commits (or rolls back) and closes."""

    def __init__(self, db: sqlite3.Connection, close: bool = True):
        self.db = db
        self.close = close

    def __enter__(self) -> sqlite3.Connection:
        self.db.execute("BEGIN IMMEDIATE")
        return self.db

    def __exit__(self, exc_type, *_: object) -> None:
        try:
            self.db.execute("ROLLBACK" if exc_type else "COMMIT")
        finally:
            if self.close:
                self.db.close()
