"""`cellab report` refuses a damaged store rather than draw from it (issue 42): a run's metrics that are not a JSON
object, or hold numbers beyond range (10^400), a number that is text or a list, a series that is no list of
numbers, a timeline that is no mapping of equal-length numeric series. The error names results.sqlite, the run
and the metric; the folder is left as it is and no report is written. (cellab.results.store_check reads the
folder and marks what it cannot use; this is the report's decision not to draw a partial picture.)"""

from __future__ import annotations

from typing import Any

from cellab.errors import CellabError, InputError
from cellab.inputs import is_number
from cellab.report.model import LABELS, NUMBERS, SERIES, TEXTS
from cellab.results.store_check import Folder

UNIT_SUFFIXES = ("_bps", "_ms", "_s", "_pct", "_db", "_dbm", "_bytes")  # docs/metrics.md: a unit names a number
REFUSED = "the report is not drawn from a damaged store (the folder was left as it is)"


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _numbers(values: Any) -> bool:
    return isinstance(values, list) and all(is_number(v) for v in values)


def _timeline_problem(value: Any) -> tuple[str, str] | None:
    """(series, what is wrong) of the first series of a timeline that is not {t_s: [numbers], v: [numbers]}."""
    if not isinstance(value, dict):
        return "", f"is {_short(value)}, not a mapping of series"
    for name, series in value.items():
        if not isinstance(series, dict) or not _numbers(series.get("t_s")) or not _numbers(series.get("v")):
            return f".{name}", f"is {_short(series)}, not {{t_s: [numbers], v: [numbers]}}"
        if len(series["t_s"]) != len(series["v"]):
            return f".{name}", f"has {len(series['t_s'])} times and {len(series['v'])} values"
    return None


def metric_problem(name: str, value: Any) -> tuple[str, str] | None:
    """(where inside the metric, what is wrong) when a metric's value cannot be what its name says."""
    if value is None:
        return None  # absent
    if name == "timeline":
        return _timeline_problem(value)
    if name in SERIES:
        return None if _numbers(value) else ("", f"is {_short(value)}, not a list of numbers")
    if name in LABELS:
        return None if is_number(value) or isinstance(value, str) else ("", f"is {_short(value)}, not a number")
    if name in TEXTS:
        return None if isinstance(value, str) else ("", f"is {_short(value)}, not text")
    scalar_by_unit = name.endswith(UNIT_SUFFIXES) and not isinstance(value, list | dict)
    if (name in NUMBERS or scalar_by_unit) and not is_number(value):
        return "", f"is {_short(value)}, not a number"
    return None


def refuse_damaged(folder: Folder) -> None:
    """CellabError (InputError where the field is known) for the first damaged run or UE row of the folder."""
    rows = [(f"runs.{r.run_id}", r.metrics, r.unreadable) for r in folder.runs]
    rows += [(f"ue_runs.{u.run_id}.{u.ue}", u.metrics, u.unreadable) for u in folder.ue_runs]
    for where, metrics, unreadable in rows:
        if unreadable:
            raise CellabError(f"{unreadable}: {REFUSED}")
        for name, value in (metrics or {}).items():
            problem = metric_problem(name, value) if isinstance(name, str) else None
            if problem:
                raise InputError(folder.db_path, f"{where}.metrics.{name}{problem[0]}", f"{problem[1]}: {REFUSED}")
