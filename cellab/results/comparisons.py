"""A campaign's comparisons, kept in its results.sqlite (table `comparisons`, one row per comparison and metric).

Two kinds:
- `factor`: each level of a varied factor against the factor's first level in the campaign (its baseline), on
  throughput and p95 RTT: pooled over the other factors' levels (stratum `{}`: the report's pooled table) and,
  when another factor varies too, within each cell of the other varied factors (its stratum, e.g.
  {"channel": "mobile"}: the report's stratified table).
- `named`: a comparison the campaign names (`comparisons: {NAME: {factor, level, baseline, metrics}}`), in every
  cell of the other factors (its `stratum`, e.g. {"channel": "mobile"}), so a stopping rule can decide on it
  (`until: {comparison: NAME, ...}`, cellab.results.stopping).

Each row: the ratio of medians over ok runs (level ÷ baseline), its 95 % percentile bootstrap interval (fixed seed)
and a two-sided Mann–Whitney U p-value (cellab.results.ratios); `note` says why a ratio or interval is missing.
The runner writes them as a campaign ends (and the stopping rule as it decides); the same runs give the same rows,
so `compute_comparisons` gives an older folder's without writing anything.
"""

from __future__ import annotations

import itertools
import json
import sqlite3
from collections.abc import Iterable, Mapping
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellab.campaign.rules import COMPARED_METRICS
from cellab.errors import InputError
from cellab.inputs import is_number
from cellab.results.ratios import INTERVAL_METHOD, TEST_METHOD, Ratio, ratio_of_medians

COLUMNS = ("kind", "name", "factor", "level", "baseline", "stratum", "metric", "n_level", "n_base", "median_level",
           "median_base", "ratio", "low", "high", "p_value", "note", "interval", "test")


@dataclass
class Sample:
    """An ok run as a comparison sees it: its factors and its metrics."""

    factors: dict[str, Any]
    metrics: dict[str, Any]


def values_of(runs: Iterable[Any], metric: str) -> list[float]:
    return [float(r.metrics[metric]) for r in runs if is_number(r.metrics.get(metric))]


def listed_levels(levels: Any) -> list[str]:
    return [str(v) for v in levels] if isinstance(levels, list | dict) else []


def varied_factors(campaign_factors: Mapping[str, Any]) -> list[str]:
    """The factors the campaign lists with two or more levels, in its order."""
    return [name for name, levels in campaign_factors.items() if isinstance(levels, list | dict) and len(levels) > 1]


def factor_levels(name: str, campaign_factors: Mapping[str, Any], runs: Iterable[Any]) -> list[str]:
    """The factor's levels in the campaign's order, then any other value the runs have (by text)."""
    listed = listed_levels(campaign_factors.get(name))
    present = sorted({str(r.factors[name]) for r in runs if name in r.factors} - set(listed))
    return listed + present


def _of_level(runs: list[Any], factor: str, level: str) -> list[Any]:
    return [r for r in runs if factor in r.factors and str(r.factors[factor]) == level]


def _row(kind: str, name: str, factor: str, level: str, baseline: str, stratum: dict[str, str], metric: str,
         ratio: Ratio) -> dict[str, Any]:
    found = ratio.as_dict()
    return {"kind": kind, "name": name, "factor": factor, "level": level, "baseline": baseline,
            "stratum": json.dumps(stratum, sort_keys=True), "metric": metric, "n_level": ratio.n_level,
            "n_base": ratio.n_base, **{k: found[k] for k in ("median_level", "median_base", "ratio", "low", "high",
                                                              "p_value")},
            "note": ratio.note, "interval": INTERVAL_METHOD, "test": TEST_METHOD}


def factor_comparisons(campaign_factors: Mapping[str, Any], runs: list[Any],
                       metrics: tuple[str, ...] = COMPARED_METRICS) -> list[dict[str, Any]]:
    """Each varied factor's levels against its first, pooled over the other factors (the report's table)."""
    out = []
    for factor in varied_factors(campaign_factors):
        levels = factor_levels(factor, campaign_factors, runs)
        baseline = levels[0]
        base_runs = _of_level(runs, factor, baseline)
        for level in levels[1:]:
            level_runs = _of_level(runs, factor, level)
            for metric in metrics:
                ratio = ratio_of_medians(values_of(base_runs, metric), values_of(level_runs, metric))
                out.append(_row("factor", f"{factor}:{level}-vs-{baseline}", factor, level, baseline, {}, metric,
                                ratio))
    return out


def stratified_comparisons(campaign_factors: Mapping[str, Any], runs: list[Any],
                           metrics: tuple[str, ...] = COMPARED_METRICS) -> list[dict[str, Any]]:
    """Each varied factor's levels against its first within each cell of the other varied factors (its stratum,
    e.g. BBR against Cubic within channel=static, then within channel=mobile); none when no other factor varies."""
    varied = varied_factors(campaign_factors)
    out = []
    for factor in varied:
        others = {name: campaign_factors[name] for name in varied if name != factor}
        if not others:
            continue
        levels = factor_levels(factor, campaign_factors, runs)
        for stratum in strata({factor: campaign_factors[factor], **others}, factor, runs):
            here = [r for r in runs if in_stratum(r, stratum)]
            base_runs = _of_level(here, factor, levels[0])
            for level in levels[1:]:
                level_runs = _of_level(here, factor, level)
                for metric in metrics:
                    ratio = ratio_of_medians(values_of(base_runs, metric), values_of(level_runs, metric))
                    out.append(_row("factor", f"{factor}:{level}-vs-{levels[0]}", factor, level, levels[0], stratum,
                                    metric, ratio))
    return out


def strata(campaign_factors: Mapping[str, Any], factor: str, runs: list[Any]) -> list[dict[str, str]]:
    """The cells of the factors other than `factor`: every combination of their levels the runs have, in the
    campaign's order ([{}] when there is no other factor)."""
    others = [name for name in campaign_factors if name != factor]
    present = {tuple(str(r.factors.get(name)) for name in others) for r in runs}
    combos = itertools.product(*(factor_levels(name, campaign_factors, runs) for name in others))
    return [dict(zip(others, combo, strict=True)) for combo in combos if combo in present] or [{}]


def in_stratum(run: Any, stratum: Mapping[str, str]) -> bool:
    return all(str(run.factors.get(name)) == value for name, value in stratum.items())


def named_comparison(name: str, spec: Mapping[str, Any], campaign_factors: Mapping[str, Any], runs: list[Any],
                     only: Mapping[str, str] | None = None) -> list[dict[str, Any]]:
    """A named comparison's rows, one per stratum and metric (`only`: that stratum alone)."""
    factor, level, baseline = str(spec["factor"]), str(spec["level"]), str(spec["baseline"])
    metrics = [str(m) for m in spec.get("metrics") or COMPARED_METRICS]
    out = []
    for stratum in ([dict(only)] if only is not None else strata(campaign_factors, factor, runs)):
        here = [r for r in runs if in_stratum(r, stratum)]
        base_runs, level_runs = _of_level(here, factor, baseline), _of_level(here, factor, level)
        for metric in metrics:
            ratio = ratio_of_medians(values_of(base_runs, metric), values_of(level_runs, metric))
            out.append(_row("named", name, factor, level, baseline, stratum, metric, ratio))
    return out


def compute_comparisons(campaign: Mapping[str, Any], runs: list[Any]) -> list[dict[str, Any]]:
    """Every comparison of a campaign (its YAML as a mapping) over its ok runs (objects with factors, metrics)."""
    factors = campaign.get("factors") or {}
    rows = factor_comparisons(factors, runs) + stratified_comparisons(factors, runs)
    for name, spec in (campaign.get("comparisons") or {}).items():
        if isinstance(spec, Mapping):
            rows += named_comparison(str(name), spec, factors, runs)
    return rows


def ok_samples(store_rows: Iterable[Mapping[str, Any]]) -> list[Sample]:
    """The ok runs of ResultStore.rows() as comparisons see them."""
    return [Sample(dict(r["factors"]), dict(r["metrics"])) for r in store_rows
            if r["status"] == "ok" and isinstance(r.get("metrics"), dict) and isinstance(r.get("factors"), dict)]


def store_comparisons(store: Any, campaign: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Compute every comparison from the store's ok runs and replace the table's rows with them (one
    transaction)."""
    rows = compute_comparisons(campaign, ok_samples(store.rows()))
    write_rows(store, rows)
    return rows


def write_rows(store: Any, rows: list[dict[str, Any]], *, kind: str | None = None, name: str | None = None) -> None:
    """Replace the table's rows (all, or those of one kind and name) with `rows`."""
    marks = ", ".join("?" for _ in COLUMNS)
    with store._db() as db:
        if kind is None:
            db.execute("DELETE FROM comparisons")
        else:
            db.execute("DELETE FROM comparisons WHERE kind = ? AND name = ?", (kind, name))
        db.executemany(f"INSERT OR REPLACE INTO comparisons ({', '.join(COLUMNS)}) VALUES ({marks})",
                       [tuple(row[c] for c in COLUMNS) for row in rows])


def read_comparisons(root: Path) -> list[dict[str, Any]]:
    """The comparisons a result folder's store keeps, stratum as a mapping ([] for a store written before
    comparisons were kept); read-only."""
    path = Path(root) / "results.sqlite"
    try:
        with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)) as db:
            if db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'comparisons'").fetchone() \
                    is None:
                return []
            db.row_factory = sqlite3.Row
            rows = [dict(r) for r in db.execute(f"SELECT {', '.join(COLUMNS)} FROM comparisons "
                                                "ORDER BY kind, rowid")]
    except sqlite3.Error as exc:
        raise InputError(path, "comparisons", f"cannot read the table ({exc})") from None
    for row in rows:
        try:
            row["stratum"] = json.loads(row["stratum"])
        except (TypeError, ValueError):
            raise InputError(path, f"comparisons.{row['name']}.stratum", "not JSON: the database is damaged") \
                from None
    return rows


__all__ = ["COLUMNS", "Sample", "compute_comparisons", "factor_comparisons", "factor_levels", "named_comparison",
           "ok_samples", "read_comparisons", "store_comparisons", "strata", "stratified_comparisons", "varied_factors",
           "write_rows"]
