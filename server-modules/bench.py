"""Benchmark of the server modules on the virtual cell: the papers' comparisons, measured beside the
paper values. Needs root, the built programs (`make build`) and ../shared/data/traces.

    python -m cellab.server.bench            # everything (a few minutes)
    python -m cellab.server.bench c2tcp      # one part: c2tcp, scubic, recovery, exll

Every line: what, the measured value, the baseline measured in the same run, their ratio, and the
paper's ratio (the target).
"""

from __future__ import annotations

import os
import secrets
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from cellab.paths import PROJECT_ROOT

from . import experiment, flowclient, modules

TRACES = PROJECT_ROOT.parent / "shared" / "data" / "traces"


def line(what: str, value: float, baseline: float, unit: str, target: str) -> None:
    ratio = baseline / value if value else float("nan")
    print(f"{what}: {value:.3f} {unit}, baseline {baseline:.3f} {unit}, ratio {ratio:.2f}, target {target}",
          flush=True)


def prefix() -> str:
    return "bn" + secrets.token_hex(2)


def bench_c2tcp(logs: Path) -> None:
    """Paper Table I: TMobile LTE driving trace, 20 ms min RTT, 150 kB buffer, Target 50 ms, a constant
    48 Mbit/s uplink trace (the paper's wired48 ACK path, no SR wait). Each scheme
    runs 20 s on the same two slices of the trace (starting at 0 s and 200 s; the cell restarts for
    each run); throughput and average delay are averaged over the slices."""
    src = TRACES / "TMobile-LTE-driving.down"
    duration_ms, offsets_s = 20_000, (0, 200)
    schemes = ("c2tcp", "cubic", "bbr")
    tput: dict[str, list[float]] = {cc: [] for cc in schemes}
    delay: dict[str, list[float]] = {cc: [] for cc in schemes}
    min_rtts_ms: list[float] = []
    idle: list[float] = []
    alphas: list[float] = []
    with experiment.loaded(["c2tcp"]):
        modules.set_param("c2tcp", "target_ms", 50)
        for offset_s in offsets_s:
            trace = experiment.rotated_trace(src, offset_s * 1000, logs / f"trace-{offset_s}.down")
            for cc in schemes:
                with experiment.virtual_path(prefix(), 0, 20.0, 150_000, trace=trace, uplink_mbit=48) as topo, \
                        experiment.sender_in(topo, logs / f"c2tcp-{cc}-{offset_s}", sample_ms=20) as sender:
                    run = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=duration_ms,
                                              rcvbuf_bytes=8 << 20, timeout_s=duration_ms / 1e3 + 30)
                tput[cc].append(run.throughput_bps / 1e6)
                delay[cc].append(run.mean_rtt_ms())
                min_rtts_ms.append(run.summary.get("min_rtt_us", 0) / 1e3)
                if cc == "c2tcp":
                    alphas.append(modules.stats("c2tcp")["last_alpha_x1024"] / 1024)
            # context: the RTT of the unloaded path on the same slice (the trace's own delivery gaps)
            with experiment.virtual_path(prefix(), 0, 20.0, 150_000, trace=trace, uplink_mbit=48) as topo:
                idle += idle_rtts_ms(topo, seconds=8)
    idle.sort()
    min_rtt_ms = min(min_rtts_ms)
    print(f"c2tcp context: unloaded-path RTT on these slices p10/p50/p90 = {idle[len(idle) // 10]:.1f}/"
          f"{idle[len(idle) // 2]:.1f}/{idle[9 * len(idle) // 10]:.1f} ms, min RTT {min_rtt_ms:.1f} ms, Target 50 ms, "
          f"C2TCP alpha at the end of each run {', '.join(f'{a:.2f}' for a in alphas)}", flush=True)
    c2_tput, c2_delay = statistics.mean(tput["c2tcp"]), statistics.mean(delay["c2tcp"])
    for cc, paper_tput, paper_delay in (("cubic", "1.28", "8.95"), ("bbr", "1.22", "2.44")):
        line(f"c2tcp table I {cc}/c2tcp throughput", c2_tput, statistics.mean(tput[cc]), "Mbit/s",
             f"{paper_tput} (paper)")
        line(f"c2tcp table I {cc}/c2tcp average delay", c2_delay, statistics.mean(delay[cc]), "ms RTT",
             f"{paper_delay} (paper)")
        line(f"c2tcp table I {cc}/c2tcp average queuing delay", c2_delay - min_rtt_ms,
             statistics.mean(delay[cc]) - min_rtt_ms, "ms", f"{paper_delay} (paper)")


def idle_rtts_ms(topo, seconds: float) -> list[float]:
    """Sorted ping RTTs (50 per second) from the server to UE 0 with no other traffic."""
    count = int(seconds * 50)
    out = subprocess.run(["ip", "netns", "exec", topo.server.netns, "ping", "-n", "-c", str(count), "-i", "0.02",
                          topo.ues[0].address], capture_output=True, text=True, timeout=seconds + 30, check=False).stdout
    rtts = sorted(float(ln.split("time=")[1].split()[0]) for ln in out.splitlines() if "time=" in ln)
    return rtts or [float("nan")]


def bench_scubic(logs: Path, reps: int = 5) -> None:
    """FCT efficiency Omega = T_min / T for 1 MB flows (Eq. 1-2), 50 Mbit/s, 50 ms, 1 BDP buffer;
    S-Cubic's measured flow follows a seeding flow to the same destination, interleaved with Cubic.
    Twice: as in the paper (slow start continues after Startup) and with ssthresh_at_exit = 1."""
    rate_mbit, rtt_ms, size = 50.0, 50.0, 1_000_000
    bdp = int(rate_mbit * 1e6 / 8 * rtt_ms / 1e3)
    for flag in (0, 1):
        fct: dict[str, list[float]] = {"cubic": [], "scubic": []}
        with experiment.loaded(["scubic"]), \
                experiment.virtual_path(prefix(), rate_mbit, rtt_ms, bdp, initrwnd_pkts=1000) as topo, \
                experiment.sender_in(topo, logs / f"scubic-{flag}") as sender:
            modules.set_param("scubic", "ssthresh_at_exit", flag)
            for _ in range(reps):
                for cc in ("cubic", "scubic"):
                    experiment.run_flow(topo, sender, cc, amount=size, rcvbuf_bytes=8 << 20)
                    run = experiment.run_flow(topo, sender, cc, amount=size, rcvbuf_bytes=8 << 20)
                    fct[cc].append(run.result.fct_s)
            d_min_s = min(r["min_rtt_us"] for r in sender.summaries() if r["min_rtt_us"]) / 1e6
        wire_bytes = size * 1514 / 1448  # S includes headers
        t_min = 2 * d_min_s + wire_bytes * 8 / (rate_mbit * 1e6)
        omega = {cc: statistics.mean(t_min / t for t in v) for cc, v in fct.items()}
        variant = "as in the paper" if flag == 0 else "ssthresh_at_exit=1"
        line(f"scubic 1 MB FCT efficiency, {variant} (cubic/scubic)", omega["scubic"], omega["cubic"], "Omega",
             "paper Omega: S-Cubic 0.988 at 50 ms (100 Mbit/s), Cubic < 0.5")
        mean_fct = {cc: statistics.mean(v) for cc, v in fct.items()}
        line(f"scubic 1 MB FCT, {variant} (cubic/scubic)", mean_fct["scubic"], mean_fct["cubic"], "s",
             ">= 1.43 (30% faster, the test)")


def bench_recovery(logs: Path) -> None:
    """Link utilisation during recovery after a burst of 10 lost packets, 20 Mbit/s, U = 100 ms,
    receiver window = C x U; PRR (kernel Cubic) against QARR/BARR with opportunistic retransmission
    and send buffer factor 3 (paper T4, n = 10: 0.96 QARR, 0.97 BARR; PRR original: 0.057)."""
    rate_mbit = 20.0
    util: dict[str, dict[str, float]] = {}
    with experiment.virtual_path(prefix(), rate_mbit, 100.0, 4_300_000) as topo, \
            experiment.loaded(["cubic_qarr", "cubic_barr"]), \
            experiment.loaded(["burst_drop"], netns=topo.ues[0].netns, dev="lte0"), \
            experiment.sender_in(topo, logs / "recovery") as sender:
        for cc in ("cubic", "cubic_qarr", "cubic_barr"):
            modules.set_param("burst_drop", "after_pkts", 3000)
            modules.set_param("burst_drop", "drop_pkts", 10)
            if cc != "cubic":
                modules.load(["or_ingress"], netns=topo.server.netns, dev="lte0")
            try:
                run = experiment.run_flow(topo, sender, cc, mode=flowclient.MODE_TIME_MS, amount=4000,
                                          rcvbuf_after_connect_bytes=200_000, timeout_s=30)
            finally:
                if cc != "cubic":
                    modules.unload(["or_ingress"])
            util[cc] = run.recovery(rate_mbit * 1e6)
    base = util["cubic"]
    for cc, paper in (("cubic_qarr", "0.96 (paper T4, n=10)"), ("cubic_barr", "0.97 (paper T4, n=10)")):
        u = util[cc]
        if not u or not base:
            print(f"recovery {cc}: no recovery episode observed", flush=True)
            continue
        line(f"recovery link utilisation {cc}+OR (prr/{cc})", u["utilisation"], base["utilisation"], "",
             f"utilisation {paper}; PRR original 0.057")
        line(f"recovery rwnd-limited time {cc}+OR (prr/{cc})", u["rwnd_limited_ms"], base["rwnd_limited_ms"], "ms",
             "> 1 (the test)")


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
    "c2tcp": bench_c2tcp, "scubic": bench_scubic, "recovery": bench_recovery, "exll": bench_exll,
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
