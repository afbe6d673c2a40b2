"""A campaign's results as pandas DataFrames: the result folder loaded for a notebook (docs/analysis.md).

    from cellab.results.frames import load
    results = load("runs/out/demo-cc-shootout-20261128-190454")
    runs = results.runs()                # one row per run: factors, status, validity, metrics, placement, software
    timelines = results.timelines()      # long format: run_id, series, t_s, value, unit
    comparisons = results.comparisons()  # one row per factor level and metric, against the factor's baseline
    results.units["throughput_bps"]      # "bit/s": every column's unit ("" when it has none)

The folder is read once, through the same checks as the report (cellab.results.store_check.read_folder): a folder
that is not a campaign, a damaged database or a store written by a newer cellab is an error naming the file, and
nothing is written. Columns are typed: numbers float64 (NaN: the run did not measure it), integers Int64, flags
boolean, text string (<NA>: absent), times datetime64 UTC; a factor or metric whose values mix kinds is text.
A metric named like a factor or a fixed column is `metric:<name>`.
"""

from __future__ import annotations

import json
import math
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from cellab.errors import InputError
from cellab.inputs import JSON_MAX_BYTES, read_json
from cellab.results.labels import scheme_label
from cellab.results.software_store import DIGEST_KEY as SOFTWARE_DIGEST
from cellab.results.software_store import rows_of as software_rows
from cellab.results.flags import read_flags, run_flags
from cellab.results.store_check import Folder, db_json, read_folder, read_manifest, store_schema_version

RUN_COLUMNS = ("run_id", "idx", "repeat", "status", "valid", "flags", "error", "unreadable", "attempts",
               "started_at", "finished_at")
PLACEMENT = ("host", "lab", "instance", "worker", "slot")
SOFTWARE = ("cellab_version", "cellab_commit", "cellab_local_changes", "kernel", "software_digest")
TIMELINE_COLUMNS = ("run_id", "series", "t_s", "value", "unit")
COMPARISON_COLUMNS = ("factor", "level", "baseline", "metric", "unit", "runs_level", "runs_baseline",
                      "median_level", "median_baseline", "ratio", "ci_low", "ci_high", "p_value", "note")
COMPARISONS_JSON = Path("report") / "comparisons.json"
COUNTS = frozenset({"bytes_received", "retransmits", "rtt_samples", "owd_samples", "clock_resyncs", "sender_flows",
                    "ues", "sr_probes_used", "sr_probe_budget", "sr_unused_occasions", "fault_lost_bytes"})

UNITS = {"bytes_received": "bytes", "retransmits": "segments", "loss_rate": "fraction", "utilization": "fraction",
         "ues": "UEs", "n_prb": "PRB", "started_at": "UTC", "finished_at": "UTC", "t_s": "s", "attempts": "attempts",
         "placement_slot": "slot", "sr_probes_used": "probes", "sr_probe_budget": "probes", "rtt_samples": "samples",
         "sr_stack_tti_per_s": "TTI/s", "sr_unused_occasions": "occasions", "clock_resyncs": "resyncs"}
SUFFIX_UNITS = (("_bps", "bit/s"), ("_mbit", "Mbit/s"), ("_ms", "ms"), ("_us", "µs"), ("_s", "s"), ("_dbm", "dBm"),
                ("_db", "dB"), ("_bytes", "bytes"), ("_pct", "%"), ("_hz", "Hz"))


def unit_of(name: str) -> str:
    """A column's or series' unit from its name (docs/metrics.md: units in names); per-UE series
    (`throughput_bps.ue0`, `rsrp_dbm.server`) take their quantity's."""
    base = name.split(":", 1)[-1].split(".", 1)[0]
    if base in UNITS:
        return UNITS[base]
    return next((unit for suffix, unit in SUFFIX_UNITS if base.endswith(suffix)), "")


def typed_column(values: list[Any], *, integers: bool = True) -> pd.Series:
    """Python values as one typed column: bool -> boolean, int -> Int64 (float64 unless `integers`), numbers ->
    float64, text -> string; lists and mappings as JSON text; values of mixed kinds as text."""
    present = [v for v in values if v is not None]
    kinds = {_kind(v) for v in present}
    if kinds == {"bool"}:
        return pd.Series(values, dtype="boolean")
    if kinds == {"int"} and integers:
        return pd.Series(values, dtype="Int64")
    if kinds <= {"int", "float"}:
        return pd.Series([np.nan if v is None else float(v) for v in values], dtype="float64")
    return pd.Series([None if v is None else _text(v) for v in values], dtype="string")


def _kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "float"
    return "text"


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _frame(columns: dict[str, list[Any]], kinds: dict[str, str] | None = None,
           metrics: Iterable[str] = ()) -> pd.DataFrame:
    """A DataFrame from columns of Python values; `kinds` fixes a column's dtype instead of inferring it; a metric
    column's whole numbers are float64 (a rate that came out 0 is still a rate) unless it is one of COUNTS."""
    kinds = kinds or {}
    metrics = set(metrics)
    data = {name: (pd.Series(values, dtype=kinds[name]) if name in kinds else
                   typed_column(values, integers=name not in metrics or name.split(":")[-1] in COUNTS))
            for name, values in columns.items()}
    return pd.DataFrame(data, index=pd.RangeIndex(len(next(iter(columns.values()), []))))


@dataclass
class Results:
    """A loaded result folder. Each table is built on first use and kept (a notebook asks again for free);
    the methods return copies, so changing one changes nothing here."""

    root: Path
    folder: Folder
    notes: list[str] = field(default_factory=list)  # what was left out and why (a timeline series not a series)

    @property
    def campaign(self) -> dict[str, Any]:
        return self.folder.campaign

    @property
    def name(self) -> str:
        return str(self.campaign.get("name") or self.root.name)

    @property
    def factors(self) -> list[str]:
        """The campaign's factors, in its order (then any other a run names)."""
        listed = list(self.campaign.get("factors") or {})
        return list(dict.fromkeys([*listed, *sorted({f for r in self.folder.runs for f in r.factors})]))

    @property
    def metrics(self) -> list[str]:
        """The metric columns of runs(), as they are named there."""
        return [c for c in self._runs.columns if c not in self._fixed_columns]

    @property
    def units(self) -> dict[str, str]:
        """Every column of every table -> its unit ("" when it has none)."""
        names = [*self._runs.columns, *self._ue_runs.columns, *TIMELINE_COLUMNS, *COMPARISON_COLUMNS]
        return {name: unit_of(name) for name in dict.fromkeys(names)}

    def runs(self) -> pd.DataFrame:
        return self._runs.copy()

    def ue_runs(self) -> pd.DataFrame:
        """One row per run and UE (runs with several UEs, or a UE's own metrics): run_id, ue, slot, its metrics."""
        return self._ue_runs.copy()

    def timelines(self) -> pd.DataFrame:
        return self._timelines.copy()

    def comparisons(self) -> pd.DataFrame:
        return self._comparisons.copy()

    # --- the tables -----------------------------------------------------------------------------------
    @cached_property
    def _fixed_columns(self) -> list[str]:
        scheme = [] if "scheme" in self.factors else ["scheme"]
        return [*RUN_COLUMNS, *self.factors, *scheme, *(f"placement_{p}" for p in PLACEMENT), *SOFTWARE]

    @cached_property
    def _runs(self) -> pd.DataFrame:
        rows = self.folder.runs
        extra = _run_extras(self.folder.db_path)
        fixed = self.campaign.get("fixed") or {}
        columns: dict[str, list[Any]] = {
            "run_id": [r.run_id for r in rows], "idx": [r.idx for r in rows], "repeat": [r.repeat for r in rows],
            "status": [r.status for r in rows],
            "valid": [r.status == "ok" and r.unreadable is None and bool(r.metrics) for r in rows],
            "flags": [", ".join(self._flags.get(r.run_id, {})) or None for r in rows],
            "error": [r.error for r in rows], "unreadable": [r.unreadable for r in rows],
            "attempts": [extra.get(r.run_id, {}).get("attempts") for r in rows],
            "started_at": [extra.get(r.run_id, {}).get("started_at") for r in rows],
            "finished_at": [extra.get(r.run_id, {}).get("finished_at") for r in rows]}
        kinds = {"run_id": "string", "idx": "Int64", "repeat": "Int64", "status": "string", "valid": "boolean",
                 "flags": "string",
                 "error": "string", "unreadable": "string", "attempts": "Int64"}
        for name in self.factors:
            columns[name] = [r.factors.get(name) for r in rows]
        if "scheme" not in self.factors:
            columns["scheme"] = [scheme_label(_setting("cc", r, fixed) or (r.metrics or {}).get("congestion_control"),
                                              _setting("receiver", r, fixed)) for r in rows]
            kinds["scheme"] = "string"
        for name in PLACEMENT:
            columns[f"placement_{name}"] = [(extra.get(r.run_id, {}).get("placement") or {}).get(name) for r in rows]
            kinds[f"placement_{name}"] = "Int64" if name == "slot" else "string"
        software = [_software(self.root / "runs" / r.run_id / "manifest.json") for r in rows]
        for name in SOFTWARE:
            columns[name] = [s.get(name) for s in software]
            kinds[name] = "boolean" if name == "cellab_local_changes" else "string"
        metric_columns = []
        for name in _metric_names(r.metrics for r in rows):
            column = name if name not in columns else f"metric:{name}"
            columns[column] = [(r.metrics or {}).get(name) for r in rows]
            metric_columns.append(column)
        frame = _frame(columns, kinds, metric_columns)
        for name in ("started_at", "finished_at"):
            frame[name] = pd.to_datetime(frame[name], unit="s", utc=True)
        return frame

    @cached_property
    def _flags(self) -> dict[str, dict[str, str]]:
        """run_id -> flag -> detail: the store's run_flags, or for a store written before them (schema < 3) the
        same flags computed from the runs' metrics (cellab.results.flags)."""
        with closing(sqlite3.connect(f"file:{self.folder.db_path}?mode=ro", uri=True, timeout=30)) as db:
            if store_schema_version(db) >= 3:
                return read_flags(db)
        per_ue: dict[str, dict[str, Any]] = {}
        for u in self.folder.ue_runs:
            per_ue.setdefault(u.run_id, {})[u.ue] = u.metrics or {}
        return {r.run_id: run_flags(r.metrics, per_ue.get(r.run_id)) for r in self.folder.runs if r.status == "ok"}

    @cached_property
    def _ue_runs(self) -> pd.DataFrame:
        rows = self.folder.ue_runs
        columns: dict[str, list[Any]] = {"run_id": [u.run_id for u in rows], "ue": [u.ue for u in rows],
                                         "slot": [u.slot for u in rows]}
        metric_columns = []
        for name in _metric_names(u.metrics for u in rows):
            column = name if name not in columns else f"metric:{name}"
            columns[column] = [(u.metrics or {}).get(name) for u in rows]
            metric_columns.append(column)
        return _frame(columns, {"run_id": "string", "ue": "string", "slot": "Int64"}, metric_columns)

    @cached_property
    def _timelines(self) -> pd.DataFrame:
        parts: list[pd.DataFrame] = []
        for run in self.folder.runs:
            timeline = (run.metrics or {}).get("timeline")
            if timeline is None:
                continue
            if not isinstance(timeline, dict):
                self.notes.append(f"run {run.run_id}: its timeline is not a mapping of series: left out")
                continue
            for series, data in timeline.items():
                points = _points(data)
                if points is None:
                    self.notes.append(f"run {run.run_id}: timeline series {series!r} is not "
                                      "{t_s: [...], v: [...]} of equal length: left out")
                    continue
                t_s, value = points
                parts.append(pd.DataFrame({
                    "run_id": pd.Series([run.run_id] * t_s.size, dtype="string"),
                    "series": pd.Series([str(series)] * t_s.size, dtype="string"),
                    "t_s": t_s, "value": value,
                    "unit": pd.Series([unit_of(str(series))] * t_s.size, dtype="string")}))
        if not parts:
            return _frame({c: [] for c in TIMELINE_COLUMNS}, {"run_id": "string", "series": "string",
                                                              "t_s": "float64", "value": "float64", "unit": "string"})
        return pd.concat(parts, ignore_index=True)

    @cached_property
    def _comparisons(self) -> pd.DataFrame:
        from_store = _store_comparisons(self.folder.db_path)
        if from_store is not None:
            return from_store
        path = self.root / COMPARISONS_JSON
        if not path.is_file():
            self.notes.append(f"no comparisons: neither the store nor {COMPARISONS_JSON} has them "
                              "(`cellab report DIR` writes the report's)")
            return comparisons_frame([])
        return comparisons_frame(_report_comparisons(path))


def load(result_dir: str | Path) -> Results:
    """A campaign's result folder, checked (store_check.read_folder) and ready for its tables."""
    root = Path(result_dir)
    return Results(root, read_folder(root))  # a store of a newer schema is refused there (store_check.check_db)


def load_runs(result_dir: str | Path) -> pd.DataFrame:
    return load(result_dir).runs()


def load_timelines(result_dir: str | Path) -> pd.DataFrame:
    return load(result_dir).timelines()


def load_comparisons(result_dir: str | Path) -> pd.DataFrame:
    return load(result_dir).comparisons()


# --- reading helpers ------------------------------------------------------------------------------------
def _run_extras(db_path: Path) -> dict[str, dict[str, Any]]:
    """attempts, started_at, finished_at and placement per run (read_folder does not need them)."""
    out: dict[str, dict[str, Any]] = {}
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
        placement = "placement" if "placement" in columns else "NULL"
        for run_id, attempts, started, finished, place in db.execute(
                f"SELECT run_id, attempts, started_at, finished_at, {placement} FROM runs"):
            where = f"runs.{run_id}"
            out[str(run_id)] = {
                "attempts": attempts if isinstance(attempts, int) and not isinstance(attempts, bool) else None,
                "started_at": started if _finite(started) else None,
                "finished_at": finished if _finite(finished) else None,
                "placement": _mapping(db_json(db_path, f"{where}.placement", place))}
    return out


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _setting(name: str, run: Any, fixed: dict[str, Any]) -> Any:
    """As the report reads it (cellab.report.model.setting): the run's factor, else the campaign's fixed value."""
    return run.factors.get(name, fixed.get(name))


def _software(manifest: Path) -> dict[str, Any]:
    """A run's software in a few columns: cellab's version, commit and local changes, the kernel, and the store's
    digest of its provenance (cellab.results.software_store: where and when left out, so two runs with the same
    digest ran the same software), computed from the manifest so that stores older than that table have it too."""
    if not manifest.is_file():
        return {}
    data = read_manifest(manifest)
    software = _mapping(data.get("software"))
    digest = software_rows(_mapping(data.get("provenance")))[SOFTWARE_DIGEST]
    return {"cellab_version": _str(software.get("cellab")), "cellab_commit": _str(software.get("cellab_commit")),
            "cellab_local_changes": software.get("cellab_local_changes")
            if isinstance(software.get("cellab_local_changes"), bool) else None,
            "kernel": _str(software.get("kernel")), "software_digest": digest}


def _str(value: Any) -> str | None:
    return None if value is None else str(value)


def _metric_names(all_metrics: Iterable[dict[str, Any] | None]) -> list[str]:
    """Scalar metrics (numbers, flags, text) in first-seen order; series and mappings are other tables'."""
    names: dict[str, None] = {}
    for metrics in all_metrics:
        for name, value in (metrics or {}).items():
            if isinstance(name, str) and not isinstance(value, list | dict):
                names[name] = None
    return list(names)


def _points(data: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """A timeline series {t_s: [...], v: [...]} as two float arrays (points with a value that is no number left
    out); None when it is not that shape."""
    if not isinstance(data, dict):
        return None
    t_s, v = data.get("t_s"), data.get("v")
    if not isinstance(t_s, list) or not isinstance(v, list) or len(t_s) != len(v):
        return None
    keep = [(float(a), float(b)) for a, b in zip(t_s, v, strict=True) if _finite(a) and _finite(b)]
    if not keep:
        return np.empty(0), np.empty(0)
    both = np.array(keep, float)
    return both[:, 0], both[:, 1]


# --- comparisons -----------------------------------------------------------------------------------
def comparisons_frame(rows: list[dict[str, Any]]) -> pd.DataFrame:
    kinds = {c: "string" for c in ("factor", "level", "baseline", "metric", "unit", "note")}
    kinds |= {"runs_level": "Int64", "runs_baseline": "Int64"}
    kinds |= {c: "float64" for c in ("median_level", "median_baseline", "ratio", "ci_low", "ci_high", "p_value")}
    columns = {c: [(np.nan if r.get(c) is None else r.get(c)) if kinds[c] == "float64" else r.get(c) for r in rows]
               for c in COMPARISON_COLUMNS}
    return _frame(columns, kinds)


def _report_comparisons(path: Path) -> list[dict[str, Any]]:
    """report/comparisons.json's entries, one row per factor level and metric; a file of another shape is an
    InputError naming it and the field."""
    data = read_json(path, JSON_MAX_BYTES)
    entries = data.get("comparisons") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise InputError(path, "comparisons", "not a list of comparisons (`cellab report DIR` rewrites the file)")
    rows = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise InputError(path, f"comparisons[{i}]", "not a mapping")
        for metric in ("throughput_bps", "rtt_p95_ms"):
            ratio = entry.get(metric)
            if ratio is None:
                continue
            if not isinstance(ratio, dict):
                raise InputError(path, f"comparisons[{i}].{metric}", "not a mapping of the ratio's numbers")
            row = {"factor": entry.get("factor"), "level": entry.get("level"), "baseline": entry.get("baseline"),
                   "metric": metric, "unit": unit_of(metric), "runs_level": entry.get("runs_level"),
                   "runs_baseline": entry.get("runs_baseline"), "median_level": ratio.get("median_level"),
                   "median_baseline": ratio.get("median_base"), "ratio": ratio.get("ratio"), "ci_low": ratio.get("low"),
                   "ci_high": ratio.get("high"), "p_value": ratio.get("p_value"), "note": ratio.get("note") or None}
            for name in ("median_level", "median_baseline", "ratio", "ci_low", "ci_high", "p_value"):
                if row[name] is not None and not _finite(row[name]):
                    raise InputError(path, f"comparisons[{i}].{metric}.{name}", f"{row[name]!r} is not a number")
            for name in ("runs_level", "runs_baseline"):
                if row[name] is not None and not (isinstance(row[name], int) and not isinstance(row[name], bool)):
                    raise InputError(path, f"comparisons[{i}].{name}", f"{row[name]!r} is not a count of runs")
            for name in ("factor", "level", "baseline"):
                row[name] = None if row[name] is None else str(row[name])
            rows.append(row)
    return rows


STORE_NAMES = {"n_level": "runs_level", "n_base": "runs_baseline", "median_base": "median_baseline", "low": "ci_low",
               "high": "ci_high"}  # the store's comparisons columns (cellab.results.comparisons) -> this table's


def _store_comparisons(db_path: Path) -> pd.DataFrame | None:
    """The store's comparisons table (schema 2 on; None before), as this table's columns; what the store keeps
    beyond them (kind, name, stratum, interval, test) follows, typed as it comes."""
    with closing(sqlite3.connect(f"file:{db_path}?mode=ro", uri=True, timeout=30)) as db:
        if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'comparisons'").fetchone() is None:
            return None
        cursor = db.execute("SELECT * FROM comparisons ORDER BY rowid")
        names = [STORE_NAMES.get(d[0], d[0]) for d in cursor.description]
        rows = [dict(zip(names, row, strict=True)) for row in cursor]
    if not rows:
        return None  # a campaign that has not ended yet writes none: the report's, if there is one
    for row in rows:
        row.setdefault("unit", unit_of(str(row.get("metric") or "")))
    frame = comparisons_frame(rows)
    for name in names:  # what the store keeps beyond these columns (a test, a scope), typed as it comes
        if name not in frame.columns:
            frame[name] = typed_column([r[name] for r in rows])
    return frame


__all__ = ["Results", "comparisons_frame", "load", "load_comparisons", "load_runs",
           "load_timelines", "scheme_label", "typed_column", "unit_of"]
