"""The traffic of one run, driven over the bus: iperf3 (+ ping), or cellab-send with cellab-probe.

Each workload returns the artifacts it fetched into the run folder (kind -> path); the runner adds
the lab's and the attenuator's, then computes metrics.
"""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellab.bus import Controller
from cellab.campaign import Timeouts, Workload

IPERF3_PORT = 5201
SENDER_PORT = 5301
PROBE_GRACE_S = 20.0  # beyond the planned length: connection setup, SR probes, the sender's linger


@dataclass
class WorkloadTarget:
    ctl: Controller
    server: str  # agent names
    ue: str
    server_address: str
    tag: str  # unique per run attempt: artifact names on the agents
    run_dir: Path
    packet_log: bool = False  # the probe's per-packet log (one-way delay against the server capture)


def iperf3(t: WorkloadTarget, workload: Workload, params: dict[str, Any], timeouts: Timeouts,
           deadline: float) -> dict[str, Path]:
    ctl = t.ctl
    ctl.request(t.server, "iperf3_server_start", {"port": IPERF3_PORT, "tag": f"{t.tag}-server"},
                timeout_s=timeouts.request_s)
    try:
        reply = ctl.request(t.ue, "iperf3_client", {
            "server": t.server_address, "port": IPERF3_PORT, "direction": workload.kind,
            "duration_s": workload.duration_s, "flows": workload.flows, "cc": params["cc"],
            "ping_interval_ms": workload.ping_interval_ms, "tag": t.tag,
        }, timeout_s=min(workload.duration_s + timeouts.request_s, max(1.0, deadline - time.monotonic())))
    finally:
        ctl.request(t.server, "iperf3_server_stop", {}, timeout_s=timeouts.request_s)
    artifacts: dict[str, Path] = {}
    for name in reply["artifacts"]:
        kind = "iperf3" if name.endswith("-iperf3.json") else "ping" if name.endswith("-ping.txt") else name
        artifacts[kind] = ctl.fetch_artifact(t.ue, name, t.run_dir / name)
    artifacts["server-log"] = ctl.fetch_artifact(t.server, f"{t.tag}-server.log", t.run_dir / f"{t.tag}-server.log")
    return artifacts


def probe_flows(workload: Workload, cc: str) -> list[dict[str, Any]]:
    starts = workload.flow_start_ms or [0] * workload.flows
    flows = []
    for i, (size, start_ms) in enumerate(zip(workload.flow_sizes(), starts, strict=True)):
        amount = {"size_bytes": size} if size is not None else {"duration_s": workload.duration_s}
        flows.append({**amount, "start_ms": start_ms, "cc": cc, "tag": i})
    return flows


def probe(t: WorkloadTarget, workload: Workload, params: dict[str, Any], timeouts: Timeouts,
          deadline: float) -> dict[str, Path]:
    """cellab-send on the server, cellab-probe on the UE with the run's receiver control."""
    ctl = t.ctl
    sender_dir = f"{t.tag}-send"
    ctl.request(t.server, "start_sender", {"port": SENDER_PORT, "cc": params["cc"], "sample_ms": 10,
                                           "run_id": sender_dir, "linger_s": 5}, timeout_s=timeouts.request_s)
    fetch_timeout_s = workload.duration_s + PROBE_GRACE_S + workload.sr_probes * 0.2
    try:
        reply = ctl.request(t.ue, "fetch", {
            "server": t.server_address, "port": SENDER_PORT, "flows": probe_flows(workload, params["cc"]),
            "control": params.get("receiver", "none"), "timeout_s": fetch_timeout_s, "ms_log": True,
            "packet_log": t.packet_log, "sr_probes": workload.sr_probes, "tag": t.tag,
        }, timeout_s=min(fetch_timeout_s + timeouts.request_s, max(1.0, deadline - time.monotonic())))
    finally:
        stopped = ctl.request(t.server, "stop_sender", {}, timeout_s=timeouts.request_s)
    artifacts: dict[str, Path] = {}
    for name in reply["artifacts"]:
        kind = ("probe-summary" if name.endswith("-summary.json") else "probe-ms" if name.endswith("-ms.csv")
                else "probe-packets" if name.endswith("-packets.csv") else name)
        artifacts[kind] = ctl.fetch_artifact(t.ue, name, t.run_dir / name)
    logs = t.run_dir / "sender"
    shutil.rmtree(logs, ignore_errors=True)  # a retried attempt starts clean
    logs.mkdir()
    for name in stopped["files"]:
        ctl.fetch_artifact(t.server, name, logs / Path(name).name)
    artifacts["sender-logs"] = logs
    return artifacts


WORKLOADS = {"iperf3": iperf3, "probe": probe}
WORKLOAD_PORTS = {"iperf3": IPERF3_PORT, "probe": SENDER_PORT}  # the server port each listens on (captures)
