"""`make bench BENCH=sr`: the SR-period validation on `virtual` and `srsran-zmq` side by side.

The same probe campaign on each lab (SR 5/10/20/40/80 ms, REPEATS runs each, 30 idle-uplink probes up to the
probe's budget, then a 2 s download): per lab a confusion matrix (configured period x estimate, with "amb." for
an ambiguous answer and "none" for no answer, and the period the eNB's own SR receptions implied as a column),
accuracy with a Wilson 95 % interval (no answer counts as not right), the confident wrong answers (a period
named that is not the truth: the number that must stay 0), and the probes each run needed.

srsran-zmq needs root and the srsRAN bundle (../shared/tools/srsran or $CELLAB_SRSRAN_BIN): skipped, saying
why, otherwise. Its stack runs slower than real time on a loaded host: the eNB's TTI rate and the stack clock's speed
are printed. CELLAB_SR_BENCH_SWING=LO-HI (ms) makes the host swing on purpose (stack_swing.py); CELLAB_SR_BENCH_LABS
picks the labs (default both).
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from cellab.errors import CellabError

from .stack_swing import RUN_MS, StackSwing, parse_swing

SR_PERIODS_MS = (5, 10, 20, 40, 80)
REPEATS = int(os.environ.get("CELLAB_SR_BENCH_REPEATS", "5"))
TARGET_RIGHT = 0.9  # issue 37: on srsran-zmq at least 90 % confidently right, none confidently wrong
LABS = tuple(os.environ.get("CELLAB_SR_BENCH_LABS", "virtual,srsran-zmq").split(","))


def wilson(right: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval of a proportion (95 % by default); (0, 1) without trials."""
    if n == 0:
        return 0.0, 1.0
    p = right / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def answer_label(row: dict[str, Any]) -> str:
    if row.get("sr_estimate_ms") is not None:
        return str(int(row["sr_estimate_ms"]))
    return "amb." if row.get("sr_ambiguous") else "none"


def score(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Confusion counts, accuracy (Wilson), confident wrong answers, no answers, probes, against the
    configured period (`sr_true_ms`) and the eNB's effective one where known (`sr_effective_ms`)."""
    confusion: dict[int, Counter] = {p: Counter() for p in SR_PERIODS_MS}
    effective: dict[int, Counter] = {p: Counter() for p in SR_PERIODS_MS}
    right = wrong = none = right_eff = wrong_eff = n_eff = in_candidates = 0
    for row in rows:
        truth = int(row["sr_true_ms"])
        confusion.setdefault(truth, Counter())[answer_label(row)] += 1
        est = row.get("sr_estimate_ms")
        right += est == truth
        wrong += est is not None and est != truth
        none += est is None
        in_candidates += est is None and truth in [int(c) for c in row.get("sr_candidates_ms") or []]
        if row.get("sr_effective_ms") is not None:
            eff = int(row["sr_effective_ms"])
            effective.setdefault(truth, Counter())[str(eff)] += 1
            n_eff += 1
            right_eff += est == eff
            wrong_eff += est is not None and est != eff
    probes = [int(r["sr_probes_used"]) for r in rows if r.get("sr_probes_used") is not None]
    out = {"n": len(rows), "right": right, "confident_wrong": wrong, "no_answer": none,
           "truth_in_candidates": in_candidates, "confusion": confusion,
           "effective": effective, "accuracy": right / len(rows) if rows else None, "wilson": wilson(right, len(rows)),
           "probes_mean": sum(probes) / len(probes) if probes else None, "probes_max": max(probes) if probes else None,
           "n_effective": n_eff, "right_effective": right_eff, "confident_wrong_effective": wrong_eff}
    speeds = [float(r["sr_stack_tti_per_s"]) for r in rows if r.get("sr_stack_tti_per_s")]
    out["tti_per_s"] = (min(speeds), sum(speeds) / len(speeds), max(speeds)) if speeds else None
    clock_speeds = [float(r["stack_speed"]) for r in rows if isinstance(r.get("stack_speed"), (int, float))]
    out["clock_speed"] = (min(clock_speeds), max(clock_speeds)) if clock_speeds else None
    out["clocks"] = Counter(str(r.get("sr_clock") or "none") for r in rows)
    # the stack-time grid's own answer, also where the probe's answer stands (the wall clock): the second view
    grid = [r["sr_grid"] for r in rows if isinstance(r.get("sr_grid"), dict)]
    out["grid"] = {"n": len(grid), "right": sum(g.get("period_tti") == int(r["sr_true_ms"]) for r in rows
                                                  if isinstance(g := r.get("sr_grid"), dict)),
                   "wrong": sum(g.get("period_tti") not in (None, int(r["sr_true_ms"])) for r in rows
                                if isinstance(g := r.get("sr_grid"), dict))}
    return out


def print_score(lab: str, s: dict[str, Any]) -> None:
    columns = [str(p) for p in SR_PERIODS_MS] + ["amb.", "none"]
    print(f"--- {lab}: {s['n']} runs")
    print(f"  {'SR ms':>6} | " + " ".join(f"{c:>5}" for c in columns) + " | eNB effective (receptions)")
    for truth in sorted(s["confusion"]):
        counts = s["confusion"][truth]
        eff = ", ".join(f"{k} ms x{v}" for k, v in sorted(s["effective"].get(truth, {}).items(), key=lambda kv: int(kv[0])))
        print(f"  {truth:>6} | " + " ".join(f"{counts.get(c, 0):>5}" for c in columns) + f" | {eff or '-'}")
    lo, hi = s["wilson"]
    acc = s["accuracy"]
    print(f"  accuracy vs configured: {s['right']}/{s['n']} = {acc:.2f} (Wilson 95 % {lo:.2f}-{hi:.2f}); "
          f"confident wrong: {s['confident_wrong']}; no answer (ambiguous or none): {s['no_answer']}, "
          f"the truth among its candidates in {s['truth_in_candidates']}"
          if acc is not None else "  no runs")
    if s["n_effective"]:
        lo, hi = wilson(s["right_effective"], s["n_effective"])
        print(f"  vs the eNB's effective period: {s['right_effective']}/{s['n_effective']} right "
              f"(Wilson 95 % {lo:.2f}-{hi:.2f}); confident wrong: {s['confident_wrong_effective']}")
    if s["probes_mean"] is not None:
        print(f"  probes per run: mean {s['probes_mean']:.1f}, max {s['probes_max']}")
    if s["tti_per_s"]:
        lo_s, mean_s, hi_s = s["tti_per_s"]
        print(f"  stack speed (eNB TTIs per wall second, 1000 = real time): {lo_s:.0f}-{hi_s:.0f}, mean {mean_s:.0f}")
    if s["clock_speed"]:
        print(f"  stack clock (the broker's record of each TTI): {s['clock_speed'][0]:.2f}-{s['clock_speed'][1]:.2f} "
              "of real time over the runs' workloads")
    print("  estimates read on: " + ", ".join(f"{k} clock x{v}" for k, v in sorted(s["clocks"].items())))
    if s["grid"]["n"]:
        print(f"  the stack-time grid's own answers (sr_grid, on every clock): {s['grid']['right']}/{s['grid']['n']} "
              f"right, {s['grid']['wrong']} wrong")
    if acc is not None:
        ok = acc >= TARGET_RIGHT and s["confident_wrong"] == 0
        print(f"  target (>= {TARGET_RIGHT:.0%} right, 0 confidently wrong): {'met' if ok else 'NOT met'}")


def campaign_yaml(lab: str, repeats: int) -> str:
    return (f"name: bench-sr-{lab}\nlab: {lab}\nrepeat: {repeats}\norder: {{mode: sequential, seed: 29}}\n"
            f"factors: {{sr_period_ms: [{', '.join(str(p) for p in SR_PERIODS_MS)}]}}\n"
            "fixed: {n_prb: 25, cqi_period_ms: 40, attenuation_db: 0, cc: cubic, receiver: exll}\n"
            "workload: {tool: probe, duration_s: 2, sr_probes: 30}\n"
            "timeouts: {run_s: 150, request_s: 20}\n"
            # validity on (the defaults): a srsran-zmq run is valid when its stack clock covers the workload without a
            # stall over retry.max_stack_gap_ms; its speed is recorded, and the SR estimate is read on that clock
            "retry: {max_attempts: 2, backoff_s: 5}\n")


def run_lab(lab: str, workdir: Path, repeats: int, swing: tuple[float, float] | None = None) -> list[dict[str, Any]]:
    """One lab's campaign; `swing` (LO, HI ms): srsenb stopped LO..HI ms of every RUN_MS it runs (stack_swing.py)."""
    camp = workdir / f"{lab}.yaml"
    camp.write_text(campaign_yaml(lab, repeats))
    out = workdir / lab
    t0 = time.time()
    proc = subprocess.Popen([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    swinging = StackSwing(proc.pid, *swing).start() if swing and lab == "srsran-zmq" else None
    try:
        _, stderr = proc.communicate(timeout=3600)
    finally:
        if swinging:
            swinging.stop()
    print(f"{lab}: cellab run took {time.time() - t0:.0f} s (exit {proc.returncode})"
          + (f"; srsenb stopped {swing[0]:g}-{swing[1]:g} ms of every {RUN_MS:g} ms it ran (a swinging host)"
             if swinging and swing else ""))
    folders = sorted(out.iterdir()) if out.exists() else []
    if not folders:
        raise CellabError(f"{lab}: no result folder: {stderr[-500:]}")
    with sqlite3.connect(folders[-1] / "results.sqlite") as db:
        failed = list(db.execute("SELECT run_id, error FROM runs WHERE status != 'ok'"))
    if failed:  # e.g. the virtual cell's timing guard on a loaded host: not scored, but counted
        reasons = Counter((error or "").split(":")[0] for _, error in failed)
        print(f"{lab}: {len(failed)} runs failed and are not scored: "
              + ", ".join(f"{k} x{v}" for k, v in reasons.items()) + f" (first: {(failed[0][1] or '')[:160]})")
    rows = []
    for metrics_path in sorted((folders[-1] / "runs").glob("*/metrics.json")):
        m = json.loads(metrics_path.read_text())
        if m.get("sr_true_ms") is not None:
            rows.append(m)
    return rows


def skip_reason(lab: str) -> str | None:
    if os.geteuid() != 0:
        return "needs root (network namespaces)"
    if lab == "srsran-zmq":
        from cellab.ran.zmqlab import srsran_bin_dir

        try:
            os.environ.setdefault("CELLAB_SRSRAN_BIN", str(srsran_bin_dir()))
        except CellabError as exc:
            return str(exc)
    return None


def rescore(folder: Path) -> None:
    """Score a kept result folder again (`python -m cellab.ran.sr_bench FOLDER...`; `make demo-srsran` prints its
    campaign's accuracy this way). Runs the campaign's validity rule refused are not scored, and counted."""
    if not (folder / "runs").is_dir():
        raise CellabError(f"{folder}: not a campaign result folder (it has no runs/)")
    with sqlite3.connect(folder / "results.sqlite") as db:
        done = {run_id for run_id, in db.execute("SELECT run_id FROM runs WHERE status = 'ok'")}
        other = Counter(status for status, in db.execute("SELECT status FROM runs WHERE status != 'ok'"))
    rows = [json.loads(p.read_text()) for p in sorted((folder / "runs").glob("*/metrics.json"))
            if p.parent.name in done]
    if other:
        print(f"{folder.name}: not scored: " + ", ".join(f"{k} x{v}" for k, v in sorted(other.items())))
    print_score(folder.name, score([r for r in rows if r.get("sr_true_ms") is not None]))


def main() -> None:
    try:
        swing = parse_swing(os.environ["CELLAB_SR_BENCH_SWING"]) if os.environ.get("CELLAB_SR_BENCH_SWING") else None
    except CellabError as exc:
        print(f"sr bench: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    load = os.getloadavg()
    print(f"SR validation, {REPEATS} runs per period; load average at start: {load[0]:.2f} {load[1]:.2f} "
          f"{load[2]:.2f} ({os.cpu_count()} CPUs)")
    with tempfile.TemporaryDirectory(prefix="cellab-bench-sr-") as tmp:
        for lab in LABS:
            reason = skip_reason(lab)
            if reason:
                print(f"--- {lab}: skipped: {reason}")
                continue
            print_score(lab, score(run_lab(lab, Path(tmp), REPEATS, swing)))
    load = os.getloadavg()
    print(f"load average at end: {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        for arg in sys.argv[1:]:
            rescore(Path(arg))
    else:
        main()
