"""The scale bench's controller parts (`make bench BENCH=scale`, with cellab.cluster.bench's lab campaigns):

1. fleet: 2,000 runs that only sleep (standins.sleeping_run: a record and a small file back, as a real run's task) across
   FLEET_WORKERS Dask workers, as worker *processes* under Dask's nanny (how `cellab worker` serves), against
   the same fleet as threads of one process (the baseline): runs per second the controller stores.
2. store: the result store alone, no Dask: one run's files written and its record saved, FLEET_RUNS times
   (writes per second, against which the fleet's rate is shown as a share).
3. memory: the controller's peak RSS (itself and its in-process scheduler, not the worker processes) for a
   campaign of one run whose folder holds 1 GiB, against one whose folder holds 1 MiB (the baseline), each in a
   fresh process (`python -m cellab.cluster.fleet_bench memory BYTES`): streamed in chunks, the ratio stays
   near 1.
"""

from __future__ import annotations

import functools
import json
import resource
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

from rich.console import Console

from cellab.cluster.standins import FLEET_SLEEP_S

FLEET_RUNS = 2000
FLEET_WORKERS = 8
SMALL_FOLDER_BYTES, LARGE_FOLDER_BYTES = 1 << 20, 1 << 30


def _runner(folder: Path, name: str, runs: int):  # noqa: ANN202 - a cellab.run.runner.Runner
    from cellab.run.runner import Runner

    campaign = folder / f"{name}.yaml"
    campaign.write_text(textwrap.dedent(f"""
        name: {name}
        lab: wired
        repeat: {max(runs // 2, 1)}
        factors: {{cc: [cubic, reno]}}
    """ if runs > 1 else f"""
        name: {name}
        lab: wired
    """))
    return Runner.new(campaign, folder / "out", console=Console(stderr=True, quiet=True))


def _fleet(folder: Path, processes: bool) -> tuple[float, int]:
    """(wall seconds, runs ok) of FLEET_RUNS sleeping runs on FLEET_WORKERS workers (not counting start-up)."""
    from distributed import Client, LocalCluster

    from cellab.cluster.standins import sleeping_run
    from cellab.cluster.dispatch import run_distributed

    runner = _runner(folder, f"fleet-{'processes' if processes else 'threads'}", FLEET_RUNS)
    with LocalCluster(n_workers=FLEET_WORKERS, threads_per_worker=1, processes=processes, dashboard_address=None,
                      resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
        client.wait_for_workers(FLEET_WORKERS, timeout=300)
        started = time.monotonic()
        counts = run_distributed(runner, client=client, task=functools.partial(sleeping_run, sleep_s=FLEET_SLEEP_S))
        return time.monotonic() - started, counts["ok"]


def fleet_part(folder: Path) -> float:
    """Prints the fleet's figures; returns the processes' runs per second."""
    ideal_s = FLEET_RUNS * FLEET_SLEEP_S / FLEET_WORKERS
    print(f"fleet: {FLEET_RUNS} sleeping runs ({FLEET_SLEEP_S * 1000:.0f} ms each) on {FLEET_WORKERS} workers "
          f"(sleep alone {ideal_s:.1f} s)", flush=True)
    threads_s, threads_ok = _fleet(folder, processes=False)
    print(f"  threads of one process (baseline): wall {threads_s:5.1f} s, {FLEET_RUNS / threads_s:5.0f} runs/s, "
          f"{threads_ok} ok", flush=True)
    procs_s, procs_ok = _fleet(folder, processes=True)
    print(f"  worker processes (nanny):          wall {procs_s:5.1f} s, {FLEET_RUNS / procs_s:5.0f} runs/s, "
          f"{procs_ok} ok; {threads_s / procs_s:.2f}x the threads' rate", flush=True)
    return FLEET_RUNS / procs_s


def store_part(folder: Path, fleet_runs_per_s: float) -> None:
    """The store alone: each run's small file written and its record saved, as the controller does per run."""
    from cellab.run.step import RunRecord

    runner = _runner(folder, "store", FLEET_RUNS)
    store = runner.store
    runs = list(store.pending())
    started = time.monotonic()
    for run in runs:
        now = time.time()
        store.import_files(run, {"manifest.json": b"{}\n"})
        store.save_record(run, RunRecord(run.run_id, "ok", 1, None, {"throughput_mbps": 1.0},
                                         {"ue0": {"throughput_mbps": 1.0}}, {"worker": "bench"}, now, now),
                          started=False)
    wall_s = time.monotonic() - started
    per_s = len(runs) / wall_s
    print(f"store alone: {len(runs)} runs written (a file and one transaction each) in {wall_s:.1f} s: "
          f"{per_s:.0f} writes/s ({wall_s / len(runs) * 1000:.1f} ms each); the process fleet stores "
          f"{fleet_runs_per_s / per_s:.2f}x that rate", flush=True)


def _one_run_peak_rss_kb(size_bytes: int) -> dict[str, float]:
    """In this (fresh) process: a one-run campaign whose folder holds size_bytes, on one worker process."""
    from distributed import Client, LocalCluster

    from cellab.cluster.standins import folder_run
    from cellab.cluster.dispatch import run_distributed

    with tempfile.TemporaryDirectory(prefix="cellab-memory-") as tmp:
        runner = _runner(Path(tmp), "memory", 1)
        with LocalCluster(n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None,
                          resources={"vlab": 1}, silence_logs=40) as cluster, Client(cluster) as client:
            started = time.monotonic()
            counts = run_distributed(runner, client=client, task=functools.partial(folder_run, size_bytes=size_bytes))
            wall_s = time.monotonic() - started
        stored = sum(p.stat().st_size for p in runner.store.root.joinpath("runs").rglob("*") if p.is_file())
    return {"peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, "ok": counts["ok"],
            "stored_bytes": stored, "wall_s": wall_s}


def _measured(size_bytes: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-m", "cellab.cluster.fleet_bench", "memory", str(size_bytes)],
                         capture_output=True, text=True, timeout=1800, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def memory_part() -> None:
    small, large = _measured(SMALL_FOLDER_BYTES), _measured(LARGE_FOLDER_BYTES)
    print("controller memory, one run's folder streamed from a worker process (peak RSS of the controller):",
          flush=True)
    for label, got in (("1 MiB folder (baseline)", small), ("1 GiB folder", large)):
        print(f"  {label:24s} peak {got['peak_rss_kb'] / 1024:6.0f} MiB, stored {got['stored_bytes'] / 2**20:7.1f} "
              f"MiB in {got['wall_s']:5.1f} s, ok {got['ok']:.0f}", flush=True)
    print(f"  ratio 1 GiB / 1 MiB: {large['peak_rss_kb'] / small['peak_rss_kb']:.2f}x "
          f"(the folder is {LARGE_FOLDER_BYTES // SMALL_FOLDER_BYTES}x larger)", flush=True)


if __name__ == "__main__" and sys.argv[1:2] == ["memory"]:
    print(json.dumps(_one_run_peak_rss_kb(int(sys.argv[2]))))
