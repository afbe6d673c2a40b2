"""Benchmark of the server modules on the virtual cell: the papers' comparisons, measured beside the
paper values. Needs root, the built programs (`make build`) and ../shared/data/traces.

    python -m cellab.server.bench            # everything (a few minutes)
    python -m cellab.server.bench c2tcp      # one part: c2tcp, frontier, scubic, recovery, exll

Every line: what, the measured value, the baseline measured in the same run, their ratio, and the
paper's ratio (the target).
"""

from __future__ import annotations

import os
import secrets
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from cellab.paths import PROJECT_ROOT

from . import experiment, flowclient, frontier, modules, table1

TRACES = PROJECT_ROOT.parent / "shared" / "data" / "traces"


def _print(what: str, value: float, baseline: float, unit: str, ratio: float, target: str) -> None:
    print(f"{what}: {value:.3f} {unit}, baseline {baseline:.3f} {unit}, ratio {ratio:.2f}, target {target}",
          flush=True)


def line(what: str, value: float, baseline: float, unit: str, target: str) -> None:
    """One result with the ratio baseline / value (how many times better than the baseline)."""
    _print(what, value, baseline, unit, baseline / value if value else float("nan"), target)


def share(what: str, value: float, baseline: float, unit: str, target: str) -> None:
    """One result with the ratio value / baseline (a share of the baseline)."""
    _print(what, value, baseline, unit, value / baseline if baseline else float("nan"), target)


def prefix() -> str:
    return "bn" + secrets.token_hex(2)


def bench_c2tcp(logs: Path) -> None:
    """Paper Table I (Cubic against C2TCP) on every downlink trace in ../shared/data/traces: `cellab bench
    table1` over all of them (see table1.py for the setup), then the averaged ratios beside the paper's."""
    traces = sorted(TRACES.glob("*.down"))
    results = table1.run(traces, table1.DEFAULT_SLICES, logs)
    for row in table1.table_rows(results):
        print(row, flush=True)
    avg = table1.average(results)
    line("c2tcp table I cubic/c2tcp throughput, averaged over traces", 1.0, 1 / avg["throughput_ratio"], "x",
         f"{table1.PAPER['throughput_ratio']} (paper)")
    line("c2tcp table I cubic/c2tcp average queueing delay, averaged over traces", 1.0, avg["delay_ratio"], "x",
         f"{table1.PAPER['delay_ratio']} (paper)")
    line("c2tcp table I cubic/c2tcp p95 queueing delay, averaged over traces", 1.0, avg["p95_ratio"], "x",
         f"{table1.PAPER['p95_ratio']} (paper)")


def bench_frontier(logs: Path) -> None:
    """The thin slice (issue 18): Cubic, C2TCP and the constant-window frontier drawn by cubic_cap there."""
    f = frontier.measure(TRACES / frontier.THIN_TRACE, frontier.THIN_OFFSET_MS, logs)
    share("c2tcp on the thin slice, throughput against the constant windows' at its delay", f.c2tcp.throughput_mbit,
         frontier.throughput_at_delay(f.constant_windows, f.c2tcp.delay_ms), "Mbit/s", ">= 1 (on or above the curve)")
    share("c2tcp on the thin slice, throughput against cubic's", f.c2tcp.throughput_mbit, f.cubic.throughput_mbit,
         "Mbit/s", f">= {frontier.ISSUE_THROUGHPUT_SHARE} (issue 18)")
    share("c2tcp on the thin slice, mean queueing delay against cubic's", f.c2tcp.delay_ms, f.cubic.delay_ms, "ms",
         f"<= {frontier.ISSUE_DELAY_SHARE} (issue 18)")
    share(f"constant windows at {frontier.ISSUE_DELAY_SHARE} x cubic's delay, throughput against cubic's",
         f.frontier_at_issue_delay * f.cubic.throughput_mbit, f.cubic.throughput_mbit, "Mbit/s",
         f">= {frontier.ISSUE_THROUGHPUT_SHARE} if any constant window meets issue 18's bar there")


def percentile(values: list[float], pct: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(pct / 100 * len(ordered)))] if ordered else float("nan")


SCUBIC_FLOW_BYTES = 1_000_000
MSS_BYTES = 1448           # payload of a 1500-byte IP packet with timestamps
SCUBIC_REPS = 5


def scubic_omegas(logs: Path, name: str, rate_mbit: float, rtt_ms: float, uplink_mbit: float | None,
                  ssthresh_at_exit: int = 0) -> dict[str, list[float]]:
    """FCT efficiency (Eq. 1-2) of 1 MB flows, Cubic and S-Cubic interleaved to one destination, 1 BDP
    of queue. One S-Cubic flow seeds the state first, so every measured S-Cubic flow starts from the
    estimate its predecessor stored (the paper's runs follow each other the same way).
    Omega = T_min / T, T_min = 2 d_min + S / C with S counted as the bottleneck sees it (IP bytes)."""
    bdp = int(rate_mbit * 1e6 / 8 * rtt_ms / 1e3)
    fct: dict[str, list[float]] = {"cubic": [], "scubic": []}
    with experiment.loaded(["scubic"]), \
            experiment.virtual_path(prefix(), rate_mbit, rtt_ms, bdp, initrwnd_pkts=1000,
                                    uplink_mbit=uplink_mbit) as topo, \
            experiment.sender_in(topo, logs / f"scubic-{name}") as sender:
        modules.set_param("scubic", "ssthresh_at_exit", ssthresh_at_exit)
        experiment.run_flow(topo, sender, "scubic", amount=SCUBIC_FLOW_BYTES, rcvbuf_bytes=8 << 20)
        for _ in range(SCUBIC_REPS):
            for cc in ("cubic", "scubic"):
                run = experiment.run_flow(topo, sender, cc, amount=SCUBIC_FLOW_BYTES, rcvbuf_bytes=8 << 20)
                fct[cc].append(run.result.fct_s)
        d_min_s = min(r["min_rtt_us"] for r in sender.summaries() if r["min_rtt_us"]) / 1e6
    t_min = 2 * d_min_s + SCUBIC_FLOW_BYTES * experiment.MTU_BYTES / MSS_BYTES * 8 / (rate_mbit * 1e6)
    return {cc: [t_min / t for t in v] for cc, v in fct.items()}


def bench_scubic(logs: Path) -> None:
    """Paper Fig. 8 setting: 100 Mbit/s, 50 ms, 1 BDP buffer, 1 MB flows, a wired ACK path (constant-rate
    uplink, as the paper's DummyNet testbed). Then the LTE cell's own uplink (SR every 5 ms, ACKs in
    bunches) at 50 Mbit/s, where 1 MB is 3.2 BDP instead of 1.6: as in the paper and with
    ssthresh_at_exit = 1."""
    cases = (("paper", 100.0, 100.0, 0, "paper Fig. 8: S-Cubic 0.988 (mean over sizes, 50 ms), Cubic < 0.5"),
             ("lte", 50.0, None, 0, "LTE uplink, 50 Mbit/s (context)"),
             ("lte-ssthresh", 50.0, None, 1, "LTE uplink, 50 Mbit/s, ssthresh_at_exit=1 (context)"))
    for name, rate, uplink, flag, target in cases:
        omega = scubic_omegas(logs, name, rate, 50.0, uplink, flag)
        line(f"scubic 1 MB FCT efficiency {name} {rate:.0f} Mbit/s (cubic/scubic)", statistics.mean(omega["scubic"]),
             statistics.mean(omega["cubic"]), "Omega", target)
        print(f"scubic {name}: S-Cubic Omega per flow {', '.join(f'{o:.2f}' for o in omega['scubic'])}", flush=True)


RECOVERY_RATE_MBIT = 20.0      # paper Table 3: C = 20 Mbit/s (HSPA+)
RECOVERY_U_MS = 100.0          # paper: U = 100 ms
RECOVERY_BUFFER_BYTES = 4_300_000  # paper: L = 4.3 MB
RECOVERY_RCVBUF_BYTES = 200_000    # after the handshake: a receive window of about C x U (paper: AW = C x U)
RECOVERY_BURST_PKTS = 10       # paper T4: n = 10


def recovery_utilisation(logs: Path, name: str, uplink_mbit: float | None) -> dict[str, dict[str, float]]:
    """One 4 s flow per variant, 10 consecutive data packets dropped at the receiver after 3000."""
    util: dict[str, dict[str, float]] = {}
    with experiment.virtual_path(prefix(), RECOVERY_RATE_MBIT, RECOVERY_U_MS, RECOVERY_BUFFER_BYTES,
                                 uplink_mbit=uplink_mbit) as topo, \
            experiment.loaded(["cubic_qarr", "cubic_barr"]), \
            experiment.loaded(["burst_drop"], netns=topo.ues[0].netns, dev="lte0"), \
            experiment.sender_in(topo, logs / f"recovery-{name}", sample_ms=2) as sender:
        for cc in ("cubic", "cubic_qarr", "cubic_barr"):
            modules.set_param("burst_drop", "after_pkts", 3000)
            modules.set_param("burst_drop", "drop_pkts", RECOVERY_BURST_PKTS)
            if cc != "cubic":
                modules.load(["or_ingress"], netns=topo.server.netns, dev="lte0")
            try:
                run = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=4000,
                                          rcvbuf_after_connect_bytes=RECOVERY_RCVBUF_BYTES, timeout_s=30)
            finally:
                if cc != "cubic":
                    modules.unload(["or_ingress"])
            util[cc] = run.recovery(RECOVERY_RATE_MBIT * 1e6)
    return util


def bench_recovery(logs: Path) -> None:
    """Link utilisation during recovery after a burst of 10 lost packets, 20 Mbit/s, U = 100 ms, 4.3 MB
    buffer, receiver window = C x U; PRR (kernel Cubic) against QARR/BARR with opportunistic
    retransmission and send buffer factor 3 (paper T4, n = 10: 0.96 QARR, 0.97 BARR; PRR original 0.057).
    Utilisation = bytes the sender put on the wire during the episode / (C x its length), from TCP_INFO
    every 2 ms (the paper traced the sender too). First on a smooth ACK path (constant-rate uplink, as
    the paper's DPDK emulator), then with the LTE uplink's SR-driven ACK bunches (context)."""
    for name, uplink, label in (("paper", RECOVERY_RATE_MBIT * 5, "smooth ACK path"),
                                ("lte", None, "LTE uplink, context")):
        util = recovery_utilisation(logs, name, uplink)
        base = util["cubic"]
        for cc, paper in (("cubic_qarr", "0.96 (paper T4, n=10)"), ("cubic_barr", "0.97 (paper T4, n=10)")):
            u = util[cc]
            if not u or not base:
                print(f"recovery {name} {cc}: no recovery episode observed", flush=True)
                continue
            line(f"recovery link utilisation {label}, {cc}+OR (prr/{cc})", u["utilisation"], base["utilisation"], "",
                 f"utilisation {paper}; PRR original 0.057" if name == "paper" else "-")
            line(f"recovery rwnd-limited time {label}, {cc}+OR (prr/{cc})", u["rwnd_limited_ms"],
                 base["rwnd_limited_ms"], "ms", "> 1 (the test)")


def bench_exll(logs: Path) -> None:
    """Sender-side ExLL vs Cubic on a stationary cell (constant 24 Mbit/s, 50 ms, 10 ms SR period, deep
    queue): RTT / min RTT and throughput (thesis, stationary: ExLL 66/50 ms at 72 Mbit/s, Cubic 261 ms
    at 75 Mbit/s)."""
    runs: dict[str, experiment.FlowRun] = {}
    with experiment.loaded(["exll"]), \
            experiment.virtual_path(prefix(), 24.0, 50.0, 2_000_000, sr_period_ms=10) as topo, \
            experiment.sender_in(topo, logs / "exll", sample_ms=20) as sender:
        for cc in ("exll", "cubic"):
            runs[cc] = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=15_000,
                                           rcvbuf_bytes=8 << 20, timeout_s=45)
    min_rtt_ms = min(r.summary["min_rtt_us"] for r in runs.values()) / 1e3
    ex, cu = runs["exll"], runs["cubic"]
    line("exll RTT/minRTT (cubic/exll)", ex.mean_rtt_ms(1000) / min_rtt_ms, cu.mean_rtt_ms(1000) / min_rtt_ms, "x",
         "thesis 1.32 ExLL vs 5.22 Cubic -> 3.95")
    line("exll throughput (cubic/exll)", ex.throughput_bps / 1e6, cu.throughput_bps / 1e6, "Mbit/s",
         "thesis 75/72 -> 1.04")


PARTS: dict[str, Callable[[Path], None]] = {
    "c2tcp": bench_c2tcp, "frontier": bench_frontier, "scubic": bench_scubic, "recovery": bench_recovery, "exll": bench_exll,
}


def main() -> None:
    if os.geteuid() != 0:
        print("server-modules bench: needs root (namespaces and BPF); skipped", flush=True)
        return
    wanted = [a for a in sys.argv[1:] if a in PARTS] or list(PARTS)
    with experiment.bpf_lock(), tempfile.TemporaryDirectory(prefix="cellab-sm-bench-") as tmp:
        for name in wanted:
            PARTS[name](Path(tmp))


if __name__ == "__main__":
    main()
