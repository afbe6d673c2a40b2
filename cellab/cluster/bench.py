"""`make bench BENCH=scale`: a campaign across lab instances, and the controller past this machine's labs.

1. The controller (cellab.cluster.fleet_bench): 2,000 sleeping runs on 8 Dask worker processes under the nanny
   against the same on threads; the store's writes per second on their own; the controller's peak memory with
   a 1 GiB run folder against a 1 MiB one.
2. One 16-run campaign on `wired` (iperf3, 3 s) run in process (the baseline), then on a local Dask cluster with
   1, 2 and 4 slots; the same on `virtual`. Per setting: wall time, speed-up against 1 slot, the per-run
   dispatch overhead against the in-process runner, and the host's CPU use (busy share of all cores,
   /proc/stat) during the campaign; and where the wall time went: the runs themselves (first start to last
   end in the store, their own speed-up) against the fixed cost of bringing the cluster and the lab instances
   up before the first run and down after the last.
"""

from __future__ import annotations

import shutil
import tempfile
import textwrap
import time
from pathlib import Path

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


def main() -> None:
    from cellab.cluster.fleet_bench import fleet_part, memory_part, store_part

    folder = Path(tempfile.mkdtemp(prefix="cellab-scale-"))
    try:
        store_part(folder, fleet_part(folder))
        memory_part()
        campaign_part("wired", [1, 2, 4], 3, folder)
        campaign_part("virtual", [1, 2, 4], 3, folder)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
