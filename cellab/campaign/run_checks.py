"""What a campaign asks of its runs that only the planned runs show: a fault on a UE the run does not have (it
would fail mid-run, or fault nobody), a stopping rule on a metric the runs never report (every cell would
silently run its maximum). The plan is expanded only when the campaign has a UE fault or a stopping rule."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cellab.errors import InputError
from cellab.faults.spec import NO_FAULT, UE_FAULT_KINDS

if TYPE_CHECKING:
    from cellab.campaign.model import Campaign
    from cellab.records import PlannedRun

OWD_METRICS = ("owd_mean_ms", "owd_p95_ms")  # the probe's packet log against the server capture


def needs_runs(campaign: Campaign) -> bool:
    """Whether run_problems has anything to check (the plan is expanded for it only then)."""
    ue_faults = any(f.kind in UE_FAULT_KINDS for faults in campaign.faults.values() for f in faults)
    return ue_faults or campaign.until is not None


def run_problems(campaign: Campaign, runs: list[PlannedRun], source: str | Path) -> list[InputError]:
    return fault_ue_problems(campaign, runs, source) + stop_metric_problems(campaign, runs, source)


def ue_count(campaign: Campaign, run: PlannedRun) -> int | None:
    """The UEs a run has: its `ues` (a count or a list), else its lab's (an inventory: all it lists; an embedded
    lab: one); None when not known before a worker takes the run (a cluster's bench)."""
    from cellab.campaign.model import ANY_BENCH, LAB_FACTOR

    ues: Any = run.params.get("ues")
    if isinstance(ues, list):
        return len(ues)
    if isinstance(ues, int):
        return ues
    lab = run.params.get(LAB_FACTOR, campaign.lab)
    if lab == ANY_BENCH:
        return None
    if str(lab).endswith((".yaml", ".yml")):
        from cellab.inventory.model import load_inventory

        return len(load_inventory(lab).devices.ues)
    return 1


def fault_ue_problems(campaign: Campaign, runs: list[PlannedRun], source: str | Path) -> list[InputError]:
    """Every UE fault of a plan a run picks names a UE of that run (faults[].ue counts from 0)."""
    errors: list[InputError] = []
    seen: set[str] = set()
    for run in runs:
        name = run.params.get("faults", NO_FAULT)
        count = None
        for i, fault in enumerate(campaign.faults.get(name, [])):
            field = f"faults.{name}[{i}].ue"
            if fault.kind not in UE_FAULT_KINDS or field in seen:
                continue
            count = ue_count(campaign, run) if count is None else count
            if count is not None and fault.ue >= count:
                seen.add(field)
                errors.append(InputError(source, field, f"UE {fault.ue} (counted from 0), but run {run.run_id} has "
                                         f"{count} UE(s)", [f"0..{count - 1}"]))
    return errors


def stop_metric_problems(campaign: Campaign, runs: list[PlannedRun], source: str | Path) -> list[InputError]:
    """The metrics a stopping rule watches are ones every run reports (docs/metrics.md, their sources)."""
    rule = campaign.until
    if rule is None:
        return []
    if rule.comparison is not None:
        field, metrics = f"comparisons.{rule.comparison}.metrics", list(campaign.comparisons[rule.comparison].metrics)
    else:
        field, metrics = "until.metric", [rule.metric]
    errors = []
    for metric in metrics:
        why = _never_reported(campaign, runs, metric)
        if why:
            errors.append(InputError(source, field, f"{metric} is never reported by {why}: the stopping rule would "
                                     "run every cell to until.max", ["a metric every run reports"]))
    return errors


def _never_reported(campaign: Campaign, runs: list[PlannedRun], metric: str | None) -> str | None:
    """Why some run cannot report `metric`, or None."""
    from cellab.campaign.model import ANY_BENCH, LAB_FACTOR

    if metric in OWD_METRICS and campaign.workload.tool != "probe":
        return f"workload.tool {campaign.workload.tool} (one-way delay needs the probe's packet log: tool probe)"
    if metric == "ue_fairness_jain":
        single = next((r for r in runs if ue_count(campaign, r) == 1), None)
        if single is not None:
            return f"run {single.run_id}, which has one UE (Jain's index over the UEs needs two or more)"
    if metric == "utilization":
        for lab in {r.params.get(LAB_FACTOR, campaign.lab) for r in runs} - {ANY_BENCH}:
            if not _reports_capacity(lab):
                return f"lab {lab} (utilization is throughput over the emulated cell's capacity: a virtual lab's)"
    return None


def _reports_capacity(lab: str) -> bool:
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    return lab in EMBEDDED_LABS and bool(getattr(embedded_lab_class(lab), "reports_cell_capacity", False))
