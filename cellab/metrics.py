"""Metrics from run artifacts: throughput from iperf3's JSON, RTT from ping, sender TCP state."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

from cellab.errors import CellabError

_PING_LINE = re.compile(r"^\[(?P<t>[\d.]+)\].*icmp_seq=(?P<seq>\d+).*time=(?P<rtt>[\d.]+) ms")


def iperf3_metrics(path: Path) -> dict[str, Any]:
    try:
        doc = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CellabError(f"{path}: not an iperf3 JSON result: {exc}") from exc
    if "error" in doc:
        raise CellabError(f"{path}: iperf3 failed: {doc['error']}")
    end = doc["end"]
    series = [iv["sum"]["bits_per_second"] for iv in doc.get("intervals", [])]
    out: dict[str, Any] = {
        "throughput_bps": end["sum_received"]["bits_per_second"],
        "throughput_series_bps": series,
        "bytes_received": end["sum_received"]["bytes"],
        "duration_s": end["sum_received"]["seconds"],
        "congestion_control": end.get("sender_tcp_congestion"),
    }
    sender = _sender_streams(doc)
    if sender:
        out["retransmits"] = sum(s.get("retransmits", 0) for s in sender)
        rtts = [s["mean_rtt"] for s in sender if "mean_rtt" in s]
        if rtts:
            out["sender_srtt_mean_ms"] = float(np.mean(rtts)) / 1000.0  # iperf3 reports microseconds
    return out


def _sender_streams(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The sending side's per-stream summary: ours (upload) or the server's (download, -R)."""
    reverse = doc.get("start", {}).get("test_start", {}).get("reverse", 0)
    source = doc.get("server_output_json", {}) if reverse else doc
    streams = source.get("end", {}).get("streams", [])
    return [s["sender"] for s in streams if "sender" in s]


def ping_metrics(path: Path) -> dict[str, Any]:
    samples = []
    sent = 0
    for line in path.read_text(errors="replace").splitlines():
        match = _PING_LINE.match(line)
        if match:
            samples.append(float(match["rtt"]))
        stat = re.match(r"^(\d+) packets transmitted", line)
        if stat:
            sent = int(stat.group(1))
    if not samples:
        return {"rtt_samples": 0}
    rtt = np.array(samples)
    return {
        "rtt_samples": len(samples),
        "rtt_mean_ms": float(rtt.mean()),
        "rtt_min_ms": float(rtt.min()),
        "rtt_p95_ms": float(np.percentile(rtt, 95)),
        "rtt_max_ms": float(rtt.max()),
        "rtt_jitter_ms": float(np.abs(np.diff(rtt)).mean()) if len(rtt) > 1 else 0.0,
        "ping_loss": (1 - len(samples) / sent) if sent else None,
        "rtt_series_ms": samples,
    }


def run_metrics(artifacts: dict[str, Path]) -> dict[str, Any]:
    """All metrics the run's artifacts allow; series stay in metrics.json, scalars go to the table too."""
    metrics: dict[str, Any] = {}
    if "iperf3" in artifacts:
        metrics |= iperf3_metrics(artifacts["iperf3"])
    if "ping" in artifacts:
        metrics |= ping_metrics(artifacts["ping"])
    return metrics


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}
