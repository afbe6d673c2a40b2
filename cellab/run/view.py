"""The lines a campaign is watched by, shared by the live view of `cellab run` and by `cellab status DIR`: a
finished run's line (status, throughput, delay, the campaign's headline metric), the ETA from the mean run time,
and the running run's last seconds (throughput, RTT, attenuation) from the telemetry it is writing
(`<run>/telemetry/*.jsonl`, cellab.run.telemetry)."""

from __future__ import annotations

import json
import math
import statistics
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

LAST_S = 5.0  # the running run's "last seconds"
RUNNING_FILE = "running.json"  # a campaign on Dask: its running slots as the controller last saw them
TAIL_BYTES = 512 * 1024  # of each telemetry file: more than LAST_S of 16 UEs' cell summaries at 10 Hz


def _number(value: Any) -> float | None:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return float(value) if ok else None


def rate_text(bps: Any) -> str:
    value = _number(bps)
    return "-" if value is None else f"{value / 1e6:.1f} Mbit/s" if value >= 1e5 else f"{value / 1e3:.0f} kbit/s"


def duration_text(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


def factors_text(factors: dict[str, Any]) -> str:
    return " ".join(f"{k}={v}" for k, v in factors.items())


def headline_metric(campaign: dict[str, Any]) -> str | None:
    """The metric a run adds to throughput and delay, the one the campaign's headline judges (cellab headline):
    an SR campaign's estimate against the truth, a fault campaign's recovery time; a shoot-out's and a sweep's
    are throughput and delay themselves."""
    workload = campaign.get("workload") or {}
    if (isinstance(workload, dict) and workload.get("sr_probes")) or "sr_period_ms" in (campaign.get("factors") or {}):
        return "sr_estimate_ms"
    if campaign.get("faults"):
        return "fault_recovery_s"
    return None


def _headline_text(metric: str | None, metrics: dict[str, Any]) -> str:
    if metric == "sr_estimate_ms":
        estimate, truth = metrics.get("sr_estimate_ms"), metrics.get("sr_true_ms")
        said = "none" if estimate is None else f"{estimate} ms"
        verdict = "" if truth is None else " right" if str(estimate) == str(truth) else " wrong"
        return f"SR {said}" + (f" (true {truth} ms:{verdict})" if truth is not None else "")
    if metric == "fault_recovery_s":
        value = _number(metrics.get("fault_recovery_s"))
        return "recovery " + ("-" if value is None else f"{value:.1f} s")
    return ""


def run_line(row: dict[str, Any], metric: str | None) -> str:
    """One finished run (a row of results.sqlite's runs, as ResultStore.rows reads it)."""
    metrics = row.get("metrics") or {}
    parts = [f"{row['run_id']} {row['status']:<7}", factors_text(row.get("factors") or {})]
    if row["status"] == "ok":
        delay = _number(metrics.get("rtt_p95_ms"))
        parts += [rate_text(metrics.get("throughput_bps")), "RTT p95 " + ("-" if delay is None else f"{delay:.0f} ms")]
        headline = _headline_text(metric, metrics)
        parts += [headline] if headline else []
    elif row.get("error"):
        parts.append(str(row["error"])[:160])
    took = run_seconds(row)
    if took is not None:
        parts.append(f"took {duration_text(took)}")
    return "  ".join(p for p in parts if p)


def run_seconds(row: dict[str, Any]) -> float | None:
    started, finished = _number(row.get("started_at")), _number(row.get("finished_at"))
    return finished - started if started is not None and finished is not None and finished >= started else None


def eta_text(rows: list[dict[str, Any]], finished: tuple[str, ...] = ("ok", "failed", "invalid")) -> str:
    """Runs done and left, and the time left at the mean run time of the finished ones."""
    done = [r for r in rows if r["status"] in finished]
    left = len(rows) - len(done)
    times = [t for t in (run_seconds(r) for r in done) if t is not None]
    if not left:
        return f"{len(done)}/{len(rows)} runs done"
    if not times:
        return f"{len(done)}/{len(rows)} runs done, {left} left (ETA after the first run)"
    mean_s = statistics.fmean(times)
    return (f"{len(done)}/{len(rows)} runs done, {left} left, ETA {duration_text(mean_s * left)} "
            f"(mean run {duration_text(mean_s)})")


def _tail_rows(path: Path) -> list[dict[str, Any]]:
    """The last rows of a telemetry file being written (a partial last line is left out)."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, 2)
            handle.seek(max(0, size - TAIL_BYTES))
            data = handle.read()
    except OSError:
        return []
    lines = data.split(b"\n")[1 if size > TAIL_BYTES else 0:-1]
    rows = []
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and _number(row.get("t_s")) is not None:
            rows.append(row)
    return rows


def last_seconds(run_dir: Path, window_s: float = LAST_S) -> dict[str, Any]:
    """The running run's last `window_s` of telemetry: throughput per UE (the virtual cell's delivered bytes, or
    srsenb's reported bit rate; else the server's flows' delivery rate, summed), RTT (samples that carry `rtt_ms`:
    ping replies, the sender's flows), attenuation per channel or UE (the attenuator's last value; the cell's);
    `age_s` of the newest sample. Empty when nothing was written yet."""
    rows = [row for path in sorted((run_dir / "telemetry").glob("*.jsonl")) for row in _tail_rows(path)]
    if not rows:
        return {}
    newest = max(row["t_s"] for row in rows)
    recent = sorted((r for r in rows if r["t_s"] >= newest - window_s), key=lambda r: r["t_s"])
    cell_bytes: dict[str, list[tuple[float, float]]] = defaultdict(list)
    enb_bps: dict[str, list[float]] = defaultdict(list)
    flow_bps: dict[str, list[float]] = defaultdict(list)
    rtts: list[float] = []
    attenuation: dict[str, float] = {}
    for row in recent:
        topic = row.get("topic")
        if topic == "cell.summary" and _number(row.get("dl_bytes")) is not None:
            cell_bytes[f"ue{row.get('ue')}"].append((row["t_s"], float(row["dl_bytes"])))
        if topic == "ue_metrics" and _number(row.get("dl_bitrate_bps")) is not None:
            enb_bps[f"rnti {row.get('rnti')}"].append(float(row["dl_bitrate_bps"]))
        if topic == "flow" and _number(row.get("delivery_rate_bps")) is not None:  # the server's sender
            flow_bps[str(row.get("source"))].append(float(row["delivery_rate_bps"]))
        if _number(row.get("rtt_ms")) is not None:
            rtts.append(float(row["rtt_ms"]))
        if topic == "attenuation" and _number(row.get("db")) is not None:
            attenuation[f"ch{row.get('channel')}"] = float(row["db"])
        elif topic == "cell.summary" and _number(row.get("attenuation_db")) is not None:
            attenuation.setdefault(f"ue{row.get('ue')}", float(row["attenuation_db"]))
    throughput = {ue: 8 * sum(b for _, b in samples[1:]) / (samples[-1][0] - samples[0][0])
                  for ue, samples in cell_bytes.items() if len(samples) > 1 and samples[-1][0] > samples[0][0]}
    throughput |= {ue: statistics.fmean(values) for ue, values in enb_bps.items()}
    if not throughput and flow_bps:  # no radio's count (a commercial network): TCP's delivery rate at the sender
        throughput["sender"] = sum(statistics.fmean(values) for values in flow_bps.values())
    return {"age_s": max(0.0, time.time() - newest), "throughput_bps": throughput,
            "rtt_ms": statistics.fmean(rtts) if rtts else None, "attenuation_db": attenuation}


def now_line(run_id: str, factors: dict[str, Any], running_s: float | None, seen: dict[str, Any]) -> str:
    """The running run in one line: how long it runs, its last seconds' throughput, RTT and attenuation."""
    head = f"running {run_id} {factors_text(factors)}" + (f" for {duration_text(running_s)}" if running_s else "")
    if not seen:
        return head + ": no telemetry yet"
    rates = seen["throughput_bps"]
    rate = ("throughput " + ", ".join(f"{ue} {rate_text(v)}" for ue, v in sorted(rates.items()))) if rates else \
        "throughput -"
    rtt = "RTT -" if seen["rtt_ms"] is None else f"RTT {seen['rtt_ms']:.0f} ms"
    atten = seen["attenuation_db"]
    atten_text = ("attenuation " + ", ".join(f"{k} {v:g} dB" for k, v in sorted(atten.items()))) if atten else \
        "attenuation -"
    return f"{head}: last {LAST_S:g} s {rate}; {rtt}; {atten_text} (newest sample {seen['age_s']:.0f} s old)"


def slot_line(view: dict[str, Any]) -> str:
    """A running run on a Dask worker's slot (cellab.cluster.worker.running_views): the single-slot line, prefixed
    with the worker and slot."""
    running_s = _number(view.get("running_s"))
    seen = view.get("seen") if isinstance(view.get("seen"), dict) else {}
    factors = view.get("factors") if isinstance(view.get("factors"), dict) else {}
    head = f"worker {view.get('worker')} slot {view.get('slot')}: "
    return head + now_line(str(view.get("run_id")), factors, running_s, seen)


def running_file_lines(root: Path) -> list[str]:
    """The running slots of a campaign on Dask as its controller last saw them (RUNNING_FILE), with how long ago;
    none when there is no such file or it is not one the controller wrote."""
    try:
        data = json.loads((root / RUNNING_FILE).read_text())
        at, views = float(data["at"]), [view for view in data["slots"] if isinstance(view, dict)]
        lines = [slot_line(view) for view in views]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return []
    return [f"{line} (seen {duration_text(time.time() - at)} ago)" for line in lines]
