"""Per-run orchestration overhead on the virtual lab with 1, 4 and 16 UEs: the controller's time outside the
workload (configure, clock offsets, attenuation, modules, capture, fetching artifacts, metrics, manifest),
printed with its ratio to the workload's own time, from a real campaign's manifests.

    python -m cellab.bench orchestration
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
import textwrap
from pathlib import Path

from cellab.testkit.helpers import only_folder, result_rows, run_cellab

UE_COUNTS = (1, 4, 16)
RUNS_PER_COUNT = int(os.environ.get("CELLAB_BENCH_REPS", "3"))
WORKLOAD_S = 3.0


def campaign(ues: int) -> str:
    return textwrap.dedent(f"""
        name: orchestration-{ues}
        lab: virtual
        repeat: {RUNS_PER_COUNT}
        fixed: {{ues: {ues}, n_prb: 50, core_delay_ms: 10}}
        workload: {{tool: probe, duration_s: {WORKLOAD_S}, flows: 1}}
        timeouts: {{run_s: 120, request_s: 30}}
        retry: {{max_attempts: 2, backoff_s: 1, max_late_tti_fraction: null}}
    """)


def measure(ues: int, work: Path) -> list[tuple[float, float]]:
    """(overhead_s, workload_s) of every run of a campaign with this many UEs."""
    path = work / f"o{ues}.yaml"
    path.write_text(campaign(ues))
    out = work / f"out{ues}"
    result = run_cellab("run", str(path), "--out", str(out), "--no-report", "--prefix", f"ob{ues}", timeout_s=1800)
    if result.returncode != 0:
        raise RuntimeError(f"{ues} UEs: the campaign failed: {result.stderr[-600:]}")
    folder = only_folder(out)
    samples = []
    for run_id, status, *_ in result_rows(folder):
        if status != "ok":
            continue
        m = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        total_s = m["finished_at"] - m["started_at"]
        workload_s = m["workload_finished_at"] - m["workload_started_at"]
        samples.append((total_s - workload_s, workload_s))
    return samples


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="cellab-orch-") as tmp:
        for ues in UE_COUNTS:
            samples = measure(ues, Path(tmp))
            overhead = statistics.median(s[0] for s in samples)
            workload = statistics.median(s[1] for s in samples)
            print(f"orchestration {ues:2d} UE(s): overhead {overhead:.2f} s per run (median of {len(samples)}), "
                  f"workload {workload:.2f} s, ratio overhead/workload {overhead / workload:.2f}", flush=True)


if __name__ == "__main__":
    main()
