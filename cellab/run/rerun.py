"""`cellab rerun RUN_DIR`: one run of a campaign folder again, from its record, on the same lab kind.

The run's planned parameters and the campaign as run (its copy in the result folder, files made absolute) give
the same configuration; the new folder `<campaign>-rerun-<run_id>-<stamp>/` is an ordinary campaign folder with
that one run, plus `rerun.json`: the original's and the rerun's metrics side by side, their ratio, and which
parts of the two manifests differ beyond time and host state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from cellab.errors import InputError
from cellab.records import write_json

#: manifest keys that describe when and where a run happened, not what it was
HOST_STATE_KEYS = frozenset({
    "started_at", "finished_at", "workload_started_at", "workload_finished_at", "cell_clock_mark", "clock_offsets",
    "agents", "placement", "attempt", "lab_timing", "lab", "artifacts", "software", "provenance", "host_cpu_pct",
})


def _scalars(metrics: dict[str, Any] | None) -> dict[str, float]:
    return {k: float(v) for k, v in (metrics or {}).items()
            if isinstance(v, int | float) and not isinstance(v, bool)}


def compare_metrics(original: dict[str, Any] | None, again: dict[str, Any] | None) -> dict[str, dict[str, Any]]:
    a, b = _scalars(original), _scalars(again)
    return {k: {"original": a[k], "rerun": b[k], "ratio": (b[k] / a[k]) if a[k] else None} for k in sorted(a.keys() & b.keys())}


def manifest_differences(original: dict[str, Any], again: dict[str, Any]) -> list[str]:
    """The manifest keys that differ beyond time and host state (the run's identity, parameters, workload,
    ground truth, module parameters, schedule, UEs)."""
    keys = (original.keys() | again.keys()) - HOST_STATE_KEYS
    differ = sorted(k for k in keys if original.get(k) != again.get(k))
    kind = [(m.get("lab") or {}).get("kind") for m in (original, again)]
    return differ + (["lab.kind"] if kind[0] != kind[1] else [])


def locate(run_dir: Path) -> tuple[Any, Any]:
    """(the result store, the planned run) of a run folder `<campaign folder>/runs/<run_id>`."""
    from cellab.results.store import ResultStore

    run_dir = Path(run_dir)
    if run_dir.parent.name != "runs" or not (run_dir / "manifest.json").is_file():
        raise InputError(run_dir, "", "is not a run folder", ["<campaign folder>/runs/<run_id> with manifest.json"])
    store = ResultStore.open(run_dir.parent.parent)
    manifest = store.manifest(run_dir.name)
    if manifest.get("run_id") != run_dir.name:
        raise InputError(run_dir / "manifest.json", "run_id", f"{manifest.get('run_id')!r} names another run",
                         [run_dir.name])
    planned = {r.run_id: r for r in store.planned()}
    if run_dir.name not in planned:
        raise InputError(store.root / "plan.json", "", f"run {run_dir.name} is not in the plan")
    return store, planned[run_dir.name]


def rerun(run_dir: Path, out: Path, prefix: str | None = None, console: Console | None = None) -> tuple[Path, dict]:
    from cellab.campaign.load import load_campaign
    from cellab.results.store import ResultStore
    from cellab.run.runner import Runner

    store, run = locate(run_dir)
    campaign = load_campaign(store.campaign_path())
    original_manifest = store.manifest(run.run_id)
    new = ResultStore.create(out, f"{campaign.name}-rerun-{run.run_id}", store.campaign_path().read_text(), [run])
    runner = Runner(campaign, new, console=console, prefix=prefix)
    counts = runner.run()
    rows = {r["run_id"]: r for r in new.rows()}
    original_rows = {r["run_id"]: r for r in store.rows()}
    again = rows[run.run_id]
    summary = {
        "original": str(Path(run_dir).resolve()), "run_id": run.run_id, "status": again["status"],
        "error": again["error"], "counts": counts,
        "metrics": compare_metrics(original_rows[run.run_id]["metrics"], again["metrics"]),
        "manifest_differences": manifest_differences(original_manifest, new.manifest(run.run_id))
        if again["status"] == "ok" else None,
    }
    write_json(new.root / "rerun.json", summary)
    return new.root, summary


def describe(summary: dict[str, Any], names: tuple[str, ...] = ("throughput_bps", "rtt_mean_ms", "rtt_p95_ms")) -> str:
    lines = [f"run {summary['run_id']}: {summary['status']}" + (f" ({summary['error']})" if summary["error"] else "")]
    for name, row in summary["metrics"].items():
        if name in names or not names:
            ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
            lines.append(f"  {name}: original {row['original']:.4g}, rerun {row['rerun']:.4g}, ratio {ratio}")
    if summary.get("manifest_differences"):
        lines.append(f"  manifests differ in: {', '.join(summary['manifest_differences'])}")
    return "\n".join(lines)
