"""The SR estimate scored against its truth (the report's SR section and the headline): which runs estimated a
period and the confusion of true period against estimate. No plotting or scipy here: `cellab run` ends with the
headline, and its imports are paid by every campaign."""

from __future__ import annotations

from typing import Any

from cellab.report.model import Run, setting
from cellab.report.stats import Confusion, confusion_from_pairs, sr_label


def sr_truth(run: Run, fixed: dict[str, Any]) -> Any:
    return run.metrics.get("sr_true_ms", setting("sr_period_ms", run.factors, fixed))


def sr_confusion(runs: list[Run], fixed: dict[str, Any]) -> Confusion | None:
    """Rows: true SR period (sr_true_ms, else the sr_period_ms setting); columns: the estimate or "none"."""
    pairs, without_truth = [], 0
    for r in runs:
        truth = sr_truth(r, fixed)
        if truth is None:
            without_truth += 1
            continue
        pairs.append((sr_label(truth), sr_label(r.metrics.get("sr_estimate_ms"))))
    return confusion_from_pairs(pairs, without_truth)


def sr_probed(runs: list[Run], probes_asked: bool) -> list[Run]:
    """Runs that estimated the SR period: some run named one, or the campaign asked for SR probes (then a run
    without an estimate is a miss). A probe flow reports an SR regime on every run; a shoot-out whose flows
    named no period has nothing to score ("Correct: 0 of 14" read as a failure)."""
    probed = [r for r in runs if "sr_estimate_ms" in r.metrics or "sr_regime" in r.metrics]
    if not probed or not (probes_asked or any("sr_estimate_ms" in r.metrics for r in probed)):
        return []
    return probed
