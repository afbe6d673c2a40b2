"""C2TCP's Table I setup on any Mahimahi downlink traces: Cubic and C2TCP on the same slices of each
trace, per trace and averaged as the paper does (each trace normalised to C2TCP, then averaged).

Paper setup (Sec. VII): 20 ms minimum RTT, 150 KB bottleneck buffer, Target 50 ms, Mahimahi's wired48
ACK path (a constant 48 Mbit/s uplink here: no SR wait). Throughput = all bytes / all time of the
trace's slices; delay = per-packet queueing delay at the bottleneck (arrival to delivery, the wait for a
delivery opportunity included: Mahimahi's), pooled over the slices.
"""

from __future__ import annotations

import secrets
import statistics
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from cellab.campaign.traces import read_mahimahi

from . import experiment, flowclient, modules

MIN_RTT_MS = 20.0          # paper: 20 ms minimum RTT
BUFFER_BYTES = 150_000     # paper: 150 KB (mm-link droptail, 100 packets)
UPLINK_MBIT = 48           # the authors' ACK path: Mahimahi's wired48 trace
TARGET_MS = 50             # paper: the trace-driven default Target
SLICE_MS = 20_000
DEFAULT_SLICES = 5         # start times evenly spaced over the trace (the paper ran each trace to its end)
SCHEMES = ("cubic", "c2tcp")
PAPER = {"throughput_ratio": 1.28, "delay_ratio": 8.95, "p95_ratio": 8.54}  # Table I, Cubic vs C2TCP


@dataclass(frozen=True)
class SchemeResult:
    throughput_mbit: float
    delay_ms: float          # mean per-packet queueing delay
    p95_delay_ms: float
    rtt_ms: float            # mean RTT the sender saw (context)


@dataclass(frozen=True)
class TraceResult:
    trace: str
    slices: int
    trace_mbit: float        # mean capacity of the slices played
    buffer_ms: float         # how long the 150 KB buffer takes to drain at that rate: Cubic's delay ceiling
    idle_wait_ms: float      # mean wait of a lone packet for a delivery opportunity (context, not a floor)
    cubic: SchemeResult
    c2tcp: SchemeResult

    @property
    def throughput_ratio(self) -> float:
        """C2TCP / Cubic throughput (the issue's definition; the paper prints the inverse, 1.28)."""
        return self.c2tcp.throughput_mbit / self.cubic.throughput_mbit if self.cubic.throughput_mbit else float("nan")

    @property
    def delay_ratio(self) -> float:
        """Cubic / C2TCP average queueing delay (the paper: 8.95)."""
        return self.cubic.delay_ms / self.c2tcp.delay_ms if self.c2tcp.delay_ms else float("nan")

    @property
    def p95_ratio(self) -> float:
        return self.cubic.p95_delay_ms / self.c2tcp.p95_delay_ms if self.c2tcp.p95_delay_ms else float("nan")

    def as_json(self) -> dict:
        return asdict(self) | {"throughput_ratio": self.throughput_ratio, "delay_ratio": self.delay_ratio,
                               "p95_ratio": self.p95_ratio}


def check_traces(traces: list[Path]) -> None:
    """Every trace readable as the cell reads it; InputError naming the file and the rule otherwise."""
    for trace in traces:
        read_mahimahi(trace)


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))] if ordered else float("nan")


def _slice_offsets_ms(trace: Path, slices: int) -> list[int]:
    period_ms = read_mahimahi(trace)[-1]
    return [i * period_ms // slices for i in range(slices)]


@dataclass(frozen=True)
class SliceRun:
    bytes_received: int
    duration_s: float
    queueing_delays_ms: list[int]  # per delivered packet
    rtt_ms: float

    @property
    def throughput_mbit(self) -> float:
        return self.bytes_received * 8 / self.duration_s / 1e6 if self.duration_s else 0.0

    @property
    def delay_ms(self) -> float:
        return statistics.mean(self.queueing_delays_ms or [0])


def play(sliced: Path, cc: str, logs: Path) -> SliceRun:
    """One SLICE_MS flow of congestion control `cc` over one trace slice, on a fresh cell in the paper's setup."""
    with experiment.virtual_path("t1" + secrets.token_hex(2), 0, MIN_RTT_MS, BUFFER_BYTES, trace=sliced,
                                 uplink_mbit=UPLINK_MBIT, realtime=True) as topo, \
            experiment.sender_in(topo, logs, sample_ms=20) as sender:
        run = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=SLICE_MS,
                                  rcvbuf_bytes=8 << 20, timeout_s=SLICE_MS / 1e3 + 30)
        qdelay = experiment.queueing_delays_ms(topo.extra["tti_log"])
    return SliceRun(run.result.bytes_received, run.result.fct_s, qdelay, run.mean_rtt_ms())


def run_trace(trace: Path, slices: int, logs: Path, progress: Callable[[str], None] = print) -> TraceResult:
    """Cubic and C2TCP, SLICE_MS each, on `slices` slices of one trace (the cell restarts for every run, so
    both schemes see the same capacity). The c2tcp module must be loaded."""
    got = {cc: {"bytes": 0, "s": 0.0, "qdelay": [], "rtt": []} for cc in SCHEMES}
    rates, idles = [], []
    for offset_ms in _slice_offsets_ms(trace, slices):
        sliced = experiment.rotated_trace(trace, offset_ms, logs / f"{trace.stem}-{offset_ms}.down")
        rates.append(experiment.trace_rate_mbit(sliced, SLICE_MS))
        idles.append(experiment.idle_trace_rtt_ms(sliced, SLICE_MS, MIN_RTT_MS) - MIN_RTT_MS)
        row = []
        for cc in SCHEMES:
            one = play(sliced, cc, logs / f"{trace.stem}-{cc}-{offset_ms}")
            g = got[cc]
            g["bytes"] += one.bytes_received
            g["s"] += one.duration_s
            g["qdelay"] += one.queueing_delays_ms
            g["rtt"].append(one.rtt_ms)
            row.append(f"{cc} {one.throughput_mbit:.2f} Mbit/s {one.delay_ms:.0f} ms")
        progress(f"  {trace.name} slice at {offset_ms / 1e3:.0f} s ({rates[-1]:.1f} Mbit/s): " + "; ".join(row))
    mean_rate = statistics.mean(rates)

    def result(cc: str) -> SchemeResult:
        g = got[cc]
        return SchemeResult(g["bytes"] * 8 / g["s"] / 1e6 if g["s"] else 0.0, statistics.mean(g["qdelay"] or [0]),
                            percentile(g["qdelay"], 95), statistics.mean(g["rtt"]))

    return TraceResult(trace.name, slices, mean_rate, BUFFER_BYTES * 8 / (mean_rate * 1e3) if mean_rate else 0.0,
                       statistics.mean(idles), result("cubic"), result("c2tcp"))


def average(results: list[TraceResult]) -> dict:
    """The paper's average: every trace normalised to C2TCP, then the ratios averaged over traces."""
    def mean(get: Callable[[TraceResult], float]) -> float:
        return statistics.mean(get(r) for r in results)

    return {"trace": "average", "traces": len(results),
            "cubic": {"throughput_mbit": mean(lambda r: r.cubic.throughput_mbit),
                      "delay_ms": mean(lambda r: r.cubic.delay_ms), "p95_delay_ms": mean(lambda r: r.cubic.p95_delay_ms)},
            "c2tcp": {"throughput_mbit": mean(lambda r: r.c2tcp.throughput_mbit),
                      "delay_ms": mean(lambda r: r.c2tcp.delay_ms), "p95_delay_ms": mean(lambda r: r.c2tcp.p95_delay_ms)},
            "throughput_ratio": mean(lambda r: r.throughput_ratio), "delay_ratio": mean(lambda r: r.delay_ratio),
            "p95_ratio": mean(lambda r: r.p95_ratio),
            "paper": {"throughput_ratio": round(1 / PAPER["throughput_ratio"], 3), "delay_ratio": PAPER["delay_ratio"],
                      "p95_ratio": PAPER["p95_ratio"]}}


def run(traces: list[Path], slices: int, logs: Path, progress: Callable[[str], None] = print) -> list[TraceResult]:
    check_traces(traces)
    out = []
    with experiment.loaded(["c2tcp"]):
        modules.set_param("c2tcp", "target_ms", TARGET_MS)
        for trace in traces:
            out.append(run_trace(trace, slices, logs, progress))
    return out


HEADER = (f"{'trace':<26} {'Mbit/s':>6} {'buffer':>7} {'wait':>6} | {'Cubic Mbit/s':>12} {'avg':>6} {'p95':>6} | "
          f"{'C2TCP Mbit/s':>12} {'avg':>6} {'p95':>6} | {'tput C/Cu':>9} {'delay Cu/C':>10} {'p95 Cu/C':>8}")


def table_rows(results: list[TraceResult]) -> list[str]:
    """The table as text: per trace, then the average (delays in ms). `buffer`: how long 150 KB takes to
    drain at the trace's mean rate (Cubic's delay ceiling); `wait`: a lone packet's mean wait for a
    delivery opportunity (context: an ACK-clocked flow's packets follow deliveries and can wait less)."""
    rows = [HEADER]
    for r in results:
        rows.append(f"{r.trace:<26} {r.trace_mbit:>6.1f} {r.buffer_ms:>5.0f}ms {r.idle_wait_ms:>4.0f}ms | "
                    f"{r.cubic.throughput_mbit:>12.2f} "
                    f"{r.cubic.delay_ms:>6.1f} {r.cubic.p95_delay_ms:>6.0f} | {r.c2tcp.throughput_mbit:>12.2f} "
                    f"{r.c2tcp.delay_ms:>6.1f} {r.c2tcp.p95_delay_ms:>6.0f} | {r.throughput_ratio:>9.2f} "
                    f"{r.delay_ratio:>10.2f} {r.p95_ratio:>8.2f}")
    if results:
        a = average(results)
        rows.append(f"{'average':<26} {'':>6} {'':>7} {'':>6} | {a['cubic']['throughput_mbit']:>12.2f} "
                    f"{a['cubic']['delay_ms']:>6.1f} {a['cubic']['p95_delay_ms']:>6.0f} | "
                    f"{a['c2tcp']['throughput_mbit']:>12.2f} {a['c2tcp']['delay_ms']:>6.1f} "
                    f"{a['c2tcp']['p95_delay_ms']:>6.0f} | {a['throughput_ratio']:>9.2f} {a['delay_ratio']:>10.2f} "
                    f"{a['p95_ratio']:>8.2f}")
        rows.append(f"{'paper (Table I)':<26} {'':>6} {'':>7} {'':>6} | {'':>12} {'':>6} {'':>6} | {'':>12} {'':>6} {'':>6} | "
                    f"{1 / PAPER['throughput_ratio']:>9.2f} {PAPER['delay_ratio']:>10.2f} {PAPER['p95_ratio']:>8.2f}")
    return rows
