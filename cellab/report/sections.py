"""The report's figure sections: throughput vs delay, CDFs, SR estimation, the network comparison, timelines.

Each builder returns a Section (or None when its data does not exist) and asks the FigureSet for its figures;
they are drawn later, all together. Inside a section, a facet without data gets a panel that says so.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from cellab.report import plots
from cellab.report.faults import fault_marks
from cellab.report.figures import FigureSet
from cellab.report.timeline import MAX_LINE_POINTS, timeline_data, timeline_limits
from cellab.report.model import Run, Section, Table, ValueOrder, is_number, samples
from cellab.report.sr_scores import sr_confusion, sr_probed, sr_truth
from cellab.report.stats import (NO_ESTIMATE, Confusion, fmt_accuracy, fmt_p, ks_2samp,
                                 numeric_first, sr_label, wilson)

MAX_INLINE_TIMELINES = 40  # more would make the HTML heavy; the rest are linked files
TIMELINE_DPI = 80  # noisy per-run series compress badly: smaller PNGs keep a 40-timeline page near 4 MB


def chunk_name(base: str, i: int) -> str:
    return base if i == 0 else f"{base}-{i + 1}"


def _facet_title(facet: str, default: str) -> str:
    return facet if facet != "all" else default


# --- throughput vs delay ------------------------------------------------------------------------
def scatter_panels(runs: list[Run], facets: list[str]) -> list[plots.Panel]:
    """One panel per facet with the runs that have both throughput and p95 delay; a facet without such a
    run gets an empty panel that says so (none at all: no panels)."""
    panels = []
    for facet in facets:
        points = [plots.ScatterPoint(r.scheme, float(r.metrics["rtt_p95_ms"]), float(r.metrics["throughput_bps"]))
                  for r in runs if r.facet == facet and is_number(r.metrics.get("rtt_p95_ms"))
                  and is_number(r.metrics.get("throughput_bps"))]
        panels.append(plots.Panel(title=_facet_title(facet, "all runs"), points=points,
                                  note="no finished run here has both throughput and p95 RTT"))
    return panels if any(p.points for p in panels) else []


def throughput_delay_section(runs: list[Run], facets: list[str], colors: dict[str, str],
                             figures: FigureSet) -> Section | None:
    panels = scatter_panels(runs, facets)
    if not panels:
        return None
    section = Section("throughput-delay", "Throughput vs 95th-percentile delay",
                      notes=["One small marker per run, the big marker is the scheme's mean. The delay axis is "
                             "inverted (Pantheon style): better is up and to the right. All panels share both axes, "
                             "from zero."])
    empty = [p.title for p in panels if not p.points]
    if empty:
        section.notes.append(f"No data for {', '.join(empty)}: no finished run there has both metrics.")
    for i, chunk in enumerate(plots.chunks(panels)):
        section.figures.append(figures.add(chunk_name("throughput-vs-delay", i), "throughput vs p95 delay",
                                           "throughput_delay", chunk, colors))
    return section


# --- CDFs ---------------------------------------------------------------------------------------
SERIES_CDFS = (  # (metric, figure name, axis label, scale to the axis unit, axis from zero)
    ("rtt_series_ms", "rtt-cdf", "RTT (ms)", 1.0, False),
    ("throughput_series_bps", "throughput-cdf", "throughput per interval (Mbit/s)", 1 / plots.BPS_PER_MBIT, True),
)


def pooled(runs: list[Run], metric: str, scale: float, label_of: Callable[[Run], str]) -> dict[str, np.ndarray]:
    groups: dict[str, list[np.ndarray]] = defaultdict(list)
    for r in runs:
        values = samples(r.metrics, metric)
        if values.size:
            groups[label_of(r)].append(values * scale)
    return {label: np.concatenate(parts) for label, parts in groups.items()}


def cdf_section(runs: list[Run], facets: list[str], colors: dict[str, str], figures: FigureSet) -> Section | None:
    section = Section("cdfs", "Distributions per scheme",
                      notes=["Samples of every run of a scheme pooled, one panel per combination of the other "
                             "factors; the panels of one figure share their axes (throughput from zero)."])
    for metric, name, xlabel, scale, zero_based in SERIES_CDFS:
        panels = []
        for facet in facets:
            samples_by_scheme = pooled([r for r in runs if r.facet == facet], metric, scale, lambda r: r.scheme)
            panels.append(plots.Panel(title=_facet_title(facet, xlabel), xlabel=xlabel, samples=samples_by_scheme,
                                      note="no samples here", zero_based=zero_based))
        if not any(p.samples for p in panels):
            continue
        empty = [p.title for p in panels if not p.samples]
        if empty:
            section.notes.append(f"{xlabel}: no samples for {', '.join(empty)}.")
        for i, chunk in enumerate(plots.chunks(panels)):
            section.figures.append(figures.add(chunk_name(name, i), f"CDF of {xlabel}", "cdfs", chunk, colors))
    return section if section.figures else None


# --- SR estimation --------------------------------------------------------------------------------
def sr_section(runs: list[Run], fixed: dict[str, Any], figures: FigureSet, probes_asked: bool = False,
               order: ValueOrder | None = None, varied: list[str] | None = None) -> Section | None:
    probed = sr_probed(runs, probes_asked)
    if not probed:
        return None
    section = Section("sr", "SR-period estimation")
    matrix = sr_confusion(probed, fixed)
    if matrix:
        overall = wilson(matrix.correct, matrix.total)
        section.notes.append(f"Correct: {matrix.correct} of {matrix.total} runs "
                             f"({100 * matrix.correct / matrix.total:.0f} %); 95 % Wilson interval "
                             f"{100 * overall.low:.0f}–{100 * overall.high:.0f} %.")
        clocks = Counter(str(r.metrics.get("sr_clock")) for r in probed if r.metrics.get("sr_clock"))
        if clocks:  # the stack's own TTIs (srsran-zmq's broker clock) or the wall clock (a stack at real time)
            section.notes.append("Estimates read on: " + ", ".join(f"the {k} clock in {n} run{'s' if n != 1 else ''}"
                                                                  for k, n in sorted(clocks.items())) + ".")
        if matrix.without_truth:
            section.notes.append(f"{matrix.without_truth} runs with an SR result have no known true period "
                                 "and are left out of the matrix.")
        section.tables.append(_accuracy_table(matrix, probed, fixed, order or ValueOrder({}), varied or []))
        rows = [[(t, "left")] + [(str(n), "hit" if matrix.estimate_labels[j] == t else "") for j, n
                                 in enumerate(matrix.counts[i])] for i, t in enumerate(matrix.true_labels)]
        section.tables.append(Table(["true \\ estimate (ms)", *matrix.estimate_labels], rows,
                                    caption="SR confusion matrix (runs)"))
        section.figures.append(figures.add("sr-confusion", "SR confusion matrix", "confusion", matrix.counts,
                                           matrix.true_labels, matrix.estimate_labels))
    regimes = [r for r in probed if "sr_regime" in r.metrics]
    if regimes:
        section.tables.append(_regime_table(regimes, fixed))
    return section


def _accuracy_table(matrix: Confusion, runs: list[Run], fixed: dict[str, Any], order: ValueOrder,
                    varied: list[str]) -> Table:
    """Accuracy with its Wilson interval: per true period, then per level of each other varied factor."""
    rows: list[list[Any]] = [[("true SR period", "left"), (f"{t} ms", "left"), fmt_accuracy(matrix.row_accuracy(t))]
                             for t in matrix.true_labels]
    scored = [(r, sr_label(sr_truth(r, fixed)), sr_label(r.metrics.get("sr_estimate_ms"))) for r in runs
              if sr_truth(r, fixed) is not None]
    for name in [f for f in varied if f != "sr_period_ms"]:
        for level in order.levels(name, [r for r, _, _ in scored]):
            hits = [t == e for r, t, e in scored if str(r.factors.get(name)) == level]
            rows.append([(name, "left"), (level, "left"), fmt_accuracy(wilson(sum(hits), len(hits)))])
    rows.append([("all runs", "left"), ("", "left"), fmt_accuracy(wilson(matrix.correct, matrix.total))])
    return Table(["by", "level", "correct of runs (share) [95 % Wilson interval]"], rows,
                 caption="SR-estimate accuracy")


def _regime_table(runs: list[Run], fixed: dict[str, Any]) -> Table:
    names = sorted({str(r.metrics["sr_regime"]) for r in runs})
    by_truth: dict[str, Counter] = defaultdict(Counter)
    for r in runs:
        truth = sr_label(sr_truth(r, fixed))
        by_truth[truth if truth != NO_ESTIMATE else "unknown"][str(r.metrics["sr_regime"])] += 1
    rows = [[(t, "left")] + [str(by_truth[t][n]) for n in names] + [str(sum(by_truth[t].values()))]
            for t in sorted(by_truth, key=numeric_first)]
    total = Counter(str(r.metrics["sr_regime"]) for r in runs)
    rows.append([("all", "left")] + [str(total[n]) for n in names] + [str(len(runs))])
    return Table(["true SR period (ms)", *names, "runs"], rows, caption="SR regime per run")


# --- lab vs commercial ----------------------------------------------------------------------------
NETWORK_DISTRIBUTIONS = (  # (metric, axis label, scale, per-run scalar rather than a series, axis from zero)
    ("throughput_series_bps", "throughput per interval (Mbit/s)", 1 / plots.BPS_PER_MBIT, False, True),
    ("rtt_series_ms", "RTT (ms)", 1.0, False, False),
    ("ack_gap_ms", "ACK gap (ms)", 1.0, False, False),
    ("sr_estimate_ms", "SR-period estimate (ms)", 1.0, True, False),
)


def network_section(runs: list[Run], order: ValueOrder, figures: FigureSet) -> Section | None:
    values = order.levels("network", runs)
    if len(values) < 2:
        return None
    reference = values[0]
    panels, ks_rows = [], []
    for metric, xlabel, scale, per_run, zero_based in NETWORK_DISTRIBUTIONS:
        by_network = _network_samples(runs, metric, scale, per_run)
        if not by_network:
            continue
        lacking = [v for v in values if v not in by_network]
        panels.append(plots.Panel(title=xlabel + (f" (no samples: {', '.join(lacking)})" if lacking else ""),
                                  xlabel=xlabel, samples=by_network, zero_based=zero_based))
        for other in values[1:]:
            if reference in by_network and other in by_network:
                d, p = ks_2samp(by_network[reference], by_network[other])
                ks_rows.append([(xlabel, "left"), (f"{reference} vs {other}", "left"), f"{d:.3f}", fmt_p(p),
                                str(by_network[reference].size), str(by_network[other].size)])
            else:
                ks_rows.append([(xlabel, "left"), (f"{reference} vs {other}", "left"), "no samples", "", 
                                str(by_network.get(reference, np.empty(0)).size),
                                str(by_network.get(other, np.empty(0)).size)])
    if not panels:
        return None
    section = Section("network", f"Network comparison: {' vs '.join(values)}",
                      notes=[f"Distributions per value of the factor network, side by side; Kolmogorov–Smirnov "
                             f"distance D (0 = same distribution, 1 = disjoint) between {reference} and each other "
                             "value, with its p-value (scipy.stats.ks_2samp). Samples within a run are not "
                             "independent: read p as a guide, D as the effect."])
    colors = plots.colors_for(values)
    for i, chunk in enumerate(plots.chunks(panels)):
        section.figures.append(figures.add(chunk_name("network-cdfs", i), "distributions per network", "cdfs",
                                           chunk, colors, share_x=False))
    if ks_rows:
        section.tables.append(Table(["distribution", "pair", "KS D", "p-value", "n (first)", "n (second)"], ks_rows,
                                    caption="Two-sample Kolmogorov–Smirnov"))
    return section


def _network_samples(runs: list[Run], metric: str, scale: float, per_run: bool) -> dict[str, np.ndarray]:
    if not per_run:
        return pooled([r for r in runs if "network" in r.factors], metric, scale, lambda r: str(r.factors["network"]))
    groups: dict[str, list[float]] = defaultdict(list)
    for r in runs:
        if "network" in r.factors and is_number(r.metrics.get(metric)):
            groups[str(r.factors["network"])].append(float(r.metrics[metric]) * scale)
    return {k: np.array(v) for k, v in groups.items()}


# --- timelines ------------------------------------------------------------------------------------
def timeline_section(runs: list[Run], figures: FigureSet, max_inline: int = MAX_INLINE_TIMELINES) -> Section | None:
    section = Section("timelines", "Timelines per run")
    datas = {r.run_id: timeline_data(r.metrics.get("timeline"), faults=fault_marks(r)) for r in runs}
    limits = timeline_limits([d for d in datas.values() if d is not None])
    saved, without = 0, []
    for r in runs:
        data = datas[r.run_id]
        if data is None:
            without.append(f"#{r.idx}")
            continue
        title = " · ".join([f"#{r.idx} {r.scheme}", *([r.facet] if r.facet != "all" else []),
                            f"repeat {r.repeat}", r.run_id, *([f"flagged: {', '.join(r.flags)}"] if r.flags else [])])
        name = f"timeline-{r.idx:03d}-{r.run_id}"
        inline = saved < max_inline
        figure = figures.add(name, title, "timeline", title, data, limits, inline=inline, dpi=TIMELINE_DPI)
        saved += 1
        if inline:
            section.figures.append(figure)
        else:
            section.links.append((f"report/{name}.png", f"{title} (PNG)"))
    if not saved:
        return None
    if any(d is not None and d.faults for d in datas.values()):
        section.notes.append("Faults: shaded from their start to their end as the lab recorded them; dashed green: "
                             "the UE re-attached (the cell's event); dotted: throughput back to 90 % of its "
                             "pre-fault level.")
    section.notes.append("Every timeline on the same axes (time, rates and RTT from zero): runs compare at a glance. "
                         "Throughput and capacity in Mbit/s, RTT in ms; long series are thinned to "
                         f"{MAX_LINE_POINTS} points keeping each interval's extremes.")
    if without:
        section.notes.append(f"No timeline data for {len(without)} finished run(s): {', '.join(without[:20])}"
                             + (" ..." if len(without) > 20 else "") + ".")
    if section.links:
        section.notes.append(f"{len(section.links)} of {saved} timelines are not shown inline (at most "
                             f"{max_inline}); they are saved next to this file:")
    return section


__all__ = ["cdf_section", "network_section", "scatter_panels", "sr_confusion", "sr_probed", "sr_section",
           "throughput_delay_section", "timeline_section"]
