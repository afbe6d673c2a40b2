"""Timelines of the iperf3 workload and of each UE of a run, on the workload's time axis (docs/metrics.md `timeline`).

The probe workload's timelines come from the probe's per-millisecond log, the sender's TCP_INFO and the cell
(cellab.results.metrics). An iperf3 run has its own sources: iperf3's per-interval throughput (1 s unless the
client says otherwise; iperf3 counts its intervals from its own start, which is the workload's start to within
its connect time), ping's RTT samples (`ping -D`: each line stamped on the UE's clock, which the run's measured
offset turns into the controller's) and the attenuation the player applied on the UE's channel.

A run with several UEs keeps each UE's lines under the UE's name: `throughput_bps.<ue>`, `rtt_ms.<ue>`,
`attenuation_db.<ue>`.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import numpy as np

PING_LINE = re.compile(r"^\[(?P<t>[\d.]+)\].*icmp_seq=(?P<seq>\d+).*time=(?P<rtt>[\d.]+) ms")  # ping -D
#: the per-UE timeline lines a run with several UEs keeps: the UE's own series name -> the run's prefix
PER_UE_SERIES = ("throughput_bps", "rtt_ms", "attenuation_db")


def _series(t_s: np.ndarray, v: np.ndarray) -> dict[str, list[float]]:
    return {"t_s": [round(float(x), 4) for x in t_s], "v": [float(x) for x in v]}


def attenuation_timeline(log: Path, t0_s: float, offset_s: float, channel: int = 1) -> dict[str, Any]:
    """The attenuation the player applied on one channel (its JSONL log: a start event with t0_wall_s, then
    points, each naming its channel)."""
    t0_wall = None
    t_list, db_list = [], []
    for line in log.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if row.get("event") == "start":
            t0_wall = float(row["t0_wall_s"])
        elif "applied_s" in row and t0_wall is not None and row.get("channel", 1) == channel:
            t_list.append(t0_wall + float(row["applied_s"]) - offset_s - t0_s)
            db_list.append(float(row["readback_db"] if row.get("readback_db") is not None else row["db"]))
    if not t_list:
        return {}
    return {"attenuation_db": _series(np.asarray(t_list), np.asarray(db_list))}


def iperf3_throughput_timeline(path: Path) -> dict[str, Any]:
    """iperf3's received rate per interval, each at its interval's middle (s since iperf3 started): a 1 s
    interval's rate is that second's, neither its start's nor its end's."""
    try:
        doc = json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return {}  # iperf3_metrics names a broken file; a timeline is only a picture of it
    t_list, v_list = [], []
    for interval in doc.get("intervals") or [] if isinstance(doc, dict) else []:
        whole = interval.get("sum") if isinstance(interval, dict) else None
        if isinstance(whole, dict) and all(isinstance(whole.get(k), int | float)
                                           for k in ("start", "end", "bits_per_second")):
            t_list.append((float(whole["start"]) + float(whole["end"])) / 2)
            v_list.append(float(whole["bits_per_second"]))
    if not t_list:
        return {}
    return {"throughput_bps": _series(np.asarray(t_list), np.asarray(v_list))}


def ping_rtt_timeline(path: Path, t0_s: float, offset_s: float) -> dict[str, Any]:
    """ping's RTT samples at their `-D` stamps (UE clock, epoch s) on the workload's axis."""
    t_list, rtt_list = [], []
    for line in Path(path).read_text(errors="replace").splitlines():
        match = PING_LINE.match(line)
        if match:
            t_list.append(float(match["t"]) - offset_s - t0_s)
            rtt_list.append(float(match["rtt"]))
    if not t_list:
        return {}
    order = np.argsort(t_list, kind="stable")
    return {"rtt_ms": _series(np.asarray(t_list)[order], np.asarray(rtt_list)[order])}


def iperf3_timeline(artifacts: dict[str, Path], ctx: Any) -> dict[str, Any]:
    """An iperf3 run's timeline for one UE (ctx: cellab.results.metrics.RunContext): throughput, RTT, and the
    attenuation on its channel, each where the run has its artifact."""
    timeline: dict[str, Any] = {}
    if "iperf3" in artifacts:
        timeline |= iperf3_throughput_timeline(artifacts["iperf3"])
    if "ping" in artifacts:
        timeline |= ping_rtt_timeline(artifacts["ping"], ctx.t0_s, ctx.offsets_s.get("ue", 0.0))
    if "attenuation-log" in artifacts:
        timeline |= attenuation_timeline(artifacts["attenuation-log"], ctx.t0_s,
                                          ctx.offsets_s.get("attenuator", 0.0), ctx.channel)
    return timeline


def per_ue_timeline(per_ue: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """A run's timeline from its UEs' own: each UE's throughput, RTT and attenuation under its name."""
    out: dict[str, Any] = {}
    for name, metrics in per_ue.items():
        own = metrics.get("timeline")
        if not isinstance(own, dict):
            continue
        out |= {f"{series}.{name}": own[series] for series in PER_UE_SERIES if series in own}
    return out


__all__ = ["PER_UE_SERIES", "PING_LINE", "attenuation_timeline", "iperf3_throughput_timeline", "iperf3_timeline", "per_ue_timeline",
           "ping_rtt_timeline"]
