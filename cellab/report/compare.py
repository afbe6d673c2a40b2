"""Campaigns compared with each other (`cellab compare DIR_A DIR_B [...]`): lab against commercial, a rerun against
its original, one bench against another, before and after a change.

The first folder is the reference. What differs between the campaigns comes first: their conditions (lab,
fixed parameters, workload, repeats, the levels of their factors) and their software (each run's manifest:
`software`, `provenance`, the lab kind), a key listed when the campaigns' values differ (keys whose value
changes from run to run inside a campaign, like a clock offset, are not). Then, for every cell of the
factors the campaigns share (a combination of the shared factors' levels that both ran), each metric's ratio of
medians over ok runs (campaign ÷ reference), its 95 % percentile bootstrap interval (fixed seed) and a two-sided
Mann–Whitney U p-value (cellab.results.ratios). Runs are pooled over the factors only one campaign has (said so).

Campaigns without a shared factor cannot be compared cell by cell: that, and a folder that is not a campaign, is
an error naming it.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from cellab.errors import CellabError
from cellab.report.model import Run
from cellab.results.comparisons import factor_levels, in_stratum, values_of
from cellab.results.ratios import INTERVAL_METHOD, TEST_METHOD, Ratio, ratio_of_medians
from cellab.results.store_check import read_folder, read_manifest

COMPARED = ("throughput_bps", "rtt_p95_ms", "rtt_mean_ms", "fct_mean_s")  # those the runs have are shown
CONDITION_KEYS = ("lab", "repeat", "until", "fixed", "workload", "measurements", "schedules", "faults", "retry")
SOFTWARE_KEYS = ("software", "provenance", "lab.kind", "agents")
MAX_SHOWN = 160  # characters of one value in the differences


@dataclass
class Campaign:
    """One result folder as the comparison sees it."""

    root: Path
    name: str
    campaign: dict[str, Any]
    runs: list[Run]  # its ok runs
    software: dict[str, set[str]] = field(default_factory=dict)  # dotted key -> values over its runs
    label: str = ""  # "name (folder)", or with the folder's whole path when two campaigns' would be the same


@dataclass
class Difference:
    kind: str  # condition | software | factor
    key: str
    values: list[str]  # one per campaign


@dataclass
class CellComparison:
    cell: dict[str, str]
    metric: str
    campaign: str  # the compared campaign's label (against the reference)
    ratio: Ratio


@dataclass
class Comparison:
    campaigns: list[Campaign]
    shared: list[str]
    differences: list[Difference]
    cells: list[CellComparison]
    only_in: dict[str, list[dict[str, str]]]  # campaign label -> shared cells only it ran
    pooled: dict[str, list[str]]  # campaign label -> its factors pooled over (the others lack them)


def load(root: Path) -> Campaign:
    """A campaign folder read as the report reads it (not a campaign, or damaged: an error naming it)."""
    from cellab.report.runs import load_runs

    root = Path(root)
    if not root.is_dir():
        raise CellabError(f"{root}: not a campaign result folder (no such folder)")
    folder = read_folder(root)
    runs = [r for r in load_runs(folder) if r.ok]
    out = Campaign(root, str(folder.campaign.get("name", root.name)), folder.campaign, runs)
    for run in runs:
        path = root / "runs" / run.run_id / "manifest.json"
        if not path.is_file():
            continue
        manifest = read_manifest(path)
        for key in SOFTWARE_KEYS:
            value = _at(manifest, key)
            if value is not None:
                for name, leaf in _flatten(value, key):
                    out.software.setdefault(name, set()).add(leaf)
    return out


def _at(data: dict[str, Any], dotted: str) -> Any:
    for part in dotted.split("."):
        if not isinstance(data, dict):
            return None
        data = data.get(part)
    return data


def _flatten(value: Any, prefix: str) -> list[tuple[str, str]]:
    if isinstance(value, dict):
        if not value:
            return [(prefix, "{}")]
        return [item for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                for item in _flatten(v, f"{prefix}.{k}")]
    return [(prefix, json.dumps(value, sort_keys=True, default=str))]


def _shown(values: set[str] | Any | None) -> str:
    if values is None:
        return "—"
    text = next(iter(values)) if isinstance(values, set) and len(values) == 1 else (
        "varies: " + ", ".join(sorted(values)) if isinstance(values, set) else json.dumps(values, sort_keys=True,
                                                                                        default=str))
    text = text.strip('"')
    return text if len(text) <= MAX_SHOWN else text[:MAX_SHOWN - 1] + "…"


def differences(campaigns: list[Campaign]) -> list[Difference]:
    """Conditions first, then factor levels, then software: every key whose values are not the same in all."""
    out = []
    for key in CONDITION_KEYS:
        flat = [dict(_flatten(c.campaign.get(key), key)) if c.campaign.get(key) is not None else {}
                for c in campaigns]
        if key == "lab":
            flat = [{"lab": json.dumps(c.campaign.get("lab", "virtual"))} for c in campaigns]
        for name in sorted(set().union(*flat)):
            values = [f.get(name) for f in flat]
            if len(set(values)) > 1:
                out.append(Difference("condition", name, [_shown(v and {v}) for v in values]))
    names = sorted(set().union(*(c.campaign.get("factors") or {} for c in campaigns)))
    for name in names:
        levels = [factor_levels(name, c.campaign.get("factors") or {}, []) for c in campaigns]
        if len({tuple(lv) for lv in levels}) > 1:
            out.append(Difference("factor", name, [", ".join(lv) if lv else "— (not a factor)" for lv in levels]))
    keys = sorted(set().union(*(c.software for c in campaigns)))
    absent: set[str] = set()  # subtrees some campaign lacks, listed once
    for key in keys:
        sets = [c.software.get(key) for c in campaigns]
        if any(s is not None and len(s) > 1 for s in sets):
            continue  # changes from run to run inside a campaign (a time, a clock offset): not the campaign's
        if len({frozenset(s) if s is not None else None for s in sets}) == 1:
            continue
        if None in sets:
            top = _absent_subtree(key, [c.software for c in campaigns])
            if top not in absent:
                absent.add(top)
                out.append(Difference("software", top, [_subtree_text(c.software, top) for c in campaigns]))
            continue
        out.append(Difference("software", key, [_shown(s) for s in sets]))
    return out


def _has(software: dict[str, set[str]], prefix: str) -> bool:
    return any(k == prefix or k.startswith(prefix + ".") for k in software)


def _absent_subtree(key: str, softwares: list[dict[str, set[str]]]) -> str:
    """The shortest prefix of `key` that some campaign has nothing under (its manifests lack the whole part)."""
    parts = key.split(".")
    for i in range(1, len(parts) + 1):
        prefix = ".".join(parts[:i])
        if any(not _has(s, prefix) for s in softwares):
            return prefix
    return key


def _subtree_text(software: dict[str, set[str]], prefix: str) -> str:
    if prefix in software:
        return _shown(software[prefix])
    inside = [k for k in software if k.startswith(prefix + ".")]
    return f"present ({len(inside)} keys)" if inside else "—"


def shared_factors(campaigns: list[Campaign]) -> list[str]:
    first = list(campaigns[0].campaign.get("factors") or {})
    return [f for f in first if all(f in (c.campaign.get("factors") or {}) for c in campaigns[1:])]


def _cells(campaign: Campaign, shared: list[str], reference: dict[str, Any]) -> list[dict[str, str]]:
    levels = [factor_levels(f, reference, campaign.runs) for f in shared]
    present = {tuple(str(r.factors.get(f)) for f in shared) for r in campaign.runs}
    return [dict(zip(shared, combo, strict=True)) for combo in itertools.product(*levels) if combo in present]


def compare(roots: list[Path]) -> Comparison:
    if len(roots) < 2:
        raise CellabError("cellab compare needs two campaign folders or more (the first is the reference)")
    campaigns = [load(root) for root in roots]
    for c in campaigns:
        c.label = f"{c.name} ({c.root.name})"
    if len({c.label for c in campaigns}) < len(campaigns):  # same folder names under different parents
        for c in campaigns:
            c.label = f"{c.name} ({c.root})"
    shared = shared_factors(campaigns)
    if not shared:
        named = "; ".join(f"{c.label}: {', '.join(c.campaign.get('factors') or {}) or 'none'}" for c in campaigns)
        raise CellabError(f"the campaigns share no factor, so no cell can be compared (their factors: {named}); "
                          "compare campaigns that vary at least one factor of the same name")
    reference = campaigns[0]
    ref_factors = reference.campaign.get("factors") or {}
    ref_cells = _cells(reference, shared, ref_factors)
    metrics = [m for m in COMPARED if any(values_of(c.runs, m) for c in campaigns)]
    out = Comparison(campaigns, shared, differences(campaigns), [], {}, {})
    for c in campaigns:
        pooled = [f for f in (c.campaign.get("factors") or {}) if f not in shared]
        if pooled:
            out.pooled[c.label] = pooled
    for other in campaigns[1:]:
        cells = _cells(other, shared, ref_factors)
        out.only_in.setdefault(reference.label, []).extend(
            c for c in ref_cells if c not in cells and c not in out.only_in[reference.label])
        out.only_in[other.label] = [c for c in cells if c not in ref_cells]
        for cell in (c for c in ref_cells if c in cells):
            base = [r for r in reference.runs if in_stratum(r, cell)]
            level = [r for r in other.runs if in_stratum(r, cell)]
            for metric in metrics:
                out.cells.append(CellComparison(cell, metric, other.label,
                                                ratio_of_medians(values_of(base, metric), values_of(level, metric))))
    if not out.cells:
        raise CellabError(f"the campaigns share the factor(s) {', '.join(shared)} but no cell both ran with ok runs "
                          f"({reference.label}: {len(ref_cells)} cell(s)); nothing to compare")
    return out


def as_json(result: Comparison) -> dict[str, Any]:
    return {"reference": str(result.campaigns[0].root), "campaigns": [str(c.root) for c in result.campaigns],
            "shared_factors": result.shared, "interval": INTERVAL_METHOD, "test": TEST_METHOD,
            "ratio": "median(campaign) / median(reference) over ok runs",
            "differences": [d.__dict__ for d in result.differences],
            "cells": [{"cell": c.cell, "metric": c.metric, "campaign": c.campaign, **c.ratio.as_dict()}
                      for c in result.cells],
            "only_in": result.only_in, "pooled_over": result.pooled}


__all__ = ["CellComparison", "Comparison", "Difference", "as_json", "compare", "differences", "load",
           "shared_factors"]
