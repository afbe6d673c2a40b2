"""Report rendering time: a 60-run synthetic result folder (3 schemes × 2 channels × 10 seeds, every metric of
docs/metrics.md, 2000-point timelines), rendered by `write_report`, beside a 6-run folder of the same shape
rendered in the same run (the per-run cost ratio says whether the cost grows faster than the runs).
Target: 60 runs in at most 10 s.

    python -m cellab.bench report
"""

from __future__ import annotations

import os
import resource
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import yaml

TARGET_S = 10.0
POINTS = 2000  # timeline samples per series, as a 20 s probe run's sender RTT (TCP_INFO every 10 ms)


def run_metrics(rng: np.random.Generator, rate_mbit: float, delay_ms: float, points: int = POINTS) -> dict[str, Any]:
    """Every metric of docs/metrics.md, made up but shaped like a real run."""
    t_s = np.linspace(0, 10, points)
    capacity = rate_mbit * 1e6 * (1.2 + 0.3 * np.sin(t_s))
    throughput = capacity * rng.uniform(0.6, 0.95, points)
    rtt = delay_ms + rng.gamma(2.0, delay_ms / 4, points)
    return {
        "throughput_bps": float(throughput.mean()), "capacity_bps": float(capacity.mean()),
        "utilization": float(throughput.mean() / capacity.mean()), "rtt_mean_ms": float(rtt.mean()),
        "rtt_p95_ms": float(np.percentile(rtt, 95)), "rtt_source": "sender tcp_info",
        "retransmits": int(rng.integers(0, 50)), "fct_mean_s": 1.5, "jain_fairness": 0.98,
        "sr_true_ms": 20, "sr_regime": "sr-limited", "sr_estimate_ms": 20,
        "rtt_series_ms": rtt.tolist(), "throughput_series_bps": throughput[::20].tolist(),
        "ack_gap_ms": rng.exponential(5, 100).tolist(),
        "timeline": {"attenuation_db": {"t_s": [0, 5], "v": [10, 30]},
                     "capacity_bps": {"t_s": t_s.tolist(), "v": capacity.tolist()},
                     "throughput_bps": {"t_s": t_s.tolist(), "v": throughput.tolist()},
                     "rtt_ms": {"t_s": t_s.tolist(), "v": rtt.tolist()}},
    }


def synthetic_folder(out: Path, seeds: int, *, seed: int = 3) -> Path:
    """A finished campaign folder written by the store: cc × channel × `seeds` seeds, every run ok."""
    from cellab.records import PlannedRun
    from cellab.results.store import ResultStore

    rng = np.random.default_rng(seed)
    factors = {"cc": ["cubic", "bbr", "c2tcp"], "channel": ["static", "mobile"], "seed": list(range(seeds))}
    combos = [{"cc": cc, "channel": ch, "seed": s} for cc in factors["cc"] for ch in factors["channel"]
              for s in factors["seed"]]
    campaign = {"name": f"bench-{len(combos)}", "lab": "virtual", "factors": factors,
                "fixed": {"n_prb": 25, "rlc_queue": 4194304}, "workload": {"tool": "probe", "duration_s": 10}}
    planned = [PlannedRun(index=i, run_id=f"r{i:03d}", repeat=0, factors=f, params=f) for i, f in enumerate(combos)]
    store = ResultStore.create(out, campaign["name"], yaml.safe_dump(campaign, sort_keys=False), planned)
    for run in planned:
        store.start(run)
        store.finish(run, "ok", metrics=run_metrics(rng, 8 if run.factors["cc"] == "bbr" else 10,
                                                    30 if run.factors["channel"] == "static" else 45))
    return store.root


def _cpu_s() -> float:
    """CPU seconds of this process and its finished children (the drawing workers)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def timed(folder: Path) -> tuple[float, float]:
    """(wall-clock s, CPU s) of one report: the CPU time does not grow when other work shares the machine."""
    from cellab.report.page import write_report

    started, cpu = time.monotonic(), _cpu_s()
    write_report(folder)
    return time.monotonic() - started, _cpu_s() - cpu


def main() -> None:
    from cellab.report.figures import default_workers

    with tempfile.TemporaryDirectory(prefix="cellab-report-bench-") as tmp:
        small = synthetic_folder(Path(tmp) / "small", seeds=1)
        large = synthetic_folder(Path(tmp) / "large", seeds=10)
        timed(small)  # warm up: the first report imports and caches fonts
        small_s, small_cpu = timed(small)
        large_s, large_cpu = timed(large)
    ratio = (large_s / 60) / (small_s / 6)
    verdict = "ok" if large_s <= TARGET_S else f"SLOWER than the {TARGET_S:.0f} s target"
    load = os.getloadavg()[0]
    print(f"report: 60 runs {large_s:.1f} s ({verdict}; CPU {large_cpu:.1f} s), 6 runs {small_s:.1f} s (CPU "
          f"{small_cpu:.1f} s); per-run cost 60 vs 6 runs: {ratio:.2f}x; {default_workers()} drawing process(es), "
          f"load average {load:.1f} on {os.cpu_count()} CPUs", flush=True)


if __name__ == "__main__":
    main()
