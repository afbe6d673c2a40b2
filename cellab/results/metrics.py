"""Metrics from run artifacts (names and units: docs/metrics.md).

iperf3 workload: throughput from iperf3's JSON, RTT from ping. Probe workload: the receiver's summary,
the sender's TCP_INFO samples, the emulated cell's ground truth, the attenuation log and the capture.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from cellab.errors import CellabError
from cellab.results.cell_time import cell_clock, stack_seconds
from cellab.results.workload_timelines import PING_LINE, attenuation_timeline, per_ue_timeline



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
        match = PING_LINE.match(line)
        if match:
            samples.append(float(match["rtt"]))
        stat = re.match(r"^(\d+) packets transmitted", line)
        if stat:
            sent = int(stat.group(1))
    if not samples:
        return {"rtt_samples": 0}
    return rtt_stats(np.array(samples)) | {"ping_loss": (1 - len(samples) / sent) if sent else None,
                                           "rtt_series_ms": samples}


def rtt_stats(rtt: np.ndarray) -> dict[str, Any]:
    """Mean, min, p95, max and jitter (mean |difference| of consecutive samples) of RTT samples in ms."""
    return {"rtt_samples": int(rtt.size), "rtt_mean_ms": float(rtt.mean()), "rtt_min_ms": float(rtt.min()),
            "rtt_p95_ms": float(np.percentile(rtt, 95)), "rtt_max_ms": float(rtt.max()),
            "rtt_jitter_ms": float(np.abs(np.diff(rtt)).mean()) if rtt.size > 1 else 0.0}


IPERF3_CONTROL_BYTES = 100_000  # iperf3's control connection carries a few kB: not a flow of the transfer


def run_metrics(artifacts: dict[str, Path], shared_capture: bool = False) -> dict[str, Any]:
    """All metrics the run's artifacts allow (iperf3, ping and, unless the capture holds other UEs' flows too,
    the server's capture: loss, retransmissions, RTT at the capture point and the timelines, on the capture's
    clock, which starts just before the workload); series stay in metrics.json, scalars go to the table too."""
    metrics: dict[str, Any] = {}
    if "iperf3" in artifacts:
        metrics |= iperf3_metrics(artifacts["iperf3"])
    if "ping" in artifacts:
        metrics |= ping_metrics(artifacts["ping"])
    if "pcap" in artifacts and not shared_capture:
        from cellab.results.pcapmetrics import pcap_metrics

        found = pcap_metrics(artifacts["pcap"], min_flow_bytes=IPERF3_CONTROL_BYTES)
        metrics["timeline"] = found.pop("timeline", {})
        for key in ("retransmits", "loss_rate", "ack_gap_ms", "throughput_series_bps", "throughput_series_interval_s"):
            if key in found:
                metrics.setdefault(key, found[key])
        metrics |= {f"pcap_{k}": v for k, v in found.items() if k.startswith("rtt")}
    return metrics


def scalar_metrics(metrics: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in metrics.items() if not isinstance(v, (list, dict))}


# ---------------------------------------------------------------- probe workload and ground truth
# Timelines share one clock: the controller's wall clock, seconds from the workload's start. An agent's
# time becomes the controller's by subtracting its measured offset (manifest clock_offsets).

TIMELINE_STEP_S = 0.1


@dataclass
class RunContext:
    """What the runner knows about a run that the artifacts do not say."""

    t0_s: float  # controller wall clock at the workload's start
    duration_s: float  # planned workload length
    offsets_s: dict[str, float] = field(default_factory=dict)  # artifact kind -> its agent's clock offset
    cell_mark: dict[str, float] | None = None  # {"tti": n, "t_s": controller wall clock when read}
    sr_true_ms: float | None = None
    cell_ue: int = 0  # the UE's index in the emulated cell
    sender_port: int = 5301  # the server port of this UE's flows (its capture packets)
    shared_capture: bool = False  # the capture holds other UEs' flows too: its flow metrics are the run's, not this UE's
    stack_clock: Any = None  # the run's StackClock (cellab.labs.clock): the SR estimate is read on it
    channel: int = 1  # the attenuator channel in front of the UE: its attenuation line


def _bins(t_s: np.ndarray, values: np.ndarray, step_s: float, span_s: float) -> tuple[np.ndarray, np.ndarray]:
    """Sum of values per step over [0, span)."""
    n = max(1, int(np.ceil(span_s / step_s)))
    idx = np.floor(t_s / step_s + 1e-6).astype(np.int64)  # 0.6 / 0.1 is 5.999...: keep it in bin 6
    keep = (idx >= 0) & (idx < n)
    sums = np.bincount(idx[keep], weights=values[keep], minlength=n)
    return np.arange(n) * step_s, sums


def _series(t_s: np.ndarray, v: np.ndarray) -> dict[str, list[float]]:
    return {"t_s": [round(float(x), 4) for x in t_s], "v": [float(x) for x in v]}


def probe_metrics(summary_path: Path) -> dict[str, Any]:
    """Receiver view: bytes, throughput, per-flow FCT and fairness, receiver RTT, the SR estimate."""
    try:
        doc = json.loads(summary_path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise CellabError(f"{summary_path}: not a cellab-probe summary: {exc}") from exc
    flows = doc.get("flows") or []
    requests = {r.get("index"): r for r in doc.get("requests") or []}
    out: dict[str, Any] = {"probe_status": doc.get("status")}
    if doc.get("throughput_bps") is not None:
        out["throughput_bps"] = float(doc["throughput_bps"])
    out["bytes_received"] = int(doc.get("total_bytes") or sum(f.get("bytes", 0) for f in flows))
    per_flow = []
    for i, f in enumerate(flows):
        req = requests.get(i, {})
        per_flow.append({"flow": i, "bytes": f.get("bytes"), "throughput_bps": f.get("throughput_bps"),
                         "fct_s": req["fct_ms"] / 1000.0 if req.get("mode") == "bytes" and req.get("fct_ms") else None,
                         "rtt_mean_ms": (f.get("rtt") or {}).get("mean_ms"),
                         "retransmits": f.get("retransmitted_packets")})
    out["flows"] = per_flow
    fcts = [f["fct_s"] for f in per_flow if f["fct_s"] is not None]
    if fcts:
        out["fct_mean_s"] = float(np.mean(fcts))
    rates = [f["throughput_bps"] for f in per_flow if f["throughput_bps"]]
    if len(rates) >= 2:
        out["jain_fairness"] = float(sum(rates) ** 2 / (len(rates) * sum(r * r for r in rates)))
    rtt = doc.get("rtt") or {}
    if rtt.get("n"):
        out |= {"receiver_rtt_mean_ms": rtt.get("mean_ms"), "receiver_rtt_p95_ms": rtt.get("p95_ms")}
    sr = doc.get("sr_estimate") or {}
    out["sr_regime"] = {"sr-limited": "sr-limited", "not-sr-limited": "not-sr-limited"}.get(sr.get("regime"), "unknown")
    if sr.get("period_ms") is not None:
        out["sr_estimate_ms"] = float(sr["period_ms"])
        out["sr_estimate_source"] = sr.get("source")
    if sr:
        out["sr_clock"] = "wall"  # the probe's own estimate; _sr_on_clock may read it again on the stack's clock
        out["sr_confidence"] = sr.get("confidence")
        # no answer is not a wrong answer: an ambiguous estimate names its candidates instead of a period
        out["sr_ambiguous"] = bool(sr.get("ambiguous"))
        if sr.get("candidates_ms"):
            out["sr_candidates_ms"] = [float(c) for c in sr["candidates_ms"]]
    probes = doc.get("uplink_probes") or {}
    if probes.get("requested"):
        out["sr_probes_used"] = int(probes.get("sent", 0))
        if probes.get("budget") is not None:
            out["sr_probe_budget"] = int(probes["budget"])
    return out


def probe_throughput_timeline(ms_log: Path, t0_s: float, offset_s: float, span_s: float) -> dict[str, Any]:
    """Received bytes per TIMELINE_STEP_S from the probe's per-millisecond log (UE clock, epoch ms)."""
    data = np.genfromtxt(ms_log, delimiter=",", names=True, usecols=("ms", "bytes"), dtype=float)
    data = np.atleast_1d(data)
    if data.size == 0:
        return {}
    t_s = (data["ms"] - (offset_s + t0_s) * 1000.0) / 1000.0  # difference first: epoch ms carry 13 digits
    t, sums = _bins(t_s, data["bytes"], TIMELINE_STEP_S, span_s)
    return {"throughput_bps": _series(t, sums * 8 / TIMELINE_STEP_S)}


def sender_metrics(log_dir: Path, t0_s: float, offset_s: float) -> dict[str, Any]:
    """Sender view from cellab-send's logs: TCP_INFO RTT samples (the path RTT the sender sees, queueing
    included) and retransmissions."""
    summaries = [json.loads(line) for line in (log_dir / "flows.jsonl").read_text().splitlines() if line.strip()]
    t_list, rtt_list = [], []
    for path in sorted(log_dir.glob("flow-*.jsonl")):
        for line in path.read_text().splitlines():
            if not line.strip():
                continue
            sample = json.loads(line)
            if sample.get("bytes_acked", 0) > 0 and sample.get("rtt_us"):  # before the first ACK: the kernel's guess
                t_list.append(sample["t_ns"] / 1e9 - offset_s - t0_s)
                rtt_list.append(sample["rtt_us"] / 1000.0)
    out: dict[str, Any] = {"retransmits": int(sum(s.get("total_retrans", 0) for s in summaries)),
                           "sender_flows": len(summaries)}
    if rtt_list:
        order = np.argsort(t_list)
        t, rtt = np.asarray(t_list)[order], np.asarray(rtt_list)[order]
        thin = max(1, rtt.size // 5000)  # TCP_INFO every 10 ms: a long run keeps at most ~5000 series samples
        out |= rtt_stats(rtt) | {"rtt_source": "sender tcp_info",
                                 "rtt_series_ms": [round(float(x), 3) for x in rtt[::thin]]}
        out["timeline"] = {"rtt_ms": _series(t[:: max(1, len(t) // 2000)], rtt[:: max(1, len(t) // 2000)])}
    return out


def cell_metrics(tti_log: Path, mark: dict[str, float], t0_s: float, span_s: float, ue: int = 0,
                 clock_file: Path | None = None) -> dict[str, Any]:
    """Ground truth from the emulated cell: its capacity for the UE over the workload (per TTI counted), as a mean
    and a timeline. Its TTIs on the wall clock: cellab.results.cell_time (its own clock, or `mark`)."""
    from cellab.contracts.registry import load

    rec = load("cellab.services", "ttilog", "TTI log reader")(tti_log).ue(ue)  # the emulator room's format
    if rec.size == 0:
        return {}
    t_s = cell_clock(mark, clock_file)(rec["tti"]) - t0_s
    cap = rec["dl_capacity_bytes"].astype(np.float64)
    within = (t_s >= 0) & (t_s < span_s)
    out: dict[str, Any] = {}
    if within.any():
        out["capacity_bps"] = float(cap[within].sum() * 8 / (within.sum() / 1000.0))
        out["cell_delivered_bps"] = float(rec["dl_delivered_bytes"][within].sum() * 8 / (within.sum() / 1000.0))
    t, sums = _bins(t_s, cap, TIMELINE_STEP_S, span_s)
    out["timeline"] = {"capacity_bps": _series(t, sums * 8 / TIMELINE_STEP_S)}
    return out


def _merge_timelines(*parts: dict[str, Any]) -> dict[str, Any]:
    timeline: dict[str, Any] = {}
    for part in parts:
        timeline |= part.pop("timeline", {}) if isinstance(part, dict) else {}
    return timeline


def probe_run_metrics(artifacts: dict[str, Path], ctx: RunContext) -> dict[str, Any]:
    """The probe workload's metrics: receiver summary, sender logs, cell ground truth, attenuation, pcap."""
    span = ctx.duration_s + 2.0
    metrics = probe_metrics(artifacts["probe-summary"])
    parts: list[dict[str, Any]] = []
    if "sender-logs" in artifacts:
        sender = sender_metrics(artifacts["sender-logs"], ctx.t0_s, ctx.offsets_s.get("server", 0.0))
        parts.append(sender)
    if "probe-ms" in artifacts:
        parts.append({"timeline": probe_throughput_timeline(artifacts["probe-ms"], ctx.t0_s,
                                                            ctx.offsets_s.get("ue", 0.0), span)})
    if "cell_tti_log" in artifacts and ctx.cell_mark:
        parts.append(cell_metrics(artifacts["cell_tti_log"], ctx.cell_mark, ctx.t0_s, span, ctx.cell_ue,
                                  artifacts.get("stack_clock_dl")))
    if "attenuation-log" in artifacts:
        parts.append({"timeline": attenuation_timeline(artifacts["attenuation-log"], ctx.t0_s,
                                                       ctx.offsets_s.get("attenuator", 0.0), ctx.channel)})
    if "pcap" in artifacts:
        if not ctx.shared_capture:
            parts.append(pcap_run_metrics(artifacts["pcap"]))
        if "probe-packets" in artifacts:  # paired by this UE's port: its own one-way delay
            parts.append(owd_metrics(artifacts["pcap"], artifacts["probe-packets"], ctx.sender_port,
                                     ctx.offsets_s.get("ue", 0.0) - ctx.offsets_s.get("server", 0.0)))
    timeline = _merge_timelines(*parts)
    for part in parts:  # the first source of a metric wins: sender TCP_INFO, then the cell, the capture
        for key, value in part.items():
            metrics.setdefault(key, value)
    if "rtt_mean_ms" not in metrics and "receiver_rtt_mean_ms" in metrics:
        metrics |= {"rtt_mean_ms": metrics["receiver_rtt_mean_ms"], "rtt_p95_ms": metrics["receiver_rtt_p95_ms"],
                    "rtt_source": "receiver"}
    if "throughput_bps" in timeline:  # the transfer's own intervals: not the SR probes before it, nor the idle tail
        values = np.asarray(timeline["throughput_bps"]["v"])
        active = np.flatnonzero(values > 0)
        if active.size:
            metrics["throughput_series_bps"] = [float(v) for v in values[active[0]: active[-1] + 1]]
    metrics["timeline"] = timeline
    if metrics.get("capacity_bps"):
        metrics["utilization"] = metrics.get("throughput_bps", 0.0) / metrics["capacity_bps"]
    if ctx.stack_clock is not None:
        _sr_on_clock(metrics, artifacts["probe-summary"], ctx.stack_clock)
    _sr_truth(metrics, ctx, artifacts.get("sr-effective"))
    return metrics


def _sr_on_clock(metrics: dict[str, Any], summary_path: Path, clock: Any) -> None:
    """The SR estimate read on the run's clock by the ue room (`cellab.services: sr_on_clock`): `sr_clock` (wall |
    stack), the grid's view `sr_grid`, and on a stack clock the estimate itself (a None field: no answer)."""
    from cellab.contracts.registry import load

    read = load("cellab.services", "sr_on_clock", "SR estimate on the stack clock")
    for key, value in read(json.loads(summary_path.read_text()), clock).items():
        if value is None:
            metrics.pop(key, None)
        else:
            metrics[key] = value


def pcap_run_metrics(pcap: Path) -> dict[str, Any]:
    from cellab.results.pcapmetrics import pcap_metrics

    out = pcap_metrics(pcap)
    keep = ("retransmits", "loss_rate", "ack_gap_ms", "rtt_mean_ms", "rtt_p95_ms", "rtt_jitter_ms", "rtt_series_ms")
    renamed = {f"pcap_{k}" if k.startswith("rtt") else k: v for k, v in out.items() if k in keep}
    return renamed


def owd_metrics(server_pcap: Path, probe_packets: Path, port: int, ue_minus_server_s: float) -> dict[str, Any]:
    from cellab.results.owd import one_way_delay_ms

    owd = one_way_delay_ms(server_pcap, probe_packets, port, ue_minus_server_s)
    if owd.size == 0:
        return {}
    return {"owd_mean_ms": float(owd.mean()), "owd_p95_ms": float(np.percentile(owd, 95)),
            "owd_min_ms": float(owd.min()), "owd_samples": int(owd.size)}


def _sr_outcome(estimate: float | None, truth: float | None) -> str:
    return "no-answer" if estimate is None else ("right" if estimate == truth else "wrong")


def _sr_truth(metrics: dict[str, Any], ctx: RunContext, effective: Path | None = None) -> None:
    """The estimate against the configured period (sr_correct) and, where the lab read the eNB's own SR
    receptions (srsran-zmq: sr_effective.json, per UE), against the period the UE effectively used
    (sr_correct_effective). `sr_outcome*`: right, wrong, or no-answer (ambiguous or none: not wrong)."""
    estimate = metrics.get("sr_estimate_ms")
    if ctx.sr_true_ms is not None:
        metrics["sr_true_ms"] = ctx.sr_true_ms
        metrics["sr_correct"] = estimate == ctx.sr_true_ms
        metrics["sr_outcome"] = _sr_outcome(estimate, ctx.sr_true_ms)
    if effective is None or not Path(effective).is_file():
        return
    ue = json.loads(Path(effective).read_text()).get(f"ue{ctx.cell_ue}") or {}
    if ue.get("tti_per_s") is not None:  # the stack's speed: 1000 TTIs per second is real time
        metrics["sr_stack_tti_per_s"] = float(ue["tti_per_s"])
    metrics["sr_unused_occasions"] = ue.get("unused")
    if ue.get("period_ms") is not None:
        metrics["sr_effective_ms"] = float(ue["period_ms"])
        metrics["sr_correct_effective"] = estimate == float(ue["period_ms"])
        metrics["sr_outcome_effective"] = _sr_outcome(estimate, float(ue["period_ms"]))


# ---------------------------------------------------------------- several UEs in one run
def jain_fairness(values: list[float]) -> float | None:
    """Jain's index (sum x)^2 / (n sum x^2): 1 when all get the same, 1/n when one gets everything."""
    x = np.asarray([v for v in values if v is not None], dtype=float)
    if x.size == 0 or not np.any(x > 0):
        return None
    return float(x.sum() ** 2 / (x.size * np.square(x).sum()))


def multi_ue_metrics(per_ue: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """The run row of a run with several UEs: the cell's totals and how evenly the UEs shared it; each
    UE's own metrics are its rows (results.sqlite `ue_runs`) and its metrics.json."""
    throughputs = [m.get("throughput_bps") for m in per_ue.values()]
    rtts = [m["rtt_mean_ms"] for m in per_ue.values() if m.get("rtt_mean_ms") is not None]
    out: dict[str, Any] = {"ues": len(per_ue), "throughput_bps": float(sum(t or 0.0 for t in throughputs)),
                           "ue_fairness_jain": jain_fairness(throughputs)}
    out["timeline"] = per_ue_timeline(per_ue)
    if rtts:
        out["rtt_mean_ms"] = float(np.mean(rtts))
        out["rtt_p95_ms"] = float(max(m.get("rtt_p95_ms", m["rtt_mean_ms"]) for m in per_ue.values()
                                      if m.get("rtt_mean_ms") is not None))
    capacity = [m["capacity_bps"] for m in per_ue.values() if m.get("capacity_bps")]
    if capacity:
        out["cell_capacity_bps_ue_mean"] = float(np.mean(capacity))
    return out


def telemetry_timeline(folder: Path, t0_s: float, ue_names: dict[int, str]) -> dict[str, Any]:
    """Series from the recorded telemetry (cellab/run/telemetry.py), on the workload's time axis: the cell's
    CQI per UE (`cqi.<ue>`), a phone's or the eNB's reported CQI and RSRP (`cqi.<agent>`, `rsrp_dbm.<agent>`)."""
    series: dict[str, tuple[list[float], list[float]]] = {}

    def add(key: str, t_s: Any, value: Any) -> None:
        if isinstance(t_s, (int, float)) and isinstance(value, (int, float)) and np.isfinite(value):
            ts, vs = series.setdefault(key, ([], []))
            ts.append(float(t_s) - t0_s)
            vs.append(float(value))

    if not folder.is_dir():
        return {}
    for path in sorted(folder.glob("*.jsonl")):
        stream = path.stem
        for line in path.read_text(errors="replace").splitlines():
            try:
                row = json.loads(line)
            except ValueError:
                continue
            if not isinstance(row, dict):
                continue
            if stream == "cell":
                ue = row.get("ue")
                if isinstance(ue, int) and ue in ue_names:
                    add(f"cqi.{ue_names[ue]}", row.get("t_s"), row.get("cqi"))
            else:
                add(f"cqi.{stream}", row.get("t_s"), row.get("cqi"))
                add(f"rsrp_dbm.{stream}", row.get("t_s"), row.get("rsrp_dbm"))
    out = {}
    for key, (ts, vs) in series.items():
        order = np.argsort(ts)
        out[key] = _series(np.asarray(ts)[order], np.asarray(vs)[order])
    return out


def fault_run_metrics(faults: list[Any], played: list[dict[str, Any]], artifacts: dict[str, Path],
                      mark: dict[str, float] | None, t0_s: float, span_s: float,
                      max_db: float | None, flows: dict[int, Any] | None = None) -> list[dict[str, Any]]:
    """Recovery per fault (cellab.faults.recovery.recovery_metrics) from the lab's own records: the virtual cell's events
    and TTI log (the faulted UE's delivered and dropped bytes per TTI) on the workload's time axis (its own clock);
    on srsran-zmq the attenuation it applied and srsue's RRC events, on the wall clock (`lab-events`). Without them
    (a lab that keeps no clock), the times are the injector's and the throughput figures come from `flows` (UE index
    -> (t_s, bytes): the UE's own flow, on an inventory) or are left out."""
    from cellab.faults.recovery import on_stack_clock, read_cell_events, read_lab_events, recovery_metrics
    from cellab.faults.spec import PER_UE_FIGURES, UE_FAULT_KINDS

    events: list[dict[str, Any]] = []
    events_from, log, to_wall = "cell", None, None  # to_wall: the events' TTIs -> epoch s
    if mark is not None:
        events = read_cell_events(artifacts["cell_log"]) if "cell_log" in artifacts else []
        if "cell_tti_log" in artifacts:
            from cellab.contracts.registry import load

            log = load("cellab.services", "ttilog", "TTI log reader")(artifacts["cell_tti_log"])
        to_wall = cell_clock(mark, artifacts.get("stack_clock_dl"))  # the cell's own clock, or the mark
    elif "lab-events" in artifacts:  # wall-clock events, their `tti` in ms since the epoch
        events, events_from = read_lab_events(artifacts["lab-events"]), "lab"
        to_wall = cell_clock({"tti": 0.0, "t_s": 0.0}, None)

    def t_of(tti: int) -> float:
        return float(to_wall(tti) - t0_s) if to_wall is not None else float("nan")

    bytes_by_ue: dict[int, tuple[Any, Any]] = {}

    def bytes_of(ue: int) -> tuple[Any, Any]:
        """(delivered, dropped): (t_s, bytes) per TTI of one UE, or its own flow without a TTI log."""
        if log is None:
            return (flows or {}).get(ue), None
        if ue not in bytes_by_ue:
            rec = log.ue(ue)
            t = to_wall(rec["tti"]) - t0_s
            bytes_by_ue[ue] = ((t, rec["dl_delivered_bytes"].astype(np.float64)),
                               (t, rec["dl_drop_bytes"].astype(np.float64)))
        return bytes_by_ue[ue]

    def row_for(i: int, ue: int) -> dict[str, Any]:
        """Fault i's figures for one UE (searched up to the next fault that hits that UE)."""
        plan = [f if j != i or ue == f.ue else f.model_copy(update={"ue": ue}) for j, f in enumerate(faults)]
        (row,) = recovery_metrics(plan, played, events, *bytes_of(ue), t_of, span_s, max_db,
                                  events_from=events_from, which=[i])
        return row | (on_stack_clock(row, stack_s_of) if stack_s_of is not None else {})

    stack_s_of = stack_seconds(artifacts.get("stack-clock-dl"), t0_s) if mark is None else None

    # a fault of the whole cell (the eNB, the S1 or SGi path, a core daemon) hits every UE: beside its row (the
    # UE it names, its first by default), `other_ues` holds the same figures for each other UE of the run
    ues = range(log.n_ues) if log is not None else sorted({ev["ue"] for ev in events if isinstance(ev.get("ue"), int)}
                                                           | set(flows or {}))  # an inventory: each UE's own flow
    rows = []
    for i, fault in enumerate(faults):
        row = row_for(i, fault.ue)
        if fault.kind not in UE_FAULT_KINDS and row["start_s"] is not None:
            others = [{"ue": ue} | {k: v for k, v in row_for(i, ue).items() if k in PER_UE_FIGURES}
                      for ue in ues if ue != fault.ue]
            if others:
                row["other_ues"] = others
        rows.append(row)
    return rows
