"""Run metrics from a packet capture: `cellab-flowstat` reads the pcap in one pass, this maps its JSON to
the metric names of docs/metrics.md (throughput, RTT at the capture point, retransmissions, loss rate,
flow completion time, fairness, timelines, ACK gaps)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import numpy as np

from cellab.errors import CellabError, InputError
from cellab.paths import find_program

EXIT_BAD_INPUT = 2
RUN_TIMEOUT_S = 600


def run_flowstat(path: str | Path, interval_ms: float = 100, *, min_flow_bytes: int = 1,
                 max_points: int = 1000) -> dict[str, Any]:
    """cellab-flowstat's JSON document for one capture; bad input raises InputError naming the file."""
    path = Path(path)
    if not path.is_file():
        raise InputError(path, "", "no such capture file")
    argv = [str(find_program("cellab-flowstat")), str(path), "--interval-ms", str(interval_ms),
            "--min-flow-bytes", str(min_flow_bytes), "--max-points", str(max_points)]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=RUN_TIMEOUT_S, check=False)
    message = done.stderr.strip().removeprefix("cellab-flowstat: ").removeprefix(f"{path}: ")
    if done.returncode == EXIT_BAD_INPUT:
        raise InputError(path, "", message.splitlines()[0] if message else "not a usable capture")
    if done.returncode != 0:
        raise CellabError(f"{path}: cellab-flowstat failed (exit {done.returncode}): {message}")
    try:
        return json.loads(done.stdout)
    except json.JSONDecodeError as exc:
        raise CellabError(f"{path}: cellab-flowstat printed no JSON: {exc}") from exc


def pcap_metrics(path: str | Path, interval_ms: float = 100, *, min_flow_bytes: int = 1) -> dict[str, Any]:
    """Metrics of one capture, over the flows with at least min_flow_bytes data bytes (raise it to leave
    out an iperf3 control connection, say). A metric the capture does not allow is absent."""
    doc = run_flowstat(path, interval_ms, min_flow_bytes=min_flow_bytes)
    counted = [f for f in doc["flows"] if f["counted"]]
    out: dict[str, Any] = {"pcap_packets": doc["packets"], "flows": [_flow_entry(f) for f in counted]}
    if doc["warnings"]:
        out["pcap_warnings"] = doc["warnings"]
    if not counted:
        return out
    throughput = _throughput_timeline(counted, interval_ms / 1000.0)
    out["timeline"] = {"throughput_bps": throughput}
    out |= _transfer(counted)
    out |= {"throughput_series_bps": throughput["v"], "throughput_series_interval_s": interval_ms / 1000.0}
    rtt = _rtt_timeline(counted)
    if doc["summary"]["rtt"]["samples"]:
        out |= _rtt(doc["summary"]["rtt"]) | {"rtt_series_ms": rtt["v"]}
        out["timeline"]["rtt_ms"] = rtt
    out |= _losses(doc["summary"])
    out |= _completion_and_fairness(counted)
    out["ack_gap_ms"] = [gap for f in counted for gap in f["ack_gaps"]["samples_ms"]]
    return out


def _flow_entry(f: dict[str, Any]) -> dict[str, Any]:
    entry = {"flow": f["flow"], "bytes": f["bytes"], "retransmits": f["retransmits"], "loss_rate": f["loss_rate"]}
    optional = {"throughput_bps": f["throughput_bps"], "rtt_mean_ms": f["rtt"]["mean_ms"],
                "rtt_p95_ms": f["rtt"]["p95_ms"], "fct_s": f["fct_s"] if f["complete"] else None}
    return entry | {k: v for k, v in optional.items() if v is not None}


def _transfer(flows: list[dict[str, Any]]) -> dict[str, Any]:
    total = sum(f["bytes"] for f in flows)
    span_s = max(f["last_data_s"] for f in flows) - min(f["first_data_s"] for f in flows)
    out: dict[str, Any] = {"bytes_received": total, "duration_s": span_s}
    if span_s > 0:
        out["throughput_bps"] = total * 8 / span_s
    return out


def _rtt(summary: dict[str, Any]) -> dict[str, Any]:
    """RTT statistics over every sample of the counted flows (the per-flow series are thinned)."""
    out = {f"rtt_{name}_ms": summary[f"{name}_ms"] for name in ("mean", "min", "p95", "max", "jitter")}
    out = {k: v for k, v in out.items() if v is not None}   # jitter needs two samples
    return out | {"rtt_source": "pcap", "rtt_samples": summary["samples"]}


def _rtt_timeline(flows: list[dict[str, Any]]) -> dict[str, list[float]]:
    points = sorted((t, v) for f in flows for t, v in zip(f["rtt"]["series"]["t_s"], f["rtt"]["series"]["rtt_ms"], strict=True))
    return {"t_s": [t for t, _ in points], "v": [v for _, v in points]}


def _losses(summary: dict[str, Any]) -> dict[str, Any]:
    out = {"retransmits": summary["retransmits"]}
    if summary["loss_rate"] is not None:
        out["loss_rate"] = summary["loss_rate"]
    return out


def _completion_and_fairness(flows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    fcts = [f["fct_s"] for f in flows if f["complete"] and f["fct_s"] is not None]
    if fcts:
        out["fct_mean_s"] = float(np.mean(fcts))
    rates = np.array([f["throughput_bps"] for f in flows if f["throughput_bps"] is not None])
    if len(rates) >= 2 and np.any(rates > 0):
        out["jain_fairness"] = float(rates.sum() ** 2 / (len(rates) * np.square(rates).sum()))
    return out


def _throughput_timeline(flows: list[dict[str, Any]], interval_s: float) -> dict[str, list[float]]:
    """All flows' per-interval throughput summed on one grid of interval starts (capture start = 0)."""
    bins: dict[int, float] = {}
    for f in flows:
        series = f["throughput_series"]
        for t_s, bps in zip(series["t_s"], series["bps"], strict=True):
            index = round(t_s / interval_s)
            bins[index] = bins.get(index, 0.0) + bps
    if not bins:
        return {"t_s": [], "v": []}
    indexes = range(min(bins), max(bins) + 1)
    return {"t_s": [round(i * interval_s, 9) for i in indexes], "v": [bins.get(i, 0.0) for i in indexes]}
