"""The campaign report: one self-contained HTML file (plots inline as PNG), plots also saved as PNG and SVG.

    <dir>/report.html            open it anywhere, offline: no external URL, no JavaScript
    <dir>/report/<figure>.png    every figure, also as .svg
    <dir>/report/summary.json    the scalar metrics of every run

Sections (each only when its data exists, see docs/metrics.md): throughput vs 95th-percentile delay per
scheme, CDFs, SR confusion matrix, lab vs commercial with Kolmogorov–Smirnov distances, the run table,
one timeline per run. `cellab report DIR` rebuilds it from the result folder at any time.
"""

from __future__ import annotations

import base64
import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import Environment, select_autoescape

from cellab import plots
from cellab.inputs import read_yaml
from cellab.metrics import scalar_metrics
from cellab.store import ResultStore, write_atomic

MAX_INLINE_TIMELINES = 40  # more would make the HTML heavy; the rest are linked files
TIMELINE_DPI = 80  # noisy per-run series compress badly: smaller PNGs keep a 40-timeline page near 4 MB
SCHEME_FACTORS = ("scheme", "cc", "receiver")  # a bundle factor `scheme` names it outright
NO_ESTIMATE = "none"


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

    @property
    def ok(self) -> bool:
        return self.status == "ok" and bool(self.metrics)


def scheme_label(cc: Any, receiver: Any) -> str:
    """`cubic`, or `cubic+exll-rx` with receiver-side control; no receiver (or "none") is just the cc."""
    label = str(cc) if cc not in (None, "") else "default"
    if receiver in (None, "", "none"):
        return label
    receiver = str(receiver)
    return f"{label}+{receiver if receiver.endswith('-rx') else receiver + '-rx'}"


def _setting(name: str, factors: dict[str, Any], fixed: dict[str, Any]) -> Any:
    return factors.get(name, fixed.get(name))


def _load_runs(store: ResultStore, campaign: dict[str, Any]) -> list[Run]:
    fixed = campaign.get("fixed") or {}
    runs = []
    for row in store.rows():
        metrics = row["metrics"] or {}
        cc = _setting("cc", row["factors"], fixed) or metrics.get("congestion_control")
        scheme = row["factors"].get("scheme")
        runs.append(Run(idx=row["idx"], run_id=row["run_id"], repeat=row["repeat"], status=row["status"],
                        error=row["error"], factors=row["factors"], metrics=metrics,
                        scheme=str(scheme) if scheme is not None else
                        scheme_label(cc, _setting("receiver", row["factors"], fixed))))
    return runs


class ValueOrder:
    """Factor values in the order the campaign lists them (then by text): plots and tables agree."""

    def __init__(self, factors: dict[str, list[Any]]):
        self.factors = factors

    def key(self, name: str, value: Any) -> tuple[int, str]:
        listed = [str(v) for v in self.factors.get(name) or []]
        text = str(value)
        return (listed.index(text) if text in listed else len(listed), text)


def _assign_facets(runs: list[Run], factor_names: list[str]) -> list[str]:
    """The facet factors: varied factors besides cc and receiver with two or more values among the runs."""
    names = [f for f in factor_names if f not in SCHEME_FACTORS
             and len({str(r.factors.get(f)) for r in runs if f in r.factors}) > 1]
    for r in runs:
        r.facet = ", ".join(f"{f}={r.factors.get(f, '-')}" for f in names) or "all"
    return names


def _facet_order(runs: list[Run], order: ValueOrder, names: list[str]) -> list[str]:
    def key(run: Run) -> tuple:
        return tuple(order.key(f, run.factors.get(f)) for f in names)
    return list(dict.fromkeys(r.facet for r in sorted(runs, key=key)))


def _scheme_order(runs: list[Run], order: ValueOrder) -> list[str]:
    def key(run: Run) -> tuple:
        return tuple(order.key(f, run.factors.get(f)) for f in SCHEME_FACTORS) + (run.scheme,)
    return list(dict.fromkeys(r.scheme for r in sorted(runs, key=key)))


def samples(metrics: dict[str, Any], name: str) -> np.ndarray:
    """A series metric as finite floats (empty when absent or not a list)."""
    values = metrics.get(name)
    if not isinstance(values, list):
        return np.empty(0)
    out = np.array([v for v in values if isinstance(v, (int, float))], float)
    return out[np.isfinite(out)]


# --- statistics -------------------------------------------------------------------------------
def ks_2samp(a: Any, b: Any) -> tuple[float, float]:
    """Two-sample Kolmogorov–Smirnov: D = max |F_a - F_b| and its asymptotic p-value.

    Written here with numpy (scipy is not a dependency); the p-value uses Stephens' small-sample
    correction of the Kolmogorov distribution, as in Numerical Recipes' kstwo.
    """
    a = np.sort(np.asarray(a, float))
    b = np.sort(np.asarray(b, float))
    if a.size == 0 or b.size == 0:
        raise ValueError("KS needs two non-empty samples")
    grid = np.concatenate([a, b])
    cdf_a = np.searchsorted(a, grid, side="right") / a.size
    cdf_b = np.searchsorted(b, grid, side="right") / b.size
    d = float(np.max(np.abs(cdf_a - cdf_b)))
    root_n = math.sqrt(a.size * b.size / (a.size + b.size))
    return d, kolmogorov_sf((root_n + 0.12 + 0.11 / root_n) * d)


def kolmogorov_sf(lam: float) -> float:
    """P(K > lam) for the Kolmogorov distribution; each series is used where it converges fast."""
    if lam <= 0:
        return 1.0
    if lam < 1.18:
        y = math.exp(-math.pi ** 2 / (8 * lam ** 2))
        cdf = math.sqrt(2 * math.pi) / lam * (y + y ** 9 + y ** 25 + y ** 49)
        return min(max(1.0 - cdf, 0.0), 1.0)
    x = math.exp(-2 * lam ** 2)
    return min(max(2 * (x - x ** 4 + x ** 9 - x ** 16), 0.0), 1.0)


def _sr_label(value: Any) -> str:
    """20, 20.0 and "20" are the same SR period."""
    if value is None:
        return NO_ESTIMATE
    try:
        number = float(value)
    except (TypeError, ValueError):
        return str(value)
    return str(int(number)) if number.is_integer() else f"{number:g}"


def _numeric_first(label: str) -> tuple[int, float, str]:
    try:
        return (0, float(label), label)
    except ValueError:
        return (1, 0.0, label)


@dataclass
class Confusion:
    true_labels: list[str]
    estimate_labels: list[str]
    counts: np.ndarray  # [true, estimate]
    correct: int
    total: int
    without_truth: int  # runs with an SR result but no known true period: not in the matrix


def sr_confusion(runs: list[Run], fixed: dict[str, Any]) -> Confusion | None:
    """Rows: true SR period (sr_true_ms, else the sr_period_ms setting); columns: the estimate or "none"."""
    pairs, without_truth = [], 0
    for r in runs:
        truth = r.metrics.get("sr_true_ms", _setting("sr_period_ms", r.factors, fixed))
        if truth is None:
            without_truth += 1
            continue
        pairs.append((_sr_label(truth), _sr_label(r.metrics.get("sr_estimate_ms"))))
    if not pairs:
        return None
    true_labels = sorted({t for t, _ in pairs}, key=_numeric_first)
    estimates = {e for _, e in pairs} - {NO_ESTIMATE}
    estimate_labels = sorted(estimates | set(true_labels), key=_numeric_first)
    if NO_ESTIMATE in {e for _, e in pairs}:
        estimate_labels.append(NO_ESTIMATE)
    counts = np.zeros((len(true_labels), len(estimate_labels)), int)
    for t, e in pairs:
        counts[true_labels.index(t), estimate_labels.index(e)] += 1
    correct = sum(1 for t, e in pairs if t == e)
    return Confusion(true_labels, estimate_labels, counts, correct, len(pairs), without_truth)


# --- report structure ---------------------------------------------------------------------------
@dataclass
class FigureOut:
    name: str
    title: str
    png_b64: str | None  # None: saved but not inline


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
    figures: list[FigureOut] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    links: list[tuple[str, str]] = field(default_factory=list)  # (href, text): figures not inline


class FigureWriter:
    """Saves every figure as PNG and SVG under report/ and keeps the PNG for inlining."""

    def __init__(self, plot_dir: Path):
        self.plot_dir = plot_dir

    def save(self, name: str, title: str, fig: Any, inline: bool = True, dpi: int = 100) -> FigureOut:
        png, svg = plots.render(fig, dpi)
        write_atomic(self.plot_dir / f"{name}.png", png)
        write_atomic(self.plot_dir / f"{name}.svg", svg)
        return FigureOut(name, title, base64.b64encode(png).decode() if inline else None)


def _chunk_name(base: str, i: int) -> str:
    return base if i == 0 else f"{base}-{i + 1}"


# --- sections ---------------------------------------------------------------------------------
def scatter_panels(runs: list[Run], facets: list[str]) -> list[plots.Panel]:
    """One panel per facet with the runs that have both throughput and p95 delay."""
    panels = []
    for facet in facets:
        points = [plots.ScatterPoint(r.scheme, float(r.metrics["rtt_p95_ms"]), float(r.metrics["throughput_bps"]))
                  for r in runs if r.facet == facet and _is_number(r.metrics.get("rtt_p95_ms"))
                  and _is_number(r.metrics.get("throughput_bps"))]
        if points:
            panels.append(plots.Panel(title=facet if facet != "all" else "all runs", points=points))
    return panels


def throughput_delay_section(runs: list[Run], facets: list[str], colors: dict[str, str],
                             out: FigureWriter) -> Section | None:
    panels = scatter_panels(runs, facets)
    if not panels:
        return None
    section = Section("throughput-delay", "Throughput vs 95th-percentile delay",
                      notes=["One small marker per run, the big marker is the scheme's mean. The delay axis is "
                             "inverted (Pantheon style): better is up and to the right."])
    for i, chunk in enumerate(plots.chunks(panels)):
        section.figures.append(out.save(_chunk_name("throughput-vs-delay", i), "throughput vs p95 delay",
                                        plots.throughput_delay(chunk, colors)))
    return section


SERIES_CDFS = (  # (metric, figure name, axis label, scale to the axis unit)
    ("rtt_series_ms", "rtt-cdf", "RTT (ms)", 1.0),
    ("throughput_series_bps", "throughput-cdf", "throughput per interval (Mbit/s)", 1 / plots.BPS_PER_MBIT),
)


def _pooled(runs: list[Run], metric: str, scale: float, label_of: Callable[[Run], str]) -> dict[str, np.ndarray]:
    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    for r in runs:
        values = samples(r.metrics, metric)
        if values.size:
            groups[label_of(r)].append(values * scale)
    return {label: np.concatenate(parts) for label, parts in groups.items()}


def cdf_section(runs: list[Run], facets: list[str], colors: dict[str, str], out: FigureWriter) -> Section | None:
    section = Section("cdfs", "Distributions per scheme",
                      notes=["Samples of every run of a scheme pooled, one panel per combination of the other "
                             "factors."])
    for metric, name, xlabel, scale in SERIES_CDFS:
        panels = []
        for facet in facets:
            pooled = _pooled([r for r in runs if r.facet == facet], metric, scale, lambda r: r.scheme)
            if pooled:
                panels.append(plots.Panel(title=facet if facet != "all" else xlabel, xlabel=xlabel, samples=pooled))
        for i, chunk in enumerate(plots.chunks(panels) if panels else []):
            section.figures.append(out.save(_chunk_name(name, i), f"CDF of {xlabel}", plots.cdfs(chunk, colors)))
    return section if section.figures else None


def sr_section(runs: list[Run], fixed: dict[str, Any], out: FigureWriter, probes_asked: bool = False) -> Section | None:
    """Only for runs that estimated the SR period: some run named one, or the campaign asked for SR probes
    (then a run without an estimate is a miss). A probe flow reports an SR regime on every run; a
    shoot-out whose flows named no period has nothing to score ("Correct: 0 of 14" read as a failure)."""
    probed = [r for r in runs if "sr_estimate_ms" in r.metrics or "sr_regime" in r.metrics]
    if not probed or not (probes_asked or any("sr_estimate_ms" in r.metrics for r in probed)):
        return None
    section = Section("sr", "SR-period estimation")
    matrix = sr_confusion(probed, fixed)
    if matrix:
        section.notes.append(f"Correct: {matrix.correct} of {matrix.total} runs "
                             f"({100 * matrix.correct / matrix.total:.0f} %).")
        if matrix.without_truth:
            section.notes.append(f"{matrix.without_truth} runs with an SR result have no known true period "
                                 "and are left out of the matrix.")
        rows = [[(t, "left")] + [(str(n), "hit" if matrix.estimate_labels[j] == t else "") for j, n
                                 in enumerate(matrix.counts[i])] for i, t in enumerate(matrix.true_labels)]
        section.tables.append(Table(["true \\ estimate (ms)", *matrix.estimate_labels], rows,
                                    caption="SR confusion matrix (runs)"))
        section.figures.append(out.save("sr-confusion", "SR confusion matrix",
                                        plots.confusion(matrix.counts, matrix.true_labels, matrix.estimate_labels)))
    regimes = [r for r in probed if "sr_regime" in r.metrics]
    if regimes:
        section.tables.append(_regime_table(regimes, fixed))
    return section


def _sr_probes_asked(campaign: dict[str, Any]) -> bool:
    workload = campaign.get("workload")
    return isinstance(workload, dict) and bool(workload.get("sr_probes"))


def _regime_table(runs: list[Run], fixed: dict[str, Any]) -> Table:
    names = sorted({str(r.metrics["sr_regime"]) for r in runs})
    by_truth: dict[str, Counter] = defaultdict(Counter)
    for r in runs:
        truth = _sr_label(r.metrics.get("sr_true_ms", _setting("sr_period_ms", r.factors, fixed)))
        by_truth[truth if truth != NO_ESTIMATE else "unknown"][str(r.metrics["sr_regime"])] += 1
    rows = [[(t, "left")] + [str(by_truth[t][n]) for n in names] + [str(sum(by_truth[t].values()))]
            for t in sorted(by_truth, key=_numeric_first)]
    total = Counter(str(r.metrics["sr_regime"]) for r in runs)
    rows.append([("all", "left")] + [str(total[n]) for n in names] + [str(len(runs))])
    return Table(["true SR period (ms)", *names, "runs"], rows, caption="SR regime per run")


NETWORK_DISTRIBUTIONS = (  # (metric, axis label, scale, per-run scalar rather than a series)
    ("throughput_series_bps", "throughput per interval (Mbit/s)", 1 / plots.BPS_PER_MBIT, False),
    ("rtt_series_ms", "RTT (ms)", 1.0, False),
    ("ack_gap_ms", "ACK gap (ms)", 1.0, False),
    ("sr_estimate_ms", "SR-period estimate (ms)", 1.0, True),
)


def network_section(runs: list[Run], order: ValueOrder, out: FigureWriter) -> Section | None:
    values = list(dict.fromkeys(str(r.factors["network"]) for r in
                                sorted((r for r in runs if "network" in r.factors),
                                       key=lambda r: order.key("network", r.factors["network"]))))
    if len(values) < 2:
        return None
    reference = values[0]
    panels, ks_rows = [], []
    for metric, xlabel, scale, per_run in NETWORK_DISTRIBUTIONS:
        by_network = _network_samples(runs, metric, scale, per_run)
        if not by_network:
            continue
        panels.append(plots.Panel(title=xlabel, xlabel=xlabel, samples=by_network))
        for other in values[1:]:
            if reference in by_network and other in by_network:
                d, p = ks_2samp(by_network[reference], by_network[other])
                ks_rows.append([(xlabel, "left"), (f"{reference} vs {other}", "left"), f"{d:.3f}", _fmt_p(p),
                                str(by_network[reference].size), str(by_network[other].size)])
    if not panels:
        return None
    section = Section("network", f"Network comparison: {' vs '.join(values)}",
                      notes=[f"Distributions per value of the factor network, side by side; Kolmogorov–Smirnov "
                             f"distance D (0 = same distribution, 1 = disjoint) between {reference} and each other "
                             "value, with its asymptotic p-value."])
    colors = plots.colors_for(values)
    for i, chunk in enumerate(plots.chunks(panels)):
        section.figures.append(out.save(_chunk_name("network-cdfs", i), "distributions per network",
                                        plots.cdfs(chunk, colors)))
    if ks_rows:
        section.tables.append(Table(["distribution", "pair", "KS D", "p-value", "n (first)", "n (second)"], ks_rows,
                                    caption="Two-sample Kolmogorov–Smirnov"))
    return section


def _network_samples(runs: list[Run], metric: str, scale: float, per_run: bool) -> dict[str, np.ndarray]:
    if not per_run:
        return _pooled([r for r in runs if "network" in r.factors], metric, scale, lambda r: str(r.factors["network"]))
    groups: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        if "network" in r.factors and _is_number(r.metrics.get(metric)):
            groups[str(r.factors["network"])].append(float(r.metrics[metric]) * scale)
    return {k: np.array(v) for k, v in groups.items()}


def _fmt_p(p: float) -> str:
    return f"{p:.3g}" if p >= 1e-4 else "< 1e-4"


def timeline_section(runs: list[Run], out: FigureWriter) -> Section | None:
    section = Section("timelines", "Timelines per run")
    saved = 0
    for r in runs:
        series = r.metrics.get("timeline")
        if not isinstance(series, dict):
            continue
        title = " · ".join([f"#{r.idx} {r.scheme}", *([r.facet] if r.facet != "all" else []),
                            f"repeat {r.repeat}", r.run_id])
        fig = plots.timeline(title, series)
        if fig is None:
            continue
        name = f"timeline-{r.idx:03d}-{r.run_id}"
        inline = saved < MAX_INLINE_TIMELINES
        figure = out.save(name, title, fig, inline=inline, dpi=TIMELINE_DPI)
        saved += 1
        if inline:
            section.figures.append(figure)
        else:
            section.links.append((f"report/{name}.png", f"{title} (PNG)"))
    if not saved:
        return None
    if section.links:
        section.notes.append(f"{len(section.links)} of {saved} timelines are not shown inline (at most "
                             f"{MAX_INLINE_TIMELINES}); they are saved next to this file:")
    return section


# --- run table ----------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _mbit(v: Any) -> str:
    return f"{v / plots.BPS_PER_MBIT:.2f}"


def _num(digits: int) -> Callable[[Any], str]:
    return lambda v: f"{v:.{digits}f}" if isinstance(v, float) else str(v)


TABLE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (  # (metric, header, format)
    ("throughput_bps", "throughput (Mbit/s)", _mbit),
    ("capacity_bps", "capacity (Mbit/s)", _mbit),
    ("utilization", "utilization", _num(2)),
    ("rtt_mean_ms", "RTT mean (ms)", _num(1)),
    ("rtt_p95_ms", "RTT p95 (ms)", _num(1)),
    ("sender_srtt_mean_ms", "sender sRTT (ms)", _num(1)),
    ("retransmits", "retransmits", _num(0)),
    ("fct_mean_s", "FCT mean (s)", _num(3)),
    ("jain_fairness", "Jain index", _num(3)),
    ("ues", "UEs", _num(0)),
    ("ue_fairness_jain", "Jain index over UEs", _num(3)),
    ("sr_true_ms", "SR true (ms)", _sr_label),
    ("sr_estimate_ms", "SR estimate (ms)", _sr_label),
    ("sr_regime", "SR regime", str),
    ("late_tti_pct", "late TTIs (%)", _num(2)),  # the virtual cell's; a run above retry.max_late_tti_fraction failed
)


def run_table(runs: list[Run], factor_names: list[str]) -> Table:
    columns = [c for c in TABLE_COLUMNS if any(c[0] in r.metrics for r in runs)]
    header = ["#", "run id", "repeat", "scheme", *factor_names, "status", *(c[1] for c in columns), "error"]
    rows = []
    for r in runs:
        cells: list[Any] = [str(r.idx), (r.run_id, "left"), str(r.repeat), (r.scheme, "left")]
        cells += [(str(r.factors.get(f, "")), "left") for f in factor_names]
        cells.append((r.status, f"left status-{r.status}"))
        cells += [fmt(r.metrics[m]) if r.metrics.get(m) is not None else "" for m, _, fmt in columns]
        cells.append((r.error or "", "left"))
        rows.append(cells)
    return Table(header, rows)


UE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("throughput_bps", "throughput (Mbit/s)", _mbit),
    ("capacity_bps", "its capacity (Mbit/s)", _mbit),
    ("rtt_mean_ms", "RTT mean (ms)", _num(1)),
    ("rtt_p95_ms", "RTT p95 (ms)", _num(1)),
    ("retransmits", "retransmits", _num(0)),
    ("fct_mean_s", "FCT mean (s)", _num(3)),
    ("congestion_control", "cc", str),
)


def ue_section(store: ResultStore, runs: list[Run]) -> Section | None:
    """Per-UE rows of the runs with several UEs: each UE's throughput and RTT, and the run's Jain index."""
    by_run = {r.run_id: r for r in runs}
    rows_by_run: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in store.ue_rows():
        rows_by_run[row["run_id"]].append(row)
    multi = {run_id: rows for run_id, rows in rows_by_run.items() if len(rows) > 1 and run_id in by_run}
    if not multi:
        return None
    metrics = [row["metrics"] or {} for rows in multi.values() for row in rows]
    columns = [c for c in UE_COLUMNS if any(c[0] in m for m in metrics)]
    header = ["#", "run id", "scheme", "UE", *(c[1] for c in columns), "Jain index over UEs"]
    table_rows = []
    for run_id, rows in sorted(multi.items(), key=lambda kv: by_run[kv[0]].idx):
        run = by_run[run_id]
        jain = run.metrics.get("ue_fairness_jain")
        for row in rows:
            m = row["metrics"] or {}
            cells: list[Any] = [str(run.idx), (run_id, "left"), (run.scheme, "left"), (row["ue"], "left")]
            cells += [fmt(m[k]) if m.get(k) is not None else "" for k, _, fmt in columns]
            cells.append(f"{jain:.3f}" if isinstance(jain, float) else "")
            table_rows.append(cells)
    return Section("ues", "UEs", notes=["One row per UE of each run with several UEs (results.sqlite table "
                                        "ue_runs); each UE's artifacts are in runs/<run id>/ues/<UE>/."],
                   tables=[Table(header, table_rows)])


# --- the page -----------------------------------------------------------------------------------
_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ name }} — cellab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } .left { text-align: left; }
td.hit { background: #dff0d8; font-weight: bold; }
.status-failed { background: #fde2e2; } .status-aborted, .status-running, .status-pending { background: #fff4d6; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; vertical-align: top; }
img { max-width: 100%; } figcaption { font-size: 0.85em; color: #555; }
</style></head><body>
<h1>{{ name }}</h1>
<p>Lab: <b>{{ lab }}</b> · runs: {{ counts }} · folder: <code>{{ folder }}</code></p>
{% if description %}<p>{{ description }}</p>{% endif %}
<nav>{% for s in sections %}<a href="#{{ s.id }}">{{ s.title }}</a>{% endfor %}</nav>
{% if not has_plots %}<p>No plots: no finished run has the metrics they need yet.</p>{% endif %}
{% macro table(t) %}<table>{% if t.caption %}<caption>{{ t.caption }}</caption>{% endif %}
<tr>{% for h in t.header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for c in row %}{% if c is string %}<td>{{ c }}</td>{% else %}<td class="{{ c[1] }}">{{ c[0] }}</td>{% endif %}{% endfor %}</tr>
{% endfor %}</table>{% endmacro %}
{% for s in sections %}<section id="{{ s.id }}"><h2>{{ s.title }}</h2>
{% for n in s.notes %}<p>{{ n }}</p>{% endfor %}
{% for l in s.links %}{% if loop.first %}<ul>{% endif %}<li><a href="{{ l[0] }}">{{ l[1] }}</a></li>{% if loop.last %}</ul>{% endif %}{% endfor %}
{% for t in s.tables %}{{ table(t) }}{% endfor %}
{% for f in s.figures %}<figure><img alt="{{ f.title }}" src="data:image/png;base64,{{ f.png_b64 }}">
<figcaption>{{ f.title }} · <a href="report/{{ f.name }}.png">PNG</a> · <a href="report/{{ f.name }}.svg">SVG</a></figcaption></figure>
{% endfor %}</section>
{% endfor %}
</body></html>
"""


def _clear_old_figures(plot_dir: Path) -> None:
    """A rebuild must not leave figures of runs or sections that no longer exist."""
    for old in [*plot_dir.glob("*.png"), *plot_dir.glob("*.svg")]:
        old.unlink(missing_ok=True)


def write_report(result_dir: Path) -> Path:
    store = ResultStore.open(Path(result_dir))
    campaign = read_yaml(store.campaign_path()) or {}  # ResultStore.open checked it is a mapping
    campaign_factors = campaign.get("factors") or {}
    fixed = campaign.get("fixed") or {}
    runs = _load_runs(store, campaign)
    factor_names = list(dict.fromkeys([*campaign_factors, *sorted({f for r in runs for f in r.factors})]))
    order = ValueOrder(campaign_factors)
    done = [r for r in runs if r.ok]
    facet_names = _assign_facets(done, factor_names)
    facets = _facet_order(done, order, facet_names)
    colors = plots.colors_for(_scheme_order(done, order))

    plot_dir = store.root / "report"
    plot_dir.mkdir(exist_ok=True)
    _clear_old_figures(plot_dir)
    out = FigureWriter(plot_dir)
    plotted = [throughput_delay_section(done, facets, colors, out), cdf_section(done, facets, colors, out),
               sr_section(done, fixed, out, _sr_probes_asked(campaign)), network_section(done, order, out)]
    queues = sorted({str(r.params["rlc_queue"]) for r in store.planned() if "rlc_queue" in r.params})  # with defaults
    runs_section = Section("runs", "Runs", notes=[f"Downlink queue (rlc_queue): {', '.join(queues)}."] if queues else [],
                           tables=[run_table(runs, [f for f in factor_names if f != "scheme"])])
    sections = [s for s in [*plotted, runs_section, ue_section(store, done), timeline_section(done, out)]
                if s is not None]

    counts = Counter(r.status for r in runs)
    env = Environment(autoescape=select_autoescape(default=True, default_for_string=True))
    page = env.from_string(_TEMPLATE).render(
        name=campaign.get("name", store.root.name), lab=campaign.get("lab", "virtual"),
        description=campaign.get("description", ""), folder=str(store.root),
        counts=", ".join(f"{k} {v}" for k, v in sorted(counts.items())), sections=sections,
        has_plots=any(s.figures for s in sections))
    path = store.root / "report.html"
    write_atomic(path, page)
    summary = [{"run_id": r.run_id, "status": r.status, "scheme": r.scheme, "factors": r.factors,
                "metrics": scalar_metrics(r.metrics)} for r in runs]
    write_atomic(plot_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    return path


__all__ = ["kolmogorov_sf", "ks_2samp", "scheme_label", "sr_confusion", "write_report"]
