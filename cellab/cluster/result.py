"""A worker's result, checked before the controller stores anything of it.

A task returns `{"record": {...RunRecord fields}, "files": {relative path: bytes}}`. The controller is the only
writer of the result folder, so whatever a worker sends (a bug, a different cellab, a hostile peer) is checked
here first: every field known and of its type, a status the store knows, numbers the store (SQLite, the JSON
columns' range) and the stopping rule can hold, metrics that are JSON objects, UE names that are names (a UE's
metrics are written to `ues/<name>/metrics.json`: a `../` or absolute name would write outside the campaign
folder) and file paths inside the run folder. A result that fails is `BadResult`, naming the field; the
dispatcher stores that run failed with the reason, and the campaign goes on.
"""

from __future__ import annotations

import math
from dataclasses import fields
from typing import Any

from cellab.errors import CellabError
from cellab.inputs import INT64_MAX, MAX_DEPTH, MAX_FLOAT, name_problem
from cellab.records import PlannedRun
from cellab.run.step import RunRecord

STATUSES = ("ok", "failed", "aborted", "invalid")  # what a run's record may say (pending/running are the store's)
MAX_ATTEMPTS = 1000
MAX_ERROR_CHARS = 20_000
MAX_PATH_CHARS, MAX_PART_CHARS = 1024, 255
MAX_BOXED_FILES = 100_000
RECORD_FIELDS = tuple(f.name for f in fields(RunRecord))


class BadResult(CellabError):
    """A worker's result the controller refuses to store (the run fails with this reason)."""


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _json_problem(value: Any, where: str) -> str | None:
    """Why `value` is no JSON value the store can hold (None when it is): types, finite numbers in range,
    64-bit integers, text keys, nesting within MAX_DEPTH."""
    stack = [(value, where, 0)]
    while stack:
        item, at, depth = stack.pop()
        if depth > MAX_DEPTH:
            return f"{at}: nested deeper than {MAX_DEPTH} levels"
        kind = type(item)
        if item is None or kind in (bool, str):
            continue
        if kind is float:
            if not math.isfinite(item) or abs(item) > MAX_FLOAT:
                return f"{at}: {item!r} is not a finite number within ±{MAX_FLOAT:g}"
        elif kind is int:
            if not -INT64_MAX - 1 <= item <= INT64_MAX:
                return f"{at}: {_show(item)} does not fit in 64 bits"
        elif kind is list:
            stack.extend((x, f"{at}[{i}]", depth + 1) for i, x in enumerate(item))
        elif kind is dict:
            for key, x in item.items():
                if type(key) is not str:
                    return f"{at}: the key {_show(key)} is not text"
                stack.append((x, f"{at}.{key}", depth + 1))
        else:
            return f"{at}: a {kind.__name__} ({_show(item)}) is no JSON value (allowed: objects, lists, text, " \
                   "numbers, true/false, null)"
    return None


def _object(value: Any, where: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if type(value) is not dict:
        raise BadResult(f"{where} is a {type(value).__name__}, not a JSON object (or null)")
    problem = _json_problem(value, where)
    if problem:
        raise BadResult(problem)
    return value


def _number(record: dict[str, Any], key: str, lo: float, hi: float, integer: bool) -> Any:
    value = record.get(key, 0)
    kinds = (int,) if integer else (int, float)
    if type(value) not in kinds or not (lo <= value <= hi):  # NaN fails the range test too
        allowed = f"an integer {lo}..{hi}" if integer else f"a number {lo:g}..{hi:g}"
        raise BadResult(f"record.{key} is {_show(value)} (allowed: {allowed})")
    return value


def check_ue_name(name: Any, where: str) -> str:
    """A UE name is one folder name below ues/: a cellab name (letters, digits, '_', '.', '-'), never `..`,
    a `/` or an absolute path."""
    problem = name_problem(name)
    if problem:
        raise BadResult(f"{where}: the UE name {_show(name)} {problem} (allowed: a name of letters, digits, "
                        "'_', '.', '-', a letter or digit first, 1..64 characters)")
    return name


def check_file_path(rel: Any, where: str) -> tuple[str, ...]:
    """A packed file's path: relative, inside the run folder (no `..`, `.`, empty part, NUL or backslash)."""
    if type(rel) is not str or not 1 <= len(rel) <= MAX_PATH_CHARS:
        raise BadResult(f"{where}: the path {_show(rel)} is not text of 1..{MAX_PATH_CHARS} characters")
    parts = tuple(rel.split("/"))
    if rel.startswith("/") or any(p in ("", ".", "..") or "\0" in p or "\\" in p or len(p) > MAX_PART_CHARS
                                  for p in parts):
        raise BadResult(f"{where}: the path {_show(rel)} is outside the run folder (allowed: a relative path "
                        "without '..', '.', empty parts, NUL or '\\')")
    return parts


def check_result(result: Any, run: PlannedRun) -> tuple[RunRecord, dict[tuple[str, ...], bytes]]:
    """The record and files of one run's result, every field checked (BadResult naming the first bad one)."""
    if type(result) is not dict:
        raise BadResult(f"the result is a {type(result).__name__}, not an object with record and files")
    unknown = sorted(map(str, set(result) - {"record", "files", "outbox"}))
    if unknown or "record" not in result:
        raise BadResult(f"the result has keys {sorted(map(str, result))} (allowed: record, files, outbox)")
    record = result["record"]
    if type(record) is not dict:
        raise BadResult(f"record is a {type(record).__name__}, not an object")
    unknown = sorted(map(str, set(record) - set(RECORD_FIELDS)))
    if unknown:
        raise BadResult(f"record has the unknown key(s) {', '.join(unknown)} (allowed: {', '.join(RECORD_FIELDS)})")
    if record.get("run_id") != run.run_id:
        raise BadResult(f"record.run_id is {_show(record.get('run_id'))}, not this run's {run.run_id!r}")
    status = record.get("status")
    if status not in STATUSES or type(status) is not str:
        raise BadResult(f"record.status is {_show(status)} (allowed: {', '.join(STATUSES)})")
    error = record.get("error")
    if error is not None and (type(error) is not str or len(error) > MAX_ERROR_CHARS):
        raise BadResult(f"record.error is {_show(error)} (allowed: null or text of up to {MAX_ERROR_CHARS} chars)")
    attempts = _number(record, "attempts", 0, MAX_ATTEMPTS, True)
    started = _number(record, "started_at", 0, 1e11, False)
    finished = _number(record, "finished_at", 0, 1e11, False)
    metrics = _object(record.get("metrics"), "record.metrics")
    ue_metrics = _object(record.get("ue_metrics"), "record.ue_metrics")
    for name, values in (ue_metrics or {}).items():
        check_ue_name(name, "record.ue_metrics")
        if type(values) is not dict:
            raise BadResult(f"record.ue_metrics.{name} is a {type(values).__name__}, not a JSON object")
    placement = _object(record.get("placement", {}), "record.placement") or {}
    files = result.get("files", {})
    if type(files) is not dict:
        raise BadResult(f"files is a {type(files).__name__}, not an object of path -> bytes")
    checked: dict[tuple[str, ...], bytes] = {}
    for rel, data in files.items():
        parts = check_file_path(rel, "files")
        if type(data) is not bytes:
            raise BadResult(f"files[{_show(rel)}] is a {type(data).__name__}, not bytes")
        checked[parts] = data
    return RunRecord(run.run_id, status, attempts, error, metrics, ue_metrics, placement, started, finished), checked


def check_outbox(result: dict[str, Any], inline: dict[tuple[str, ...], bytes], limit_bytes: int) -> dict[str, Any] | None:
    """A checked result's outbox (cellab.cluster.outbox: the run folder's files left on the worker), or None:
    the worker's address, a box name, and [path, size] pairs whose paths stay in the run folder, appear once and
    not inline, and whose sizes add up to no more than the per-run limit."""
    outbox = result.get("outbox")
    if outbox is None:
        return None
    if type(outbox) is not dict or set(outbox) != {"worker", "box", "files"}:
        raise BadResult(f"outbox is {_show(outbox)} (allowed: an object of worker, box, files)")
    worker, box, listed = outbox["worker"], outbox["box"], outbox["files"]
    if type(worker) is not str or not 1 <= len(worker) <= 300 or not worker.isprintable():
        raise BadResult(f"outbox.worker is {_show(worker)}, not a worker address")
    if type(box) is not str or len(box) != 32 or any(c not in "0123456789abcdef" for c in box):
        raise BadResult(f"outbox.box is {_show(box)} (allowed: 32 hexadecimal digits)")
    if type(listed) is not list or not 1 <= len(listed) <= MAX_BOXED_FILES:
        raise BadResult(f"outbox.files is {_show(listed)} (allowed: a list of 1..{MAX_BOXED_FILES} [path, size])")
    seen: set[tuple[str, ...]] = set(inline)
    total = 0
    for entry in listed:
        if type(entry) is not list or len(entry) != 2 or type(entry[1]) is not int or entry[1] < 0:
            raise BadResult(f"outbox.files has {_show(entry)} (allowed: [path, size in bytes])")
        parts = check_file_path(entry[0], "outbox.files")
        if parts in seen:
            raise BadResult(f"outbox.files: {_show(entry[0])} appears twice")
        seen.add(parts)
        total += entry[1]
    if total > limit_bytes:
        raise BadResult(f"outbox.files declare {total / 2**20:.1f} MiB, more than the limit of "
                        f"{limit_bytes >> 20} MiB per run")
    return {"worker": worker, "box": box, "files": [list(e) for e in listed]}
