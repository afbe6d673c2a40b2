"""What one run looks like to the report, and the report's building blocks (sections, tables).

A run's metrics come from the database as JSON; a metric of the wrong type (a throughput that is text, a
series that is no list, a timeline that is no mapping) is left out with a note naming the run and the metric,
so that one damaged value neither breaks the report nor hides the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from cellab.inputs import is_number
from cellab.results.labels import scheme_label

BPS_PER_MBIT = 1e6

SCHEME_FACTORS = ("scheme", "cc", "receiver")  # a bundle factor `scheme` names it outright
UNREADABLE = "unreadable"

NUMBERS = frozenset({  # docs/metrics.md's scalars that are numbers
    "throughput_bps", "bytes_received", "duration_s", "rtt_mean_ms", "rtt_min_ms", "rtt_p95_ms", "rtt_max_ms",
    "rtt_jitter_ms", "owd_mean_ms", "owd_p95_ms", "owd_min_ms", "retransmits", "loss_rate", "fct_mean_s",
    "jain_fairness", "capacity_bps", "utilization", "ues", "ue_fairness_jain", "late_tti_pct", "late_tti_max_ms", "clock_resyncs", "stack_speed",
    "sender_srtt_mean_ms", "rtt_samples"})
LABELS = frozenset({"sr_true_ms", "sr_estimate_ms"})  # numbers or text: shown as labels
TEXTS = frozenset({"sr_regime", "rtt_source", "congestion_control"})
SERIES = frozenset({"rtt_series_ms", "throughput_series_bps", "ack_gap_ms"})


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def clean_metrics(metrics: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The metrics the report can use, and a note per metric left out for its type."""
    clean: dict[str, Any] = {}
    problems = []
    for name, value in metrics.items():
        if not isinstance(name, str):
            continue
        if value is None:  # absent, as far as any table or plot is concerned
            clean[name] = None
        elif name in NUMBERS and not is_number(value):
            problems.append(f"{name} is {_short(value)}, not a number")
        elif name in LABELS and not (value is None or is_number(value) or isinstance(value, str)):
            problems.append(f"{name} is {_short(value)}, not a number")
        elif name in TEXTS and not isinstance(value, str):
            problems.append(f"{name} is {_short(value)}, not text")
        elif name in SERIES and not isinstance(value, list):
            problems.append(f"{name} is {_short(value)}, not a list of numbers")
        elif name == "timeline" and not isinstance(value, dict):
            problems.append(f"timeline is {_short(value)}, not a mapping of series")
        else:
            clean[name] = value
    return clean, problems


# --- what one run looks like to the report ------------------------------------------------------
@dataclass
class Run:
    idx: int
    run_id: str
    repeat: int
    status: str
    error: str | None
    factors: dict[str, Any]
    metrics: dict[str, Any]
    scheme: str
    facet: str = "all"  # the other varied factors, e.g. "channel=mobile"
    params: dict[str, Any] = field(default_factory=dict)
    unreadable: str | None = None  # why the run's metrics cannot be used (file, run, column)
    problems: list[str] = field(default_factory=list)  # metrics left out for their type
    flags: dict[str, str] = field(default_factory=dict)  # cellab.results.flags: flag -> what was seen

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.unreadable is None and bool(self.metrics)

    @property
    def shown_status(self) -> str:
        return UNREADABLE if self.unreadable else self.status


def setting(name: str, factors: dict[str, Any], fixed: dict[str, Any]) -> Any:
    return factors.get(name, fixed.get(name))


def samples(metrics: dict[str, Any], name: str) -> np.ndarray:
    """A series metric as finite floats (empty when absent or not a list)."""
    values = metrics.get(name)
    if not isinstance(values, list):
        return np.empty(0)
    out = np.array([v for v in values if is_number(v) and abs(v) < 1e300], float)
    return out[np.isfinite(out)]


class ValueOrder:
    """Factor values in the order the campaign lists them (then by text): plots and tables agree."""

    def __init__(self, factors: dict[str, Any]):
        self.listed = {name: [str(v) for v in levels] for name, levels in factors.items()
                       if isinstance(levels, list | dict)}

    def key(self, name: str, value: Any) -> tuple[int, str]:
        listed = self.listed.get(name) or []
        text = str(value)
        return (listed.index(text) if text in listed else len(listed), text)

    def levels(self, name: str, runs: list[Run]) -> list[str]:
        """The factor's values among the runs, in campaign order."""
        present = {str(r.factors[name]) for r in runs if name in r.factors}
        return sorted(present, key=lambda v: self.key(name, v))


# --- report structure ---------------------------------------------------------------------------
@dataclass
class Table:
    header: list[str]
    rows: list[list[Any]]  # a cell is text, or (text, css class)
    caption: str = ""


@dataclass
class Section:
    id: str
    title: str
    notes: list[str] = field(default_factory=list)
    figures: list[Any] = field(default_factory=list)  # report_figures.FigureOut
    tables: list[Table] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, text): figures not inline
    items: list[tuple[str, str]] = field(default_factory=list)  # (term, text): a definition list (conditions)


__all__ = ["Run", "Section", "Table", "ValueOrder", "clean_metrics", "is_number", "samples", "scheme_label",
           "setting"]
