"""`cellab rerun RUN_DIR`: one run of a campaign folder again, from its record, on the same lab kind.

The run's planned parameters and the campaign as run (its copy in the result folder, files made absolute) give
the same configuration; the new folder `<campaign>-rerun-<run_id>-<stamp>/` is an ordinary campaign folder with
that one run, plus `rerun.json`: what differs in the software of the two runs (hashes first: a rebuilt binary,
a changed BPF program, a changed input file), the original's and the rerun's metrics side by side, their ratio,
and which other parts of the two manifests differ beyond time and host state.

Before anything runs, every file the original depended on (traces, schedule files, drive logs, calibrations:
its manifest's provenance.files) is hashed again: one that changed or is gone refuses the rerun (ChangedFiles,
naming each file and both hashes) unless `allow_changed_files`, and then the summary says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from rich.console import Console

from cellab.errors import CellabError, InputError
from cellab.records import write_json
from cellab.results.provenance import changed_files, recorded_files, software_differences


class ChangedFiles(CellabError):
    """A file the original run depended on is not what it was: its rerun would not be the same run."""

    def __init__(self, run_dir: Path, changed: list[dict[str, str | None]]):
        lines = [f"  {c['path']}: {_short(c['then'])} when it ran, " + (f"{_short(c['now'])} now" if c["now"] else "gone")
                 for c in changed]
        super().__init__(f"{run_dir}: {len(changed)} file(s) the run depended on changed since it ran:\n"
                         + "\n".join(lines) + "\n(--allow-changed-files reruns it anyway and says so)")
        self.changed = changed


def _short(digest: str | None) -> str:
    return f"sha256 {digest[:12]}" if digest else "missing"


#: manifest keys that describe when and where a run happened, not what it was (the software a run used is
#: compared on its own, key by key: software_differences)
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


def rerun(run_dir: Path, out: Path, prefix: str | None = None, console: Console | None = None,
          allow_changed_files: bool = False) -> tuple[Path, dict]:
    from cellab.campaign.load import load_campaign
    from cellab.results.store import ResultStore
    from cellab.run.runner import Runner

    store, run = locate(run_dir)
    original_manifest = store.manifest(run.run_id)
    changed = changed_files(recorded_files(original_manifest, store.run_dir(run.run_id) / "manifest.json"))
    if changed and not allow_changed_files:
        raise ChangedFiles(Path(run_dir), changed)  # before the campaign loads: it may name a file that is gone
    campaign = load_campaign(store.campaign_path())
    new = ResultStore.create(out, f"{campaign.name}-rerun-{run.run_id}", store.campaign_path().read_text(), [run])
    runner = Runner(campaign, new, console=console, prefix=prefix)
    counts = runner.run()
    rows = {r["run_id"]: r for r in new.rows()}
    original_rows = {r["run_id"]: r for r in store.rows()}
    again = rows[run.run_id]
    new_manifest = new.manifest(run.run_id) if (new.run_dir(run.run_id) / "manifest.json").is_file() else {}
    summary = {
        "original": str(Path(run_dir).resolve()), "run_id": run.run_id, "status": again["status"],
        "error": again["error"], "counts": counts, "changed_files": changed,
        "software_differences": software_differences(original_manifest.get("provenance") or {},
                                                     new_manifest.get("provenance") or {}) if new_manifest else None,
        "metrics": compare_metrics(original_rows[run.run_id]["metrics"], again["metrics"]),
        "manifest_differences": manifest_differences(original_manifest, new_manifest)
        if again["status"] == "ok" else None,
    }
    write_json(new.root / "rerun.json", summary)
    return new.root, summary


def describe_software(summary: dict[str, Any], most: int = 12) -> list[str]:
    """The lines that come before the results: changed input files the rerun went ahead with, then what differs
    in the software (hashes first), or that it is the same."""
    lines = [f"rerun with changed files (--allow-changed-files): {c['path']} {_short(c['then'])} -> {_short(c['now'])}"
             for c in summary.get("changed_files") or []]
    differences = summary.get("software_differences")
    if differences is None:
        return lines + ["software: not compared (the rerun wrote no manifest)"]
    if not differences:
        return lines + ["software: the same as the original's (every program, module, file and sysctl)"]
    lines.append(f"software differs in {len(differences)} place(s), hashes first:")
    for row in differences[:most]:
        lines.append(f"  {row['key']}: {_value(row['original'])} -> {_value(row['rerun'])}")
    if len(differences) > most:
        lines.append(f"  ... {len(differences) - most} more in rerun.json (software_differences)")
    return lines


def _value(text: str | None) -> str:
    if text is None:
        return "(absent)"
    return text[:16] if len(text) == 64 and all(c in "0123456789abcdef" for c in text) else text[:60]


def describe(summary: dict[str, Any], names: tuple[str, ...] = ("throughput_bps", "rtt_mean_ms", "rtt_p95_ms")) -> str:
    lines = describe_software(summary)
    lines.append(f"run {summary['run_id']}: {summary['status']}" + (f" ({summary['error']})" if summary["error"] else ""))
    for name, row in summary["metrics"].items():
        if name in names or not names:
            ratio = f"{row['ratio']:.3f}" if row["ratio"] is not None else "-"
            lines.append(f"  {name}: original {row['original']:.4g}, rerun {row['rerun']:.4g}, ratio {ratio}")
    if summary.get("manifest_differences"):
        lines.append(f"  manifests differ in: {', '.join(summary['manifest_differences'])}")
    return "\n".join(lines)
