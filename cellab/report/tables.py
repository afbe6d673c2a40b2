"""The report's table sections: comparisons against a baseline, the conditions, the runs, the UEs.

Comparisons: for each factor the campaign varies, each level against the factor's first level (the baseline):
the ratio of medians over runs of throughput and of p95 RTT, with a 95 % bootstrap interval and a Mann–Whitney
U p-value. Conditions: what was held fixed (with units), the workload, which RTT the report shows and how it
was sampled.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from typing import Any

from cellab.report.model import BPS_PER_MBIT, Run, Section, Table, ValueOrder, is_number, samples
from cellab.report.stats import fmt_number, fmt_p, fmt_ratio, sr_label
from cellab.report.strata import few_runs_note
from cellab.results.ratios import MIN_RUNS, Ratio, ratio_of_medians
from cellab.results.store_check import UERow

COMPARED = (  # (metric, what, unit, scale to the unit)
    ("throughput_bps", "throughput", "Mbit/s", 1 / BPS_PER_MBIT),
    ("rtt_p95_ms", "p95 RTT", "ms", 1.0),
)


def varied_factors(campaign_factors: dict[str, Any]) -> list[str]:
    """The factors the campaign lists with two or more levels, in its order."""
    return [name for name, levels in campaign_factors.items() if isinstance(levels, list | dict) and len(levels) > 1]


def _values(runs: list[Run], metric: str) -> list[float]:
    return [float(r.metrics[metric]) for r in runs if is_number(r.metrics.get(metric))]


def comparisons(runs: list[Run], campaign_factors: dict[str, Any], order: ValueOrder) -> list[dict[str, Any]]:
    """One entry per varied factor and non-baseline level: its ratios against the baseline level."""
    out = []
    for name in varied_factors(campaign_factors):
        listed = list(order.listed.get(name) or [])
        levels = listed + [v for v in order.levels(name, runs) if v not in listed]
        baseline = levels[0]
        base_runs = [r for r in runs if name in r.factors and str(r.factors[name]) == baseline]
        for level in levels[1:]:
            level_runs = [r for r in runs if name in r.factors and str(r.factors[name]) == level]
            entry: dict[str, Any] = {"factor": name, "level": level, "baseline": baseline,
                                     "runs_level": len(level_runs), "runs_baseline": len(base_runs)}
            for metric, _, _, _ in COMPARED:
                entry[metric] = ratio_of_medians(_values(base_runs, metric), _values(level_runs, metric))
            out.append(entry)
    return out


def _median_cell(r: Ratio, scale: float, digits: int) -> str:
    def one(v: float | None) -> str:
        return fmt_number(v * scale, digits) if v is not None else "–"
    return f"{one(r.median_level)} / {one(r.median_base)}"


def comparison_section(runs: list[Run], campaign_factors: dict[str, Any], order: ValueOrder
                       ) -> tuple[Section | None, list[dict[str, Any]]]:
    """The comparison table (and its entries for comparisons.json); None without throughput or RTT data."""
    if not any(is_number(r.metrics.get(m)) for r in runs for m, _, _, _ in COMPARED):
        return None, []
    entries = comparisons(runs, campaign_factors, order)
    section = Section("comparisons", "Comparisons against the baseline")
    if not entries:
        section.notes.append("The campaign varies no factor: there is nothing to compare; the medians over its "
                             f"{len(runs)} finished runs are below.")
        rows = [[(what, "left"), f"{fmt_number(float(_median(_values(runs, m))) * scale, 2)} {unit}"
                 if _values(runs, m) else "no data", str(len(_values(runs, m)))] for m, what, unit, scale in COMPARED]
        section.tables.append(Table(["metric", "median over runs", "runs"], rows))
        return section, []
    section.notes.append(
        "Each level of a varied factor against the factor's first level in the campaign (the baseline), pooled "
        "over the other factors' levels. Ratio: median over runs of the level ÷ that of the baseline (throughput: "
        "above 1 is faster; p95 RTT: below 1 is less delay), with its 95 % bootstrap interval (percentile, "
        f"fixed seed); p: two-sided Mann–Whitney U over the runs. Fewer than {MIN_RUNS} runs on a side: too few "
        "runs for an interval.")
    header = ["factor", "level vs baseline", "runs (level / baseline)"]
    for _, what, unit, _ in COMPARED:
        header += [f"{what} median ({unit}, level / baseline)", f"{what} ratio [95 % CI]", f"{what} p"]
    rows = []
    for e in entries:
        cells: list[Any] = [(e["factor"], "left"), (f"{e['level']} vs {e['baseline']}", "left"),
                            f"{e['runs_level']} / {e['runs_baseline']}"]
        for metric, _, unit, scale in COMPARED:
            r: Ratio = e[metric]
            cells += [_median_cell(r, scale, 2 if unit == "Mbit/s" else 1), (fmt_ratio(r), "left nowrap"),
                      fmt_p(r.p_value)]
        rows.append(cells)
    varied = varied_factors(campaign_factors)
    pooled_over = {e["factor"]: [f for f in varied if f != e["factor"]] for e in entries}
    caption = ""
    if any(pooled_over.values()):
        caption = ("Pooled: each factor's levels over every level of the other varied factors ("
                   + "; ".join(f"{f} pooled over {', '.join(o)}" for f, o in pooled_over.items() if o)
                   + "); within each level: the section \"Comparisons within each level of the other factors\"")
    section.tables.append(Table(header, rows, caption=caption))
    note = few_runs_note([(e["runs_level"], e["runs_baseline"]) for e in entries])
    if note:
        section.notes.append(note)
    return section, [{**e, "pooled_over": pooled_over[e["factor"]], **{m: e[m].as_dict() for m, _, _, _ in COMPARED}}
                     for e in entries]


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# --- conditions -----------------------------------------------------------------------------------
UNITS = {"n_prb": "PRB", "ul_prb": "PRB", "rlc_queue_sdus": "SDUs", "harq_max_tx": "transmissions",
         "n_ues": "UEs", "ues": "UEs", "flows": "flows"}
SUFFIX_UNITS = (("_ms", "ms"), ("_s", "s"), ("_db", "dB"), ("_dbm", "dBm"), ("_bytes", "bytes"),
                ("_mbit", "Mbit/s"), ("_bps", "bit/s"), ("_hz", "Hz"), ("_pct", "%"))
QUEUE_MODELS = {"srsenb": "srsenb's own queue: SDU limit and PDCP discard", "srsue": "srsue's own queue"}


def with_unit(name: str, value: Any) -> str:
    """A parameter value with its unit: 4194304 -> "4194304 bytes (4 MiB)", 20 -> "20 ms"."""
    if name in ("rlc_queue", "ul_queue"):
        if is_number(value):
            return f"{value} bytes ({value / 2**20:.3g} MiB)" if value >= 2**20 else f"{value} bytes"
        return f"{value} ({QUEUE_MODELS[value]})" if isinstance(value, str) and value in QUEUE_MODELS else str(value)
    unit = UNITS.get(name) or next((u for suffix, u in SUFFIX_UNITS if name.endswith(suffix)), "")
    if isinstance(value, bool) or not unit or not (is_number(value) or isinstance(value, list)):
        return str(value)
    return f"{', '.join(str(v) for v in value) if isinstance(value, list) else value} {unit}"


RTT_SOURCES = {
    "sender tcp_info": "the sender's TCP_INFO RTT (cellab-send samples every 10 ms, queueing included)",
    "pcap": "data→ACK pairs in the server's capture",
    "receiver": "the receiver's (cellab-probe's) RTT estimate",
    "ping": "ping alongside the transfer",
}


def conditions_section(campaign: dict[str, Any], runs: list[Run], planned_params: list[dict[str, Any]],
                       order: ValueOrder) -> Section:
    fixed = campaign.get("fixed") or {}
    workload = campaign.get("workload") or {}
    factors = campaign.get("factors") or {}
    items: list[tuple[str, str]] = [("lab", str(campaign.get("lab", "virtual")))]
    varied = varied_factors(factors)
    if varied:
        items.append(("varied", "; ".join(
            f"{name}: {', '.join(order.listed.get(name, []))} (baseline {order.listed[name][0]})" for name in varied)))
    single = {name: levels for name, levels in factors.items() if name not in varied and isinstance(levels, list)
              and levels}
    held = {**{k: v[0] for k, v in single.items()}, **fixed}
    if held:
        items.append(("fixed", "; ".join(f"{k} = {with_unit(k, v)}" for k, v in held.items())))
    items.append(("repeats", f"{campaign.get('repeat', 1)} per combination"))
    items.append(("workload", _workload_text(workload)))
    items.append(("throughput", "received payload rate over the whole run (throughput_bps, Mbit/s); "
                                + _cdf_text(runs, workload)))
    items.append(("RTT shown", _rtt_text(runs, workload)))
    queues = sorted({str(with_unit("rlc_queue", p["rlc_queue"])) for p in planned_params if "rlc_queue" in p})
    if queues:
        items.append(("downlink queue", f"Downlink queue (rlc_queue): {', '.join(queues)}."))
    return Section("conditions", "Conditions", items=items)


def _cdf_text(runs: list[Run], workload: dict[str, Any]) -> str:
    """What the CDFs of the distributions section are drawn from, or why there are none (the section draws the
    runs' own per-interval series; a run with several UEs keeps them per UE, in ues/<ue>/metrics.json)."""
    if not any(samples(r.metrics, "throughput_series_bps").size for r in runs):
        return ("no throughput CDF: no run keeps a per-interval series of its own (a run with several UEs keeps "
                "each UE's in ues/<ue>/metrics.json)")
    return "CDFs use " + ("1 s iperf3 intervals" if workload.get("tool", "iperf3") == "iperf3"
                          else "0.1 s intervals of the received bytes")


def _workload_text(workload: dict[str, Any]) -> str:
    tool = workload.get("tool", "iperf3")
    parts = [f"{tool} {workload.get('kind', 'download')}"]
    if is_number(workload.get("duration_s", 10.0)):
        parts.append(f"{workload.get('duration_s', 10.0):g} s")
    parts.append(f"{workload.get('flows', 1)} flow(s)")
    if workload.get("size_bytes") is not None:
        parts.append(f"sized flows: {workload['size_bytes']} bytes")
    if workload.get("sr_probes"):
        parts.append(f"{workload['sr_probes']} idle-uplink SR probes first")
    ping = workload.get("ping_interval_ms", 200.0)
    parts.append(f"ping every {ping:g} ms" if is_number(ping) else "no ping")
    return ", ".join(parts)


def _rtt_text(runs: list[Run], workload: dict[str, Any]) -> str:
    unnamed = "ping" if workload.get("tool", "iperf3") == "iperf3" else "a source the runs do not name"
    sources = sorted({str(r.metrics.get("rtt_source") or unnamed) for r in runs if "rtt_p95_ms" in r.metrics})
    if not sources:
        return "no run has RTT samples"
    ping = workload.get("ping_interval_ms", 200.0)
    described = [RTT_SOURCES.get(s, s) + (f", every {ping:g} ms" if s == "ping" and is_number(ping) else "")
                 for s in sources]
    return ("p95 RTT per run (rtt_p95_ms) = the 95th percentile of " + "; or ".join(described)
            + (f" (sources differ between runs: {', '.join(sources)})" if len(sources) > 1 else ""))


# --- runs and UEs -----------------------------------------------------------------------------------
def _mbit(v: Any) -> str:
    return f"{v / BPS_PER_MBIT:.2f}"


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
    ("sr_true_ms", "SR true (ms)", sr_label),
    ("sr_estimate_ms", "SR estimate (ms)", sr_label),
    ("sr_regime", "SR regime", str),
    ("late_tti_pct", "late TTIs (%)", _num(2)),  # the virtual cell's; a run above retry.max_late_tti_fraction failed
    ("late_tti_max_ms", "worst TTI lateness (ms)", _num(1)),
    ("stack_speed", "stack speed", _num(2)),  # srsran-zmq: its own clock's TTIs per wall ms (recorded, not judged)
)


def run_table(runs: list[Run], factor_names: list[str]) -> Table:
    columns = [c for c in TABLE_COLUMNS if any(c[0] in r.metrics for r in runs)]
    flagged = any(r.flags for r in runs)
    header = ["#", "run id", "repeat", "scheme", *factor_names, "status", *(["flags"] if flagged else []),
              *(c[1] for c in columns), "error"]
    rows = []
    for r in runs:
        cells: list[Any] = [str(r.idx), (r.run_id, "left"), str(r.repeat), (r.scheme, "left")]
        cells += [(str(r.factors.get(f, "")), "left") for f in factor_names]
        status = r.shown_status
        cells.append((status, f"left status-{status}"))
        if flagged:
            cells.append((", ".join(r.flags), "left status-flagged" if r.flags else "left"))
        cells += [fmt(r.metrics[m]) if r.metrics.get(m) is not None else "" for m, _, fmt in columns]
        cells.append(("; ".join(filter(None, [r.unreadable, r.error])), "left"))
        rows.append(cells)
    return Table(header, rows)


def runs_section(runs: list[Run], factor_names: list[str]) -> Section:
    section = Section("runs", "Runs", tables=[run_table(runs, factor_names)])
    unreadable = [r for r in runs if r.unreadable]
    if unreadable:
        section.notes.append(f"{len(unreadable)} run(s) unreadable, left out of every plot and statistic: "
                             + "; ".join(f"#{r.idx} {r.run_id}: {r.unreadable}" for r in unreadable[:10])
                             + (" ..." if len(unreadable) > 10 else ""))
    damaged = [r for r in runs if r.problems]
    if damaged:
        section.notes.append("Metrics left out for their type: " + "; ".join(
            f"#{r.idx} {r.run_id}: {', '.join(r.problems[:5])}" for r in damaged[:10])
                             + (" ..." if len(damaged) > 10 else ""))
    return section


UE_COLUMNS: tuple[tuple[str, str, Callable[[Any], str]], ...] = (
    ("throughput_bps", "throughput (Mbit/s)", _mbit),
    ("capacity_bps", "its capacity (Mbit/s)", _mbit),
    ("rtt_mean_ms", "RTT mean (ms)", _num(1)),
    ("rtt_p95_ms", "RTT p95 (ms)", _num(1)),
    ("retransmits", "retransmits", _num(0)),
    ("fct_mean_s", "FCT mean (s)", _num(3)),
    ("congestion_control", "cc", str),
)


def ue_section(ue_rows: list[UERow], runs: list[Run]) -> Section | None:
    """Per-UE rows of the runs with several UEs: each UE's throughput and RTT, and the run's Jain index."""
    by_run = {r.run_id: r for r in runs}
    rows_by_run: dict[str, list[UERow]] = defaultdict(list)
    for row in ue_rows:
        rows_by_run[row.run_id].append(row)
    multi = {run_id: rows for run_id, rows in rows_by_run.items() if len(rows) > 1 and run_id in by_run}
    if not multi:
        return None
    metrics = [_ue_metrics(row) for rows in multi.values() for row in rows]
    columns = [c for c in UE_COLUMNS if any(c[0] in m for m in metrics)]
    header = ["#", "run id", "scheme", "UE", *(c[1] for c in columns), "Jain index over UEs"]
    table_rows = []
    for run_id, rows in sorted(multi.items(), key=lambda kv: by_run[kv[0]].idx):
        run = by_run[run_id]
        jain = run.metrics.get("ue_fairness_jain")
        for row in sorted(rows, key=lambda u: u.slot):
            m = _ue_metrics(row)
            cells: list[Any] = [str(run.idx), (run_id, "left"), (run.scheme, "left"), (row.ue, "left")]
            cells += [fmt(m[k]) if m.get(k) is not None else "" for k, _, fmt in columns]
            cells.append(f"{jain:.3f}" if isinstance(jain, float) else "")
            table_rows.append(cells)
    notes = ["One row per UE of each run with several UEs (results.sqlite table ue_runs); each UE's artifacts "
             "are in runs/<run id>/ues/<UE>/."]
    unreadable = [row for rows in multi.values() for row in rows if row.unreadable]
    if unreadable:
        notes.append("Unreadable UE rows (shown empty): " + "; ".join(r.unreadable or "" for r in unreadable[:5]))
    return Section("ues", "UEs", notes=notes, tables=[Table(header, table_rows)])


def _ue_metrics(row: UERow) -> dict[str, Any]:
    """A UE's metrics whose values have the type their column formats (others are left out)."""
    from cellab.report.model import clean_metrics

    return clean_metrics(row.metrics or {})[0]


__all__ = ["comparison_section", "comparisons", "conditions_section", "run_table", "runs_section", "ue_section",
           "varied_factors", "with_unit"]
