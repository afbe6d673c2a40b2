"""The report's per-cell sections: the comparisons the campaign names (each in every cell of the other factors),
and how many runs each cell took and why it stopped (with a stopping rule, `until`: its decision; without one: the
planned repeats, done or not).

The named comparisons are computed with the store's function (cellab.results.comparisons) over the runs the report
uses, so the table shows the numbers results.sqlite keeps; the repeats come from the folder's repeats.json (the
stopping rule writes it as it decides, cellab.results.stopping).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from cellab.errors import CellabError
from cellab.inputs import read_json
from cellab.report.model import Run, Section, Table
from cellab.report.stats import fmt_number, fmt_p, fmt_ratio
from cellab.results.comparisons import named_comparison
from cellab.results.ratios import Ratio
from cellab.results.stopping import REPEATS_FILE

METRIC_UNITS = {"throughput_bps": ("Mbit/s", 1e-6, 2), "rtt_p95_ms": ("ms", 1.0, 1), "rtt_mean_ms": ("ms", 1.0, 1),
                "fct_mean_s": ("s", 1.0, 3)}


def ratio_of_row(row: dict[str, Any]) -> Ratio:
    """A comparisons row (cellab.results.comparisons) as the Ratio the formatting takes."""
    return Ratio(n_base=row["n_base"], n_level=row["n_level"], median_base=row["median_base"],
                 median_level=row["median_level"], ratio=row["ratio"], low=row["low"], high=row["high"],
                 p_value=row["p_value"], note=row["note"])


def _median(value: float | None, metric: str) -> str:
    unit, scale, digits = METRIC_UNITS.get(metric, ("", 1.0, 3))
    return "–" if value is None else f"{fmt_number(value * scale, digits)}{' ' + unit if unit else ''}"


def stratum_text(stratum: dict[str, Any] | str) -> str:
    """{"channel": "mobile"} (or its JSON, as a comparisons row holds it) -> channel=mobile."""
    if isinstance(stratum, str):
        stratum = json.loads(stratum)
    return ", ".join(f"{k}={v}" for k, v in stratum.items()) or "all runs"


def named_section(campaign: dict[str, Any], runs: list[Run]) -> Section | None:
    """One table per comparison the campaign names: per cell of the other factors and metric, the ratio with its
    interval and test."""
    named = campaign.get("comparisons")
    if not isinstance(named, dict) or not named:
        return None
    section = Section("named-comparisons", "Named comparisons",
                      notes=["The comparisons the campaign names (`comparisons:`), in every cell of the other factors: "
                             "ratio of medians over ok runs (level ÷ baseline) with its 95 % bootstrap interval "
                             "(percentile, fixed seed) and a two-sided Mann–Whitney U p. results.sqlite keeps the "
                             "same rows (table comparisons, kind 'named')."])
    factors = campaign.get("factors") or {}
    for name, spec in named.items():
        if not isinstance(spec, dict) or not {"factor", "level", "baseline"} <= set(spec):
            section.notes.append(f"{name}: not a comparison (factor, level, baseline): left out")
            continue
        rows = []
        for row in named_comparison(str(name), spec, factors, runs):
            ratio = ratio_of_row(row)
            rows.append([(stratum_text(row["stratum"]), "left"), (row["metric"], "left"),
                         f"{row['n_level']} / {row['n_base']}",
                         f"{_median(row['median_level'], row['metric'])} / {_median(row['median_base'], row['metric'])}",
                         (fmt_ratio(ratio), "left nowrap"), fmt_p(ratio.p_value)])
        section.tables.append(Table(["cell", "metric", "runs (level / baseline)", "median (level / baseline)",
                                     "ratio [95 % CI]", "p"], rows,
                                    caption=f"{name}: {spec['factor']} {spec['level']} vs {spec['baseline']}"))
    return section


REPEATS_TITLE = "Repeats: how many runs each cell took, and why it stopped"


def fixed_repeats_section(campaign: dict[str, Any], runs: list[Run]) -> Section | None:
    """Without a stopping rule: per cell of the matrix, its runs as planned by `repeat`, how many finished, and
    why it stopped (all planned runs done, or the campaign stopped first)."""
    if not runs:
        return None
    repeat = campaign.get("repeat") if isinstance(campaign.get("repeat"), int) else 1
    cells: dict[str, list[Run]] = {}
    for run in sorted(runs, key=lambda r: r.idx):
        cells.setdefault(json.dumps(run.factors, sort_keys=True, default=str), []).append(run)
    rows = []
    for key, members in cells.items():
        statuses = [r.shown_status for r in members]
        ok, failed = statuses.count("ok"), statuses.count("failed")
        finished = sum(s in ("ok", "failed", "invalid", "unreadable") for s in statuses)
        if finished < len(members):
            why = f"the campaign stopped before the cell's runs were all in: {finished} of {len(members)} finished"
        else:
            why = f"all {len(members)} planned run(s) done (repeat: {repeat}, no stopping rule)"
        if failed:
            why += f"; {failed} failed (`cellab run --resume DIR --retry-failed` runs them again)"
        rows.append([(stratum_text(json.loads(key)), "left"), str(len(members)), str(ok),
                     ("stopped" if finished == len(members) else "unfinished",
                      "left" if finished == len(members) else "left status-running"), (why, "left")])
    return Section("repeats", REPEATS_TITLE, notes=[
        f"A fixed number of runs per cell (repeat: {repeat}); a stopping rule (`repeat: {{min, max, metric or "
        "comparison, ci_fraction}`, docs/campaign.md `until`) would add runs until an interval is narrow enough."],
                   tables=[Table(["cell", "runs", "ok", "state", "why"], rows)])


def repeats_section(root: Path, campaign: dict[str, Any], runs: list[Run] | None = None) -> Section | None:
    """Per cell, its runs, its ok runs, whether it stopped and why: with a stopping rule from repeats.json, else
    from the runs (`runs`: every run of the folder, finished or not)."""
    rule = campaign.get("until")
    if not isinstance(rule, dict) and not isinstance(campaign.get("repeat"), dict):
        return fixed_repeats_section(campaign, runs or [])
    section = Section("repeats", REPEATS_TITLE)
    section.notes.append(f"Stopping rule: {_rule_text(campaign)}.")
    path = Path(root) / REPEATS_FILE
    if not os.path.lexists(path):
        section.notes.append("No cell has been decided yet (no repeats.json): the campaign stopped before a cell's "
                             "runs were all in.")
        return section
    try:
        cells = read_json(path)
        if not isinstance(cells, dict) or not all(isinstance(c, dict) for c in cells.values()):
            raise CellabError(f"{path}: not a mapping of cells")
    except CellabError as exc:
        section.notes.append(f"repeats.json cannot be read ({exc}): left out.")
        return section
    rows = []
    for cell in cells.values():
        factors = cell.get("factors") if isinstance(cell.get("factors"), dict) else {}
        stopped = cell.get("stopped") is True
        rows.append([(stratum_text(factors), "left"), str(cell.get("runs", "")), str(cell.get("ok", "")),
                     ("stopped" if stopped else "waiting", "left" if stopped else "left status-running"),
                     (str(cell.get("why", "")), "left")])
    section.tables.append(Table(["cell", "runs", "ok", "state", "why"], rows))
    return section


def _rule_text(campaign: dict[str, Any]) -> str:
    rule = campaign.get("until") if isinstance(campaign.get("until"), dict) else dict(campaign.get("repeat") or {})
    fraction = rule.get("ci_fraction")
    width = f"±{100 * fraction:g} %" if isinstance(fraction, int | float) else "?"
    target = (f"comparison {rule['comparison']}: every ratio's 95 % bootstrap interval within {width} of the ratio"
              if rule.get("comparison") else f"{rule.get('metric')}: the 95 % interval of its mean within {width}")
    minimum = campaign.get("repeat") if isinstance(campaign.get("repeat"), int) else rule.get("min", 1)
    return f"{target}, after at least {minimum} and at most {rule.get('max')} runs per cell"


def cell_sections(root: Path, campaign: dict[str, Any], runs: list[Run], every_run: list[Run]) -> list[Section]:
    """runs: the ok runs (comparisons); every_run: the folder's runs, finished or not (repeats)."""
    return [s for s in (named_section(campaign, runs), repeats_section(root, campaign, every_run)) if s is not None]


__all__ = ["cell_sections", "named_section", "ratio_of_row", "repeats_section", "stratum_text"]
