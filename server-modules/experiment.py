"""Small building blocks for the server modules' tests and benchmark: a clean bottleneck with delay
on the virtual cell (trace mode, constant rate), the wired lab, loaded modules, and flow metrics.
"""

from __future__ import annotations

import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellab.hostlock import SERVER_MODULES_LOCK, host_lock
from cellab.labs.base import Topology

from . import flowclient, modules
from .sender import Sender, SenderConfig

MTU_BYTES = 1500
TCP_IP_HEADER_BYTES = 52  # IPv4 20 + TCP 20 + timestamps 12: a 1448-byte segment is a 1500-byte packet
# The cell adds its own uplink wait (SR period, grant) and TTI rounding to the configured core and
# internet delays; measured on this emulator with a 5 ms SR period.
CELL_OVERHEAD_RTT_MS = 8.0
TRACE_UP_OVERHEAD_RTT_MS = 2.0  # with an uplink trace: TTI rounding both ways


BPF_LOCK_PATH = SERVER_MODULES_LOCK


@contextmanager
def bpf_lock(timeout_s: float = 600.0) -> Iterator[None]:
    """Registered congestion controls and /sys/fs/bpf/cellab are host-wide: test runs and benchmarks
    (also from another checkout of the repository) take this lock so they do not unload each other's
    modules. Re-entrant within a process (a test holding it runs `cellab bench table1`, which takes it):
    flock on a second open of the file would wait for the first forever."""
    with _LOCK_DEPTH_GUARD:
        _LOCK_DEPTH[0] += 1
        nested = _LOCK_DEPTH[0] > 1
    try:
        if nested:
            yield
        else:
            with _flock(timeout_s):
                yield
    finally:
        with _LOCK_DEPTH_GUARD:
            _LOCK_DEPTH[0] -= 1


_LOCK_DEPTH = [0]
_LOCK_DEPTH_GUARD = threading.Lock()


def _flock(timeout_s: float):
    return host_lock(BPF_LOCK_PATH, timeout_s, "server modules")


def constant_trace(path: Path, rate_mbit: float, duration_ms: int = 1000) -> Path:
    """A Mahimahi trace (one line per 1500-byte opportunity) with a constant rate; it loops."""
    per_ms = rate_mbit * 1e6 / 8 / MTU_BYTES / 1000
    lines: list[str] = []
    for ms in range(duration_ms):
        lines += [str(ms)] * (int((ms + 1) * per_ms) - int(ms * per_ms))
    if not lines:
        raise ValueError(f"rate {rate_mbit} Mbit/s gives no delivery opportunity in {duration_ms} ms")
    path.write_text("\n".join(lines) + "\n")
    return path


def rotated_trace(src: Path, offset_ms: int, dst: Path) -> Path:
    """The same (looping) trace started offset_ms later: a run-time copy, so schemes can be compared on
    several slices of one trace."""
    stamps = [int(x) for x in src.read_text().split()]
    if not stamps or stamps[-1] <= 0:
        raise ValueError(f"{src}: trace must last for a nonzero amount of time")
    period = stamps[-1]
    offset_ms %= period
    shifted = [t - offset_ms for t in stamps if t >= offset_ms] + [t + period - offset_ms for t in stamps if t < offset_ms]
    dst.write_text("\n".join(map(str, shifted)) + "\n")
    return dst


def _trace_stamps(trace: Path) -> list[int]:
    return [int(x) for x in trace.read_text().split()]


def trace_rate_mbit(trace: Path, duration_ms: int) -> float:
    """Mean capacity of the first duration_ms of a Mahimahi trace."""
    opportunities = sum(1 for t in _trace_stamps(trace) if t < duration_ms)
    return opportunities * MTU_BYTES * 8 / (duration_ms * 1e3)


def idle_trace_rtt_ms(trace: Path, duration_ms: int, base_rtt_ms: float) -> float:
    """Mean RTT of a packet sent at a random ms of the first duration_ms on an empty link: the base RTT
    plus the wait for the trace's next delivery opportunity (a lone packet's; an ACK-clocked flow, whose
    packets follow deliveries, can wait less)."""
    stamps = sorted(set(_trace_stamps(trace)))
    waits, i = 0, 0
    for ms in range(duration_ms):
        while i < len(stamps) and stamps[i] < ms:
            i += 1
        waits += (stamps[i] if i < len(stamps) else stamps[0] + stamps[-1]) - ms
    return base_rtt_ms + waits / duration_ms


def _route_initrwnd(netns: str, packets: int) -> None:
    """A big initial receive window on the UE's routes (S-Cubic's first flight is min(cwnd, rwnd))."""
    out = subprocess.run(["ip", "-n", netns, "route", "show"], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        fields = line.split()
        if "initrwnd" in fields:
            i = fields.index("initrwnd")
            del fields[i:i + 2]
        subprocess.run(["ip", "-n", netns, "route", "replace", *fields, "initrwnd", str(packets)], check=True)


def _sysctl(netns: str, key: str, value: str) -> None:
    subprocess.run(["ip", "netns", "exec", netns, "sysctl", "-q", "-w", f"{key}={value}"], check=True)


@contextmanager
def virtual_path(prefix: str, rate_mbit: float, rtt_ms: float, queue_bytes: int, n_ues: int = 1,
                 trace: Path | None = None, sr_period_ms: int = 5, initrwnd_pkts: int | None = None,
                 uplink_mbit: float | None = None, realtime: bool = False) -> Iterator[Topology]:
    """The virtual cell in trace mode: a constant-rate (or given) trace, a base RTT of about rtt_ms.
    uplink_mbit: a constant-rate uplink trace too (no SR wait, like Mahimahi's wired48 ACK path);
    otherwise the uplink keeps the cell's SR/grant model. realtime: the cell at SCHED_FIFO (a loaded
    host then delays the flows' end hosts, not the model)."""
    from cellab.labs import embedded_lab_class
    VirtualLab = embedded_lab_class("virtual")  # the emulator room's lab, through the registry

    with tempfile.TemporaryDirectory(prefix="cellab-sm-") as tmp:
        if trace is None:
            trace = constant_trace(Path(tmp) / "constant.trace", rate_mbit)
        params: dict[str, Any] = {"trace": str(trace), "sr_period_ms": sr_period_ms,
                                  "rlc_queue": queue_bytes, "n_ues": n_ues, "realtime": realtime}
        overhead_ms = CELL_OVERHEAD_RTT_MS
        if uplink_mbit is not None:
            params["trace_up"] = str(constant_trace(Path(tmp) / "uplink.trace", uplink_mbit))
            overhead_ms = TRACE_UP_OVERHEAD_RTT_MS
        one_way_ms = max(0.0, (rtt_ms - overhead_ms) / 4)
        params |= {"core_delay_ms": one_way_ms, "internet_delay_ms": one_way_ms}
        lab = VirtualLab(prefix, params=params)
        try:
            topo = lab.up()
            topo.extra["cell_timing"] = lab.timing_faults  # since up: did the host stall the cell?
            # no per-destination metrics carried between flows: each arm starts from the same state
            _sysctl(topo.server.netns, "net.ipv4.tcp_no_metrics_save", "1")
            if initrwnd_pkts:
                for ue in topo.ues:
                    _route_initrwnd(ue.netns, initrwnd_pkts)
            yield topo
        finally:
            lab.down()


PACKET_BYTES = 1500  # one trace opportunity; the unit Mahimahi's per-packet delay is counted in
TTI_LOG_FLUSH_S = 0.2  # the cell flushes its TTI log every 100 ms


def queueing_delays_ms(tti_log: Path | str, ue: int = 0) -> list[int]:
    """Per-packet queueing delay at the cell's downlink queue (arrival to delivery, whole ms) from the
    cell's TTI log (a virtual_path topology's extra["tti_log"]): Mahimahi's "per-packet queueing
    delay", the delay C2TCP's Table I normalises. Each delivered packet counts once; the wait for a
    delivery opportunity is included. The queue is FIFO, so byte n left in the TTI where the delivered
    bytes passed n and entered in the TTI where delivered + queued bytes passed n."""
    import numpy as np

    from cellab.contracts.registry import load
    read_ttilog = load("cellab.services", "ttilog", "TTI log reader")  # the emulator room's format

    time.sleep(TTI_LOG_FLUSH_S)
    rec = read_ttilog(tti_log).ue(ue)
    delivered = np.cumsum(rec["dl_delivered_bytes"].astype(np.int64))
    entered = delivered + rec["dl_queue_bytes"].astype(np.int64)
    if not len(delivered) or delivered[-1] == 0:
        return []
    byte = np.arange(PACKET_BYTES, delivered[-1] + 1, PACKET_BYTES)
    left = np.searchsorted(delivered, byte)
    came = np.searchsorted(entered, byte)
    return (rec["tti"][left].astype(np.int64) - rec["tti"][came].astype(np.int64)).tolist()


@contextmanager
def wired_path(prefix: str, rate_mbit: float, buffer_bytes: int) -> Iterator[Topology]:
    from cellab.labs.wired import WiredLab

    lab = WiredLab(prefix=prefix, rate_mbit=rate_mbit, buffer_bytes=buffer_bytes)
    try:
        yield lab.up()
    finally:
        lab.down()


@contextmanager
def loaded(names: list[str], netns: str | None = None, dev: str | None = None) -> Iterator[None]:
    """Modules loaded for the block and let go of after it: a congestion control is held for the block (by
    `netns`, else by this process) and goes when nobody else holds it; a tc program goes if the block
    attached it (one another process had attached stays)."""
    before = set(modules.loaded())
    modules.load(names, netns=netns, dev=dev)
    try:
        yield
    finally:
        ours = [n for n in names if n in modules.CC_MODULES or n not in before]
        if ours:
            modules.unload(ours, netns=netns)


@contextmanager
def sender_in(topo: Topology, log_dir: Path, sample_ms: int = 10, **kw: Any) -> Iterator[Sender]:
    s = Sender(SenderConfig(netns=topo.server.netns, port=5301, sample_ms=sample_ms, **kw), log_dir)
    s.start()
    try:
        yield s
    finally:
        s.stop()


@dataclass(frozen=True)
class FlowRun:
    result: flowclient.FlowResult
    summary: dict[str, Any]
    samples: list[dict[str, Any]]

    @property
    def throughput_bps(self) -> float:
        return self.result.bytes_received * 8 / max(self.result.fct_s, 1e-9)

    def mean_rtt_ms(self, skip_ms: float = 0.0) -> float:
        rtts = [s["rtt_us"] for s in self.samples if s["elapsed_ms"] >= skip_ms and s["rtt_us"]]
        return sum(rtts) / len(rtts) / 1e3 if rtts else float("nan")

    def recovery(self, capacity_bps: float) -> dict[str, float]:
        """The first loss-recovery episode (CA state 3) seen in the samples: its length, the new data
        sent in it, the rwnd-limited time in it, and link utilisation = bytes the sender put on the wire
        (segments with their IP/TCP headers, as the paper's packet size S = 1515 B counts them) /
        (C x length). The episode is bracketed by the samples just before and after it, so a short
        sample interval keeps the edges tight."""
        idx = [i for i, s in enumerate(self.samples) if s["ca_state"] == 3]
        if not idx:
            return {}
        a = max(0, idx[0] - 1)
        end = idx[0]
        while end + 1 < len(self.samples) and self.samples[end + 1]["ca_state"] != 0:
            end += 1
        b = min(len(self.samples) - 1, end + 1)
        ra, rb = self.samples[a], self.samples[b]
        dt_s = (rb["elapsed_ms"] - ra["elapsed_ms"]) / 1e3
        sent = rb["bytes_sent"] - ra["bytes_sent"]
        retrans = rb["bytes_retrans"] - ra["bytes_retrans"]
        mss = rb.get("snd_mss") or MTU_BYTES - TCP_IP_HEADER_BYTES
        wire = sent * (mss + TCP_IP_HEADER_BYTES) / mss
        return {
            "duration_ms": dt_s * 1e3,
            "new_bytes": float(sent - retrans),
            "rwnd_limited_ms": (rb["rwnd_limited_us"] - ra["rwnd_limited_us"]) / 1e3,
            "utilisation": wire * 8 / (capacity_bps * dt_s) if dt_s > 0 else 0.0,
            "went_to_loss": float(any(s["ca_state"] == 4 for s in self.samples[a:b + 1])),
        }


def run_flow(topo: Topology, sender: Sender, cc: str, ue: int = 0, **fetch_kw: Any) -> FlowRun:
    """One flow from the sender to UE `ue`, with the sender's summary and samples of that flow."""
    result = flowclient.fetch(topo.server.address, sender.port or 5301, cc_name=cc, netns=topo.ues[ue].netns,
                              **fetch_kw)
    summary: dict[str, Any] = {}
    # the sender writes the summary when it sees the receiver's close; give it a moment
    for _ in range(200):
        rows = [r for r in sender.summaries() if r["flow_id"] == result.flow_id]
        if rows:
            summary = rows[-1]  # the log appends; a restarted sender reuses flow ids
            break
        threading.Event().wait(0.01)
    return FlowRun(result, summary, sender.samples(result.flow_id))
