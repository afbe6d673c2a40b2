"""The fidelity bench's recovery case (issue 28): a Cubic iperf3 download with one radio outage (the UE's
attenuator channel to its maximum) of OUTAGE_S from OUTAGE_AT_S into the workload, on both labs, compared per
lab:

    rlf_delay_s                  the radio link failure after the outage's start (T310 on both: srsue's own,
                                 the virtual cell's model of it, both with srsenb's SIB2 values)
    reattach_after_end_s         the re-establishment (or a new connection) after the outage's end
    throughput_back_after_end_s  when 300 ms first carried 90 % of the download's rate of the second before the
                                 outage again, after its end

The RLF and the re-attach come from each lab's own events (the run's metrics `faults` rows, cellab.faults.spec): the
virtual cell's RRC events; on srsran-zmq srsue's RRC log and the attenuation the ZMQ broker applied. Throughput
back is read the same way on both labs, from the server's capture (the new bytes iperf3's server sent, binned as
cellab.faults.spec bins the cell's delivered bytes): srsran-zmq keeps no per-TTI byte log, and one reader on both keeps
the comparison about the labs. All times are wall-clock seconds: srsRAN over ZMQ runs in slow motion on a host
that cannot keep up (0.5-0.8 of real time here), its timers with it, so each run's stack speed is in the detail.

The case has a campaign of its own (kind `recovery`), so its fault never disturbs the other cases' runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cellab.errors import CellabError
from cellab.faults.recovery import rate_back
from cellab.fidelity.model import CaseValues, Grid

KIND = "recovery"
CASE_PREFIX = "recovery-"
PLAN = "outage-3s"
OUTAGE_AT_S = 3.0  # after Cubic's slow start at 25 PRB: the second before it is the pre-fault level
OUTAGE_S = 3.0  # well past T310 (200 ms) and short of srsenb's rlf_release_timer_ms (4 s): a re-establishment
# 8 s after the outage: the re-attach must come inside the workload or the run fails (faults.not_recovered), and
# the rate must be back for its figure; after srsue's re-establishment Cubic's backed-off retransmission timer
# waits seconds more (first runs, 12 s workload: back 3.3-5.4 s after the end, the latest at 11.4 s)
WORKLOAD_S = 14.0
CAPTURE_BIN_MS = 10  # flowstat's bins, re-binned to cellab.faults.recovery.BIN_S on the workload's clock
IPERF3_CONTROL_BYTES = 100_000  # as cellab.results.metrics: iperf3's control connection is not the download
METRICS = ("rlf_delay_s", "reattach_after_end_s", "throughput_back_after_end_s")


def recovery_case(n_prb: int) -> str:
    return f"{CASE_PREFIX}{n_prb}prb"


def recovery_levels(grid: Grid) -> dict[str, dict[str, Any]]:
    return {recovery_case(n): {"n_prb": n, "cc": "cubic", "attenuation_db": 0, "faults": PLAN}
            for n in grid.recovery_n_prb}


def recovery_campaign(lab: str, grid: Grid, fixed: dict[str, Any], common: dict[str, Any],
                      ping_interval_ms: float) -> dict[str, Any] | None:
    """The lab's recovery campaign (None when the grid has no recovery case): the other campaigns' settings
    (`fixed`, `common`), the outage plan, the server's capture (throughput back). A slow real stack is kept (the
    virtual repeat runs on its clock: cellab.fidelity.clocks); a starved one fails the stack clock's validity."""
    levels = recovery_levels(grid)
    if not levels:
        return None
    return {"name": f"fidelity-{KIND}-{lab}", "lab": lab, **common,
            "description": f"fidelity: a {OUTAGE_S:g} s radio outage from {OUTAGE_AT_S:g} s of an iperf3 download",
            "factors": {"case": levels}, "fixed": fixed,
            "faults": {PLAN: [{"kind": "radio_outage", "at_s": OUTAGE_AT_S, "duration_s": OUTAGE_S}]},
            "workload": {"tool": "iperf3", "kind": "download", "duration_s": WORKLOAD_S,
                         "ping_interval_ms": ping_interval_ms},
            "measurements": ["throughput", "rtt", "pcap"]}


def capture_sent(pcap: Path, t0_s: float) -> tuple[np.ndarray, np.ndarray]:
    """(t_s from the workload's start, new bytes the server sent) per CAPTURE_BIN_MS of the download's flows."""
    from cellab.results.pcapmetrics import run_flowstat

    doc = run_flowstat(pcap, CAPTURE_BIN_MS, min_flow_bytes=IPERF3_CONTROL_BYTES)
    offset_s = float(doc["start_epoch_s"]) - t0_s  # flowstat's clock starts at the capture's first packet
    t, sent = [], []
    for flow in doc["flows"]:
        if flow["counted"]:
            series = flow["throughput_series"]
            t += [offset_s + x for x in series["t_s"]]
            sent += [bps * series["interval_s"] / 8 for bps in series["bps"]]
    if not t:
        raise CellabError(f"{pcap}: no download flow in the server's capture")
    return np.asarray(t), np.asarray(sent)


def throughput_back_s(sent: tuple[np.ndarray, np.ndarray], start_s: float, end_s: float,
                      span_s: float) -> float | None:
    """When the server's sending rate was back after the outage, by cellab.faults.spec' rule (rate_back), s from the
    workload's start; None: not within span_s."""
    return rate_back(*sent, start_s, end_s, span_s)[1]


def recovery_values(metrics: dict[str, Any], run_dir: Path, manifest: dict[str, Any]) -> CaseValues:
    """The case's values of one run from its stored metrics (`faults` rows) and, for throughput back, its
    server capture (run_dir/server.pcap) on the workload's clock (manifest workload_started_at)."""
    rows = [r for r in metrics.get("faults") or [] if isinstance(r, dict) and r.get("kind") == "radio_outage"]
    if not rows:
        return CaseValues(error="no radio_outage row in the run's metrics")
    row = rows[0]
    start, end = row.get("start_s"), row.get("end_s")
    if start is None or end is None:
        return CaseValues(error=f"the outage's {'start' if start is None else 'end'} is not in the lab's events")
    out = CaseValues()
    timing = manifest.get("lab_timing") or {}
    speed = (timing.get("stack_clock") or {}).get("speed", timing.get("stack_speed"))
    when = f"outage {start:.2f}-{end:.2f} s (from {row.get('times_from')})" + (
        f", stack at {speed:.2f} of real time" if isinstance(speed, (int, float)) else "")
    if row.get("rlf_s") is None:
        out.missing["rlf_delay_s"] = "no radio link failure in the lab's events"
    else:
        out.values["rlf_delay_s"] = row["rlf_s"] - start
        sync_lost = row.get("out_of_sync_s")
        t310 = f", T310 started at +{sync_lost - start:.2f} s" if sync_lost is not None else ""
        out.detail["rlf_delay_s"] = when + t310
    if row.get("reattach_after_end_s") is None:
        out.missing["reattach_after_end_s"] = "no re-attach after the radio link failure in the lab's events"
    else:
        out.values["reattach_after_end_s"] = row["reattach_after_end_s"]
        out.detail["reattach_after_end_s"] = f"by {row.get('reattach_by')}"
    t0 = manifest.get("workload_started_at")
    pcap = run_dir / "server.pcap"
    if not isinstance(t0, (int, float)) or not pcap.is_file():
        out.missing["throughput_back_after_end_s"] = "no server capture with the workload's start time"
        return out
    try:
        back = throughput_back_s(capture_sent(pcap, t0), start, end, float(manifest["workload"]["duration_s"]))
    except (CellabError, KeyError, TypeError, ValueError) as exc:
        out.missing["throughput_back_after_end_s"] = f"the server capture: {exc}"
        return out
    if back is None:
        out.missing["throughput_back_after_end_s"] = "throughput not back at 90 % within the workload"
    else:
        out.values["throughput_back_after_end_s"] = back - end
        own = row.get("recovery_s")  # the virtual cell's, from its TTI log (delivered, not sent)
        out.detail["throughput_back_after_end_s"] = "server capture" + (
            f"; the cell's TTI log: {own:.2f} s" if isinstance(own, (int, float)) else "")
    return out
