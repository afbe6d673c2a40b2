"""The report's faults section (issue 28): a row per fault of every faulted run — when it started and ended, the
radio link failure and the re-attach (from the lab's own events), when throughput came back to 90 % of its
pre-fault level, the longest stall, the bytes the lab dropped — and a summary per scheme and fault plan
(medians over repeats). The timelines mark each fault (report_timeline)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np

from cellab.report.figures import FigureSet
from cellab.report.model import Run, Section, Table, ValueOrder, is_number
from cellab.report.stats import fmt_number

FAULT_FACTOR = "faults"


def _s(value: Any, digits: int = 2) -> str:
    return fmt_number(float(value), digits) if is_number(value) else "–"


def _kb(value: Any) -> str:
    return fmt_number(float(value) / 1000, 1) if is_number(value) else "–"


def fault_rows(run: Run) -> list[dict[str, Any]]:
    rows = run.metrics.get("faults")
    return [r for r in rows if isinstance(r, dict)] if isinstance(rows, list) else []


def _plan(run: Run) -> str:
    return str(run.factors.get(FAULT_FACTOR, run.params.get(FAULT_FACTOR, "none")))


def fault_section(runs: list[Run], all_runs: list[Run], order: ValueOrder, figures: FigureSet | None = None
                  ) -> Section | None:
    """None when no run had faults. With `figures`: each UE's outage and return on one time axis (fault_plot)."""
    faulted = [r for r in runs if fault_rows(r)]
    failed = [r for r in all_runs if not r.ok and _plan(r) != "none" and FAULT_FACTOR in r.factors]
    if not faulted and not failed:
        return None
    section = Section("faults", "Faults and recovery")
    section.notes.append(
        "Times in seconds from the workload's start, measured from the lab's own records (the virtual cell's RRC "
        "events and TTI log; 'from' says when they came from the injector's replies instead). RLF: the UE's radio "
        "link failure (T310 expired); re-attach: re-establishment or a new connection completed; throughput back: "
        "the first 100 ms after the fault's end from which 300 ms carry 90 % of the pre-fault rate (the mean over "
        "the second before the fault); recovery = throughput back − fault end; stall: the longest time without a "
        "downlink byte delivered to the UE from the fault's start; lost: bytes the cell dropped from the fault's "
        "start until throughput was back (S1 cut, RLC flush, queue full).")
    summary = _summary(faulted, order)
    if summary is not None:
        section.tables.append(summary)
    header = ["#", "scheme", "plan", "fault", "UE", "start", "end", "from", "RLF", "re-attach (by)",
              "re-attach − end", "throughput back", "recovery", "stall", "lost (kB)", "retransmits"]
    rows = []
    for run in sorted(faulted, key=lambda r: (order.key(FAULT_FACTOR, _plan(r)), r.scheme, r.idx)):
        for row in fault_rows(run):
            fault = f"{row.get('kind')} {_s(row.get('planned_at_s'), 1)}+{_s(row.get('planned_duration_s'), 1)} s"
            others = [o for o in row.get("other_ues") or [] if isinstance(o, dict)]
            for ue_row in [row, *others]:  # a fault of the whole cell: a line per UE
                reattach = _s(ue_row.get("reattach_s"))
                if ue_row.get("reattach_by"):
                    reattach += f" ({ue_row['reattach_by']})"
                rows.append([str(run.idx), run.scheme, _plan(run), fault if ue_row is row else "″",
                             str(ue_row.get("ue", "")), _s(row.get("start_s")), _s(row.get("end_s")),
                             str(row.get("times_from", "")), _s(ue_row.get("rlf_s")), reattach,
                             _s(ue_row.get("reattach_after_end_s")), _s(ue_row.get("throughput_back_s")),
                             _s(ue_row.get("recovery_s")), _s(ue_row.get("longest_stall_s")),
                             _kb(ue_row.get("lost_bytes")), _s(run.metrics.get("retransmits"), 0)])
    timelines = [(f"#{r.idx} {r.scheme} {_plan(r)}", r.metrics["fault_events"]) for r in faulted
                 if isinstance(r.metrics.get("fault_events"), list) and r.metrics["fault_events"]]
    if figures is not None and timelines:
        section.figures.append(figures.add("fault-outages", "each UE's outage and return", "outages",
                                           sorted(timelines, key=lambda t: t[0])))
    if rows:
        section.tables.append(Table(header, rows, "Every fault of every finished run, a line per UE it hit (a "
                                                  "fault of the eNB, S1, SGi or core hits every UE; retransmits: "
                                                  "the run's, from the server's capture)"))
    if failed:
        section.notes.append("Faulted runs that failed (a fault the lab did not recover from within the run fails "
                             "it, with the measured state): " + "; ".join(
                                 f"#{r.idx} {r.scheme} {_plan(r)}: {r.error}" for r in failed[:10]))
    return section


def _summary(runs: list[Run], order: ValueOrder) -> Table | None:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for run in runs:
        for row in fault_rows(run):
            groups[(_plan(run), run.scheme)].append(row)
    if not groups:
        return None

    def median(rows: list[dict[str, Any]], key: str, kb: bool = False) -> str:
        values = [float(r[key]) for r in rows if is_number(r.get(key))]
        if not values:
            return "–"
        return _kb(float(np.median(values))) if kb else _s(float(np.median(values)))

    header = ["plan", "scheme", "faults", "with RLF", "re-attach − end", "recovery", "disruption", "stall",
              "lost (kB)"]
    rows = []
    for (plan, scheme), items in sorted(groups.items(), key=lambda kv: (order.key(FAULT_FACTOR, kv[0][0]),
                                                                         kv[0][1])):
        rows.append([plan, scheme, str(len(items)), str(sum(1 for r in items if is_number(r.get("rlf_s")))),
                     median(items, "reattach_after_end_s"), median(items, "recovery_s"),
                     median(items, "disruption_s"), median(items, "longest_stall_s"),
                     median(items, "lost_bytes", kb=True)])
    return Table(header, rows, "Recovery per fault plan and scheme (medians over its faults; seconds)")


def fault_marks(run: Run) -> list[tuple[float, float, float | None, float | None]]:
    """(start, end, re-attach, throughput back) per fault, for the run's timeline."""
    marks = []
    for row in fault_rows(run):
        start, end = row.get("start_s"), row.get("end_s")
        if is_number(start):
            marks.append((float(start), float(end) if is_number(end) else float(start),
                          float(row["reattach_s"]) if is_number(row.get("reattach_s")) else None,
                          float(row["throughput_back_s"]) if is_number(row.get("throughput_back_s")) else None))
    return marks


__all__ = ["fault_marks", "fault_rows", "fault_section"]
