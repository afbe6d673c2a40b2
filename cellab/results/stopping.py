"""Sequential repeats (`until` in a campaign): after each finished run, its cell of the matrix either stops or
gets more runs, appended to the plan (so `--resume` continues the rule where it was).

On a metric (`until: {metric, ci_fraction, max}`): a cell stops when its ok runs number at least `repeat` and the
95 % confidence interval of the metric's mean (Student t) is at most `ci_fraction` of the mean on each side, or when
it has `max` runs.

On a named comparison (`until: {comparison: NAME, ci_fraction, max}`, the comparison in `comparisons`): its two
cells in each cell of the other factors (the level's and the baseline's, e.g. scheme=c2tcp and scheme=cubic with
channel=mobile) are decided together once both have no run still to come: they stop when each has at least
`repeat` ok runs and every metric's ratio of medians has a 95 % bootstrap interval reaching at most `ci_fraction`
of the ratio below and above it, or when either has `max` runs; otherwise each gets one more run. Cells the
comparison does not name stop after `repeat` runs.

`repeats.json` in the result folder says, per cell, how many runs it took and why it stopped (or what it waits
for); the report shows it. A named comparison's rows in results.sqlite are refreshed as it is decided.
"""

from __future__ import annotations

import json
import math
from typing import Any

from cellab.campaign.model import Campaign, NamedComparison, run_id
from cellab.records import PlannedRun, write_json
from cellab.results.comparisons import named_comparison, ok_samples, write_rows
from cellab.results.store import FINISHED

REPEATS_FILE = "repeats.json"


def interval(values: list[float]) -> tuple[float, float] | None:
    """(mean, half-width of its 95 % confidence interval); None with fewer than two values."""
    from scipy import stats

    n = len(values)
    if n < 2:
        return None
    mean = sum(values) / n
    sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (n - 1))
    return mean, float(stats.t.ppf(0.975, n - 1)) * sd / math.sqrt(n)


def cell_key(factors: dict[str, Any]) -> str:
    return json.dumps(factors, sort_keys=True)


def decide(campaign: Campaign, values: list[float], runs: int) -> tuple[bool, str]:
    """(stop, why) for one cell with these ok values out of `runs` finished runs (a rule on a metric)."""
    rule = campaign.until
    assert rule is not None
    n = len(values)
    if n >= campaign.repeat:
        found = interval(values)
        if found is not None:
            mean, half = found
            relative = half / abs(mean) if mean else math.inf
            if relative <= rule.ci_fraction:
                return True, (f"{rule.metric}: 95 % interval ±{100 * relative:.1f} % of the mean after {n} ok runs "
                              f"(rule: ±{100 * rule.ci_fraction:g} %)")
    if runs >= rule.max:
        found = interval(values)
        width = f"±{100 * found[1] / abs(found[0]):.1f} %" if found and found[0] else "no interval"
        return True, f"max {rule.max} runs reached ({n} ok; {rule.metric} {width}, rule ±{100 * rule.ci_fraction:g} %)"
    return False, f"{n} ok of at least {campaign.repeat}; interval not yet within ±{100 * rule.ci_fraction:g} %"


def after_run(campaign: Campaign, store: Any, finished: PlannedRun, log: Any = None) -> list[PlannedRun]:
    """The cell of `finished` decided: the runs to add to the plan (none: it stops, or has runs still to come)."""
    rule = campaign.until
    if rule is None:
        return []
    if rule.comparison is not None:
        return _after_run_compared(campaign, store, finished, log)
    key = cell_key(finished.factors)
    rows = [r for r in store.rows() if cell_key(r["factors"]) == key]
    if any(r["status"] not in FINISHED for r in rows):
        return []  # the cell has runs still to come: decide when the last of them is in
    metric = rule.metric
    values = [float(r["metrics"][metric]) for r in rows if r["status"] == "ok" and isinstance(r.get("metrics"), dict)
              and isinstance(r["metrics"].get(metric), int | float)]
    stop, why = decide(campaign, values, len(rows))
    _record(store, {key: _cell(finished.factors, rows, stop, why)})
    _log(log, finished.factors, stop, why)
    return [] if stop else _more(store, [(finished, rows)])


# --- a named comparison decides --------------------------------------------------------------------
def _after_run_compared(campaign: Campaign, store: Any, finished: PlannedRun, log: Any) -> list[PlannedRun]:
    rule = campaign.until
    assert rule is not None and rule.comparison is not None
    spec = campaign.comparisons[rule.comparison]
    rows = store.rows()
    level = str(finished.factors.get(spec.factor))
    if level not in (spec.level, spec.baseline):  # a cell the comparison does not name: `repeat` runs
        key = cell_key(finished.factors)
        mine = [r for r in rows if cell_key(r["factors"]) == key]
        if all(r["status"] in FINISHED for r in mine):
            why = (f"not in comparison {rule.comparison} ({spec.factor} {spec.level} vs {spec.baseline}): "
                   f"its {campaign.repeat} run(s) of `repeat`")
            _record(store, {key: _cell(finished.factors, mine, True, why)})
        return []
    sides = {name: {**finished.factors, spec.factor: _as_planned(finished, spec, name)}
             for name in (spec.level, spec.baseline)}
    cells = {name: [r for r in rows if cell_key(r["factors"]) == cell_key(factors)] for name, factors in sides.items()}
    if any(r["status"] not in FINISHED for cell in cells.values() for r in cell):
        return []  # a run of either side still to come: decide when the last of them is in
    if not all(cells.values()):  # the plan has no run of one side here (the matrix lacks the cell)
        why = f"{rule.comparison}: no run of {', '.join(n for n, c in cells.items() if not c)} in this cell to compare"
        _record(store, {cell_key(sides[n]): {**_cell(sides[n], c, True, why), "comparison": rule.comparison}
                        for n, c in cells.items() if c})
        return []
    stratum = {k: str(v) for k, v in finished.factors.items() if k != spec.factor}
    found = named_comparison(rule.comparison, spec.model_dump(), campaign.factors, ok_samples(rows), only=stratum)
    stop, why = decide_comparison(campaign, spec, found, cells)
    _record(store, {cell_key(sides[name]): {**_cell(sides[name], cells[name], stop, why),
                                            "comparison": rule.comparison} for name in sides})
    _refresh_named(store, campaign, rule.comparison, spec)
    _log(log, {**stratum, spec.factor: f"{spec.level} vs {spec.baseline}"}, stop, why)
    if stop:
        return []
    return _more(store, [(_planned(store, cells[name], sides[name]), cells[name]) for name in sides])


def _as_planned(finished: PlannedRun, spec: NamedComparison, level: str) -> Any:
    """A side's level as the plan's factors hold it (a number stays a number: `n_prb: [25, 50]`)."""
    value = finished.factors.get(spec.factor)
    return value if str(value) == level else _typed_level(value, level)


def _typed_level(example: Any, level: str) -> Any:
    if isinstance(example, bool) or not isinstance(example, int | float):
        return level
    try:
        number = float(level)
    except ValueError:
        return level
    return int(number) if isinstance(example, int) and number.is_integer() else number


def _planned(store: Any, rows: list[dict[str, Any]], factors: dict[str, Any]) -> PlannedRun:
    """A planned run of this cell (the model for one more of it)."""
    ids = {r["run_id"] for r in rows}
    return next(p for p in store.planned() if p.run_id in ids and p.factors == factors)


def decide_comparison(campaign: Campaign, spec: NamedComparison, found: list[dict[str, Any]],
                      cells: dict[str, list[dict[str, Any]]]) -> tuple[bool, str]:
    """(stop, why) for a comparison's two cells in one stratum, from its rows there (one per metric)."""
    rule = campaign.until
    assert rule is not None
    limit = rule.ci_fraction
    ok = {name: sum(1 for r in rows if r["status"] == "ok") for name, rows in cells.items()}
    counts = f"{ok[spec.level]} + {ok[spec.baseline]} ok runs ({spec.level} + {spec.baseline})"
    shown, narrow = [], True
    for row in found:
        if row["ratio"] is None or row["low"] is None:
            shown.append(f"{row['metric']} {row['note'] or 'no interval'}")
            narrow = False
            continue
        below, above = (row["ratio"] - row["low"]) / row["ratio"], (row["high"] - row["ratio"]) / row["ratio"]
        narrow &= max(below, above) <= limit
        shown.append(f"{row['metric']} ×{row['ratio']:.3f} [{row['low']:.3f}, {row['high']:.3f}] "
                     f"(-{100 * below:.1f} %/+{100 * above:.1f} %)")
    text = "; ".join(shown)
    if narrow and min(ok.values()) >= campaign.repeat:
        return True, f"{rule.comparison}: every ratio's 95 % interval within ±{100 * limit:g} % after {counts}: {text}"
    most = max(len(rows) for rows in cells.values())
    if most >= rule.max:
        return True, f"max {rule.max} runs reached ({counts}); {rule.comparison}: {text}; rule ±{100 * limit:g} %"
    return False, f"{counts}; {rule.comparison}: {text}; not yet within ±{100 * limit:g} %"


def _refresh_named(store: Any, campaign: Campaign, name: str, spec: NamedComparison) -> None:
    """The named comparison's rows in results.sqlite, every stratum, from the store's ok runs as they are now."""
    rows = named_comparison(name, spec.model_dump(), campaign.factors, ok_samples(store.rows()))
    write_rows(store, rows, kind="named", name=name)


# --- records -----------------------------------------------------------------------------------------
def _more(store: Any, cells: list[tuple[PlannedRun, list[dict[str, Any]]]]) -> list[PlannedRun]:
    """One more run of each cell (`model`: a run of the cell, `rows`: its runs so far), appended to the plan."""
    index = len(store.planned())
    new = []
    for model, rows in cells:
        repeat = max(r["repeat"] for r in rows) + 1
        new.append(PlannedRun(index=index + len(new), run_id=run_id(model.factors, repeat), repeat=repeat,
                              factors=model.factors, params=model.params))
    store.append_runs(new)
    return new


def _cell(factors: dict[str, Any], rows: list[dict[str, Any]], stop: bool, why: str) -> dict[str, Any]:
    return {"factors": factors, "runs": len(rows), "ok": sum(1 for r in rows if r["status"] == "ok"),
            "stopped": stop, "why": why}


def _log(log: Any, factors: dict[str, Any], stop: bool, why: str) -> None:
    if log is not None:
        label = " ".join(f"{k}={v}" for k, v in factors.items()) or "the campaign"
        log(f"{label}: {'stopped' if stop else 'one more run'}: {why}")


def _record(store: Any, decided: dict[str, dict[str, Any]]) -> None:
    path = store.root / REPEATS_FILE
    try:
        cells = json.loads(path.read_text())
    except (OSError, ValueError):
        cells = {}
    cells.update(decided)
    write_json(path, cells)
