"""The traffic of one run toward one UE, driven over the bus through the server and UE contracts:
iperf3 (+ ping), or cellab-send with cellab-probe.

A run with several UEs runs one workload per UE at the same time, each with its own server port (a
sender or a one-shot iperf3 server per UE), so each UE's artifacts and metrics are its own. Each
workload returns the artifacts it fetched into the UE's folder (kind -> path).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from cellab.campaign.model import Timeouts, Workload
from cellab.contracts.server import (
    IPERF3_PORT,
    SENDER_PORT,
    Iperf3ServerParams,
    ServerClient,
    StartSenderParams,
)
from cellab.contracts.ue import (
    SR_PROBE_MAX_S,
    Iperf3ClientParams,
    ProbeFetchParams,
    ProbeFlow,
    UEClient,
    sr_probe_budget,
)
from cellab.errors import CellabError

T = TypeVar("T")
PROBE_GRACE_S = 20.0  # beyond the planned length: connection setup, SR probes, the sender's linger


@dataclass(frozen=True)
class RunUE:
    """One UE of a run, with what it runs (the run's values where its own `ues` entry sets none)."""

    name: str  # its folder: <run>/ues/<name>/
    agent: str
    slot: int  # its position in the run: server ports, order in tables
    lab_index: int  # its index in the lab (the virtual cell's UE index; the inventory's UE order)
    cc: str
    receiver: str
    flows: int
    schedule: str
    attenuation_db: float | None
    channel: int | None  # the attenuator channel in front of it
    own_schedule: bool = False  # its `ues` entry names its schedule (else the run's, played on the file's channels)


@dataclass
class WorkloadTarget:
    server: ServerClient
    ue: UEClient
    run_ue: RunUE
    server_address: str
    tag: str  # unique per run attempt and UE: artifact names on the agents
    ue_dir: Path  # <run>/ues/<name>/
    packet_log: bool = False  # the probe's per-packet log (one-way delay against the server capture)
    stack_tti_ms: float | None = None  # the lab's measure of its radio stack's TTI (EmbeddedLab.stack_tti_ms)


def clean_up(after_failure: bool, step: Callable[[], T]) -> T | None:
    """A step that stops what a workload started; its result. After a failed workload the step's own error is not
    the run's: the failure may have put the agent in its safe state, which already stopped it (CI: 'capture_stop:
    no capture is running' and 'stop_sender: no sender is running' hid why the attempt failed)."""
    try:
        return step()
    except (CellabError, OSError):
        if not after_failure:
            raise
        return None


def port_range(tool: str, ues: int) -> tuple[int, int]:
    """The server ports a run's workloads listen on (the server capture's filter)."""
    first = WORKLOAD_PORTS[tool]
    return first, first + ues - 1


def iperf3(t: WorkloadTarget, workload: Workload, timeouts: Timeouts, deadline: float) -> dict[str, Path]:
    port = IPERF3_PORT + t.run_ue.slot
    server_log = f"{t.tag}-server"
    t.server.iperf3_server_start(Iperf3ServerParams(port=port, tag=server_log), timeouts.request_s)
    ran = False
    try:
        reply = t.ue.iperf3_client(Iperf3ClientParams(
            server=t.server_address, port=port, direction=workload.kind, duration_s=workload.duration_s,
            flows=t.run_ue.flows, cc=t.run_ue.cc, ping_interval_ms=workload.ping_interval_ms, tag=t.tag,
        ), timeout_s=min(workload.duration_s + timeouts.request_s, max(1.0, deadline - time.monotonic())))
        ran = True
    finally:
        clean_up(not ran, lambda: t.server.iperf3_server_stop(port, timeouts.request_s))
    artifacts: dict[str, Path] = {}
    for name in reply.artifacts:
        kind = "iperf3" if name.endswith("-iperf3.json") else "ping" if name.endswith("-ping.txt") else name
        artifacts[kind] = t.ue.controller.fetch_artifact(t.ue.agent, name, t.ue_dir / name)
    artifacts["server-log"] = t.server.controller.fetch_artifact(t.server.agent, f"{server_log}.log",
                                                                 t.ue_dir / f"{server_log}.log")
    return artifacts


def probe_flows(workload: Workload, run_ue: RunUE) -> list[ProbeFlow]:
    flows = run_ue.flows
    sizes = workload.flow_sizes() if flows == workload.flows else [workload.flow_sizes()[0]] * flows
    starts = workload.flow_start_ms if workload.flow_start_ms and flows == workload.flows else [0] * flows
    return [ProbeFlow(size_bytes=size, duration_s=None if size is not None else workload.duration_s,
                      start_ms=start_ms, cc=run_ue.cc, tag=i)
            for i, (size, start_ms) in enumerate(zip(sizes, starts, strict=True))]


def probe(t: WorkloadTarget, workload: Workload, timeouts: Timeouts, deadline: float) -> dict[str, Path]:
    """cellab-send on the server, cellab-probe on the UE with the UE's receiver control."""
    port = SENDER_PORT + t.run_ue.slot
    sender_dir = f"{t.tag}-send"
    t.server.start_sender(StartSenderParams(port=port, cc=t.run_ue.cc, sample_ms=10, run_id=sender_dir, linger_s=5),
                          timeouts.request_s)
    budget = sr_probe_budget(workload.sr_probes, workload.sr_probes_max)
    fetch_timeout_s = workload.duration_s + PROBE_GRACE_S + budget * SR_PROBE_MAX_S
    fetched = False
    try:
        reply = t.ue.fetch(ProbeFetchParams(
            server=t.server_address, port=port, flows=probe_flows(workload, t.run_ue), control=t.run_ue.receiver,
            timeout_s=fetch_timeout_s, ms_log=True, packet_log=t.packet_log, sr_probes=workload.sr_probes,
            sr_probes_max=workload.sr_probes_max, stack_tti_ms=t.stack_tti_ms, tag=t.tag,
        ), timeout_s=min(fetch_timeout_s + timeouts.request_s, max(1.0, deadline - time.monotonic())))
        fetched = True
    finally:
        stopped = clean_up(not fetched, lambda: t.server.stop_sender(sender_dir, timeouts.request_s))
    artifacts: dict[str, Path] = {}
    for name in reply.artifacts:
        kind = ("probe-summary" if name.endswith("-summary.json") else "probe-ms" if name.endswith("-ms.csv")
                else "probe-packets" if name.endswith("-packets.csv") else name)
        artifacts[kind] = t.ue.controller.fetch_artifact(t.ue.agent, name, t.ue_dir / name)
    logs = t.ue_dir / "sender"
    shutil.rmtree(logs, ignore_errors=True)  # a retried attempt starts clean
    logs.mkdir()
    for name in stopped.files:
        t.server.controller.fetch_artifact(t.server.agent, name, logs / Path(name).name)
    artifacts["sender-logs"] = logs
    return artifacts


WORKLOADS = {"iperf3": iperf3, "probe": probe}
WORKLOAD_PORTS = {"iperf3": IPERF3_PORT, "probe": SENDER_PORT}  # the first server port each listens on
