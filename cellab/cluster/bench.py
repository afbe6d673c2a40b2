"""`make bench BENCH=scale`: a campaign across lab instances, and a fleet of benches past this machine.

1. One 16-run campaign on `wired` (iperf3, 3 s) run in process (the baseline), then on a local Dask cluster with
   1, 2 and 4 slots; the same on `virtual` with 1 and 2 slots. Per setting: wall time, speed-up against 1
   slot, the per-run dispatch overhead against the in-process runner, and the host's CPU use (busy share of
   all cores, /proc/stat) during the campaign; and where the wall time went: the runs themselves (first start
   to last end in the store, their own speed-up) against the fixed cost of bringing the cluster and the lab
   instances up before the first run and down after the last.
2. 2,000 runs that only sleep (a stand-in task that returns a small record and a small file, as a real run's
   task returns its record and folder) across 32 Dask workers (threads of one local cluster): what the
   controller and the store sustain — runs per second, per-run controller overhead, store writes per second.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
import time
from pathlib import Path
from typing import Any

from rich.console import Console

CAMPAIGN = """
    name: scale-{lab}
    lab: {lab}
    repeat: 8
    factors:
      cc: [cubic, reno]
    workload: {{tool: iperf3, duration_s: {duration}}}
    timeouts: {{run_s: 120, request_s: 20}}
    retry: {{max_attempts: 2, backoff_s: 0.5}}
"""
FLEET_RUNS = 2000
FLEET_WORKERS = 32
FLEET_SLEEP_S = 0.05


def _campaign(lab: str, folder: Path, duration_s: int) -> Path:
    path = folder / f"{lab}.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN.format(lab=lab, duration=duration_s)))
    return path


def _one(campaign: Path, out: Path, slots: int | None) -> dict[str, float]:
    from cellab.cluster.dispatch import run_campaign
    from cellab.run.runner import Runner
    from cellab.run.telemetry import host_busy_pct, host_cpu_times

    runner = Runner.new(campaign, out, console=Console(stderr=True, quiet=True))
    before = host_cpu_times()
    started, started_at = time.monotonic(), time.time()
    counts = run_campaign(runner, slots=slots)
    wall_s, finished_at = time.monotonic() - started, time.time()
    # where the wall time went: the runs themselves (first start to last end, from the store) and the fixed
    # cost around them (cluster and lab bring-up before the first run, teardown after the last)
    rows = [r for r in runner.store.rows() if r["started_at"] and r["finished_at"]]
    first_s, last_s = min(r["started_at"] for r in rows), max(r["finished_at"] for r in rows)
    return {"wall_s": wall_s, "ok": counts["ok"], "failed": counts["failed"] + counts["aborted"],
            "cpu_pct": host_busy_pct(before, host_cpu_times()) or 0.0, "runs_span_s": last_s - first_s,
            "run_mean_s": sum(r["finished_at"] - r["started_at"] for r in rows) / len(rows),
            "bring_up_s": first_s - started_at, "teardown_s": finished_at - last_s}


def campaign_part(lab: str, slot_counts: list[int], duration_s: int, folder: Path) -> None:
    campaign = _campaign(lab, folder, duration_s)
    print(f"{lab}: 16 runs of {duration_s} s (iperf3); in process (baseline), then on Dask with N slots", flush=True)
    base = _one(campaign, folder / "out", None)
    runs = base["ok"] + base["failed"]
    print(f"  in process      wall {base['wall_s']:6.1f} s  ({base['wall_s'] / runs:.2f} s/run)  "
          f"cpu {base['cpu_pct']:5.1f} %  ok {base['ok']:.0f}/{runs:.0f}", flush=True)
    _where(base)
    one_slot = None
    for slots in slot_counts:
        got = _one(campaign, folder / "out", slots)
        one_slot = one_slot or got
        overhead = (got["wall_s"] - base["wall_s"]) / runs if slots == 1 else None
        extra = f"  dispatch overhead {overhead * 1000:+.0f} ms/run vs in process" if overhead is not None else ""
        print(f"  slots {slots}         wall {got['wall_s']:6.1f} s  speed-up {one_slot['wall_s'] / got['wall_s']:.2f}x "
              f"(ideal {slots}x)  cpu {got['cpu_pct']:5.1f} %  ok {got['ok']:.0f}/{runs:.0f}{extra}", flush=True)
        _where(got, one_slot["runs_span_s"] / got["runs_span_s"])


def _where(got: dict[str, float], span_speed_up: float | None = None) -> None:
    speed = f", speed-up {span_speed_up:.2f}x" if span_speed_up is not None else ""
    print(f"                  runs {got['runs_span_s']:5.1f} s (mean run {got['run_mean_s']:.2f} s{speed}); "
          f"bring-up {got['bring_up_s']:4.1f} s, teardown {got['teardown_s']:4.1f} s", flush=True)


def sleeping_run(job: dict[str, Any], sleep_s: float = FLEET_SLEEP_S) -> dict[str, Any]:
    """A stand-in run task: sleeps, returns a record and one small file, as a real run's task would (importable
    by worker processes; the cluster's fault tests use it too)."""
    time.sleep(sleep_s)
    now = time.time()
    record = {"run_id": job["run"]["run_id"], "status": "ok", "attempts": 1, "error": None,
              "metrics": {"throughput_mbps": 1.0}, "ue_metrics": {"ue0": {"throughput_mbps": 1.0}},
              "placement": {"worker": "stand-in"}, "started_at": now - sleep_s, "finished_at": now}
    return {"record": record, "files": {"manifest.json": b"{}\n"}}


def folder_run(job: dict[str, Any], size_bytes: int) -> dict[str, Any]:
    """A stand-in run task whose run folder holds a capture of `size_bytes` (written in 1 MiB blocks of a
    pattern) beside its manifest: it returns it as a real run's task does (cellab.cluster.worker.shipped)."""
    from distributed import get_worker

    from cellab.cluster.worker import shipped
    from cellab.run.step import RunRecord

    folder = Path(tempfile.mkdtemp(prefix="cellab-folder-run-"))
    try:
        (folder / "manifest.json").write_text("{}\n")
        block = bytes(range(256)) * 4096
        with open(folder / "capture.pcap", "wb") as out:
            for start in range(0, size_bytes, len(block)):
                out.write(block[:size_bytes - start])
        now = time.time()
        record = RunRecord(job["run"]["run_id"], "ok", 1, placement={"worker": "stand-in"}, started_at=now,
                           finished_at=now)
        return shipped(record, folder, get_worker().address)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def fleet_part(folder: Path) -> None:
    from distributed import Client, LocalCluster

    from cellab.cluster.dispatch import run_distributed
    from cellab.run.runner import Runner

    campaign = folder / "fleet.yaml"
    campaign.write_text(textwrap.dedent(f"""
        name: fleet
        lab: wired
        repeat: {FLEET_RUNS // 2}
        factors: {{cc: [cubic, reno]}}
    """))
    runner = Runner.new(campaign, folder / "out", console=Console(stderr=True, quiet=True))
    with LocalCluster(n_workers=FLEET_WORKERS, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
        started = time.monotonic()
        counts = run_distributed(runner, client=client, task=sleeping_run)
        wall_s = time.monotonic() - started
    ideal_s = FLEET_RUNS * FLEET_SLEEP_S / FLEET_WORKERS
    print(f"fleet: {FLEET_RUNS} sleeping runs ({FLEET_SLEEP_S * 1000:.0f} ms each) on {FLEET_WORKERS} workers: "
          f"wall {wall_s:.1f} s (sleep alone {ideal_s:.1f} s), {counts['ok']} ok", flush=True)
    print(f"  controller: {FLEET_RUNS / wall_s:.0f} runs/s stored, {wall_s / FLEET_RUNS * 1000:.1f} ms per run "
          f"(each run: its files written, one store transaction: {FLEET_RUNS / wall_s:.0f} transactions/s)", flush=True)


def main() -> None:
    folder = Path(tempfile.mkdtemp(prefix="cellab-scale-"))
    try:
        fleet_part(folder)
        campaign_part("wired", [1, 2, 4], 3, folder)
        campaign_part("virtual", [1, 2], 3, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
