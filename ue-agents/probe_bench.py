"""`make bench` for the receiver probe, through the emulated LTE cell (needs root and built programs).

1. SR-period estimation: 5 periods x 3 attenuation levels x N repetitions x both uplink policies.
   Ours (idle-uplink probes + the flow's burst phase) beside the thesis's estimator measured in the
   same runs (ExLL's T̂_SR = 2 (apRTT - mpRTT) of the download's observation phase, D() on a log
   scale): share correct / wrong / "not SR-limited" (or no period), and time to the first correct
   estimate. Thesis: 15 of 15 correct, for 10, 20 and 40 ms only, on eNBs that behaved like sr-strict.
2. ExLL vs Cubic vs BBR on a static channel near the thesis's stationary setting (min RTT ~50 ms,
   ~75 Mbit/s): mean RTT / min RTT and throughput, beside the thesis values.

One line per measurement: value, the baseline measured in the same run, the ratio, the target.
CELLAB_BENCH_REPS (default 5) sets the repetitions of part 1; CELLAB_BENCH_PARTS=sr,cc picks parts.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Self

from cellab.paths import find_program
from cellab.labs.proc import ManagedProcess

from cellab.contracts.ue import FetchRequest, ProbeFlow

from .probe_runner import run_fetch

PERIODS_MS = [5, 10, 20, 40, 80]
ATTENUATIONS_DB = [20.0, 45.0, 55.0]  # SINR 40 (capped, CQI 15), ~18 dB, ~8 dB in the cell's radio model
POLICIES = ["sr-strict", "srsenb"]
PORT = 5301
# thesis (ExLL, stationary real LTE, min RTT 50 ms): mean RTT ms, throughput Mbit/s
THESIS = {"exll": (66.0, 72.0), "bbr": (110.0, 70.0), "cubic": (261.0, 75.0)}


class _Lab:
    def __init__(self, work: Path, params: dict[str, Any]):
        from cellab.labs import embedded_lab_class
        VirtualLab = embedded_lab_class("virtual")  # the emulator room's lab, found through the registry

        self.lab = VirtualLab(prefix="pb" + secrets.token_hex(2), params=params)
        self.work = work

    def __enter__(self) -> Self:
        self.topo = self.lab.up()
        self.sender = ManagedProcess([str(find_program("cellab-send")), "serve", "--bind", self.topo.server.address,
                                      "--port", str(PORT), "--sample-ms", "0"], self.work / "send.log",
                                     self.topo.server.netns)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            out = subprocess.run(["ip", "netns", "exec", self.topo.server.netns, "ss", "-ltn"],
                                 capture_output=True, text=True, check=False).stdout
            if f":{PORT}" in out:
                break
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.sender.stop()
        self.lab.down()

    def fetch(self, name: str, flows: list[ProbeFlow], **kw: Any) -> dict[str, Any]:
        req = FetchRequest(server=self.topo.server.address, port=PORT, flows=flows, timeout_s=60,
                           packet_log=False, **kw)
        return run_fetch(req, self.work, name, netns=self.topo.ues[0].netns).summary


def _share(n: int, total: int) -> str:
    return f"{n}/{total} ({100.0 * n / total:.0f}%)" if total else "0/0"


def _line(name: str, value: str, baseline: str, ratio: str, target: str) -> None:
    print(f"{name}: {value} | baseline {baseline} | ratio {ratio} | target {target}", flush=True)


def bench_sr(work: Path, reps: int) -> None:
    for policy in POLICIES:
        ours = {"correct": 0, "wrong": 0, "none": 0}
        thesis = {"correct": 0, "wrong": 0, "none": 0}
        first_correct_ms: list[float] = []
        thesis_first_ms: list[float] = []
        total = 0
        with _Lab(work, {"ul_policy": policy, "core_delay_ms": 10.0, "sr_period_ms": 5}) as lab:
            for period in PERIODS_MS:
                for atten in ATTENUATIONS_DB:
                    lab.lab.configure({"sr_period_ms": period, "attenuation_db": atten})
                    for rep in range(reps):
                        s = lab.fetch(f"sr-{policy}-{period}-{int(atten)}-{rep}",
                                      [ProbeFlow(duration_s=2.0, cc="cubic")], sr_probes=30)
                        sr = s["sr_estimate"]
                        if os.environ.get("CELLAB_BENCH_VERBOSE"):
                            print(f"  run {policy} P={period} att={atten:g} rep={rep}: ours {sr['period_ms']} "
                                  f"({sr['source']}, {sr['confidence']}, probes T={sr['uplink_probes']['tsr_ms']:.1f}) "
                                  f"thesis T={sr['tsr_ms']} -> {sr['d_log_ms']} regime {sr['regime']} "
                                  f"thr {s['throughput_bps'] / 1e6:.1f}", flush=True)
                        total += 1
                        got = sr["period_ms"]
                        ours["none" if got is None else ("correct" if got == period else "wrong")] += 1
                        if got == period and sr["source"] == "uplink-probes":
                            # the estimate exists once the probes are answered, before the download starts
                            first_correct_ms.append(s["uplink_probes"]["elapsed_ms"])
                        if sr["d_log_ms"] == period and s.get("sr_estimate_settled_ms") is not None:
                            thesis_first_ms.append(s["sr_estimate_settled_ms"])
                        # the thesis's estimator on the same download: D_log(T̂_SR) of observation
                        d = sr["d_log_ms"]
                        thesis["none" if d is None else ("correct" if d == period else "wrong")] += 1
        tag = f"sr[{policy}]"
        _line(f"{tag} correct", _share(ours["correct"], total), f"thesis-estimator {_share(thesis['correct'], total)}",
              f"{ours['correct'] / max(thesis['correct'], 1):.2f}", "15/15 (thesis, sr-strict-like eNBs, 10/20/40 ms)")
        _line(f"{tag} wrong", _share(ours["wrong"], total), f"thesis-estimator {_share(thesis['wrong'], total)}",
              f"{ours['wrong'] / max(thesis['wrong'], 1):.2f}", "0")
        _line(f"{tag} not-SR-limited/no period", _share(ours["none"], total),
              f"thesis-estimator {_share(thesis['none'], total)}", "-", "sr-strict: 0; srsenb: any, but never wrong")
        ours_ms = sorted(first_correct_ms)[len(first_correct_ms) // 2] if first_correct_ms else float("nan")
        base_ms = sorted(thesis_first_ms)[len(thesis_first_ms) // 2] if thesis_first_ms else float("nan")
        _line(f"{tag} time to first correct estimate (median ms; ours: probe phase, thesis: into the download)",
              f"{ours_ms:.0f}", f"thesis-estimator {base_ms:.0f}", f"{ours_ms / base_ms:.2f}" if thesis_first_ms else "-",
              "thesis: none given (observation phase of one download)")


def bench_cc(work: Path, seconds: float = 8.0) -> None:
    # n_prb 100 at CQI 15 (~75 Mbit/s) and ~50 ms minimum RTT, the thesis's stationary setting
    params = {"ul_policy": "sr-strict", "sr_period_ms": 10, "n_prb": 100, "core_delay_ms": 22.5,
              "attenuation_db": 20.0}
    results: dict[str, dict[str, Any]] = {}
    with _Lab(work, params) as lab:
        results["cubic"] = lab.fetch("cc-cubic", [ProbeFlow(duration_s=seconds, cc="cubic")])
        results["bbr"] = lab.fetch("cc-bbr", [ProbeFlow(duration_s=seconds, cc="bbr")])
        results["exll"] = lab.fetch("cc-exll", [ProbeFlow(duration_s=seconds, cc="cubic")], control="exll",
                                    sr_probes=30)
    base = results["cubic"]
    for name, s in results.items():
        mean, mn, thr = s["rtt"]["mean_ms"], s["rtt"]["min_ms"], s["throughput_bps"] / 1e6
        t_rtt, t_thr = THESIS[name]
        _line(f"cc[{name}] mean RTT / min RTT (ms)", f"{mean:.0f} / {mn:.0f}",
              f"cubic {base['rtt']['mean_ms']:.0f} / {base['rtt']['min_ms']:.0f}",
              f"{mean / base['rtt']['mean_ms']:.2f}", f"thesis {t_rtt:.0f} / 50 (ratio {t_rtt / THESIS['cubic'][0]:.2f})")
        _line(f"cc[{name}] throughput (Mbit/s)", f"{thr:.1f}", f"cubic {base['throughput_bps'] / 1e6:.1f}",
              f"{thr / (base['throughput_bps'] / 1e6):.2f}",
              f"thesis {t_thr:.0f} (ratio {t_thr / THESIS['cubic'][1]:.2f})")


def main() -> None:
    if os.geteuid() != 0:
        print("probe bench: needs root (network namespaces); skipped")
        return
    reps = int(os.environ.get("CELLAB_BENCH_REPS", "5"))
    parts = os.environ.get("CELLAB_BENCH_PARTS", "sr,cc").split(",")
    with tempfile.TemporaryDirectory(prefix="cellab-probe-bench-") as tmp:
        work = Path(tmp)
        if "sr" in parts:
            bench_sr(work, reps)
        if "cc" in parts:
            bench_cc(work)


if __name__ == "__main__":
    main()
