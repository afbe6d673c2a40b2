"""Sequential repeats (`until` in a campaign): after each finished run, its cell of the matrix either stops or
gets one more run, appended to the plan (so `--resume` continues the rule where it was).

A cell stops when its ok runs number at least `repeat` and the 95 % confidence interval of the metric's mean
(Student t) is at most `ci_fraction` of the mean on each side, or when it has `max` runs. `repeats.json` in the
result folder says, per cell, how many runs it took and why it stopped (or what it waits for).
"""

from __future__ import annotations

import json
import math
from typing import Any

from cellab.campaign.model import Campaign, run_id
from cellab.records import PlannedRun, write_json


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
    """(stop, why) for one cell with these ok values out of `runs` finished runs."""
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


def after_run(campaign: Campaign, store: Any, finished: PlannedRun, log: Any = None) -> PlannedRun | None:
    """The cell of `finished` decided: None (it stops, or has runs still pending) or the run to add."""
    if campaign.until is None:
        return None
    key = cell_key(finished.factors)
    rows = [r for r in store.rows() if cell_key(r["factors"]) == key]
    if any(r["status"] not in ("ok", "failed") for r in rows):
        return None  # the cell has runs still to come: decide when the last of them is in
    metric = campaign.until.metric
    values = [float(r["metrics"][metric]) for r in rows if r["status"] == "ok" and isinstance(r.get("metrics"), dict)
              and isinstance(r["metrics"].get(metric), int | float)]
    stop, why = decide(campaign, values, len(rows))
    _record(store, key, finished.factors, len(rows), len(values), stop, why)
    if log is not None:
        label = " ".join(f"{k}={v}" for k, v in finished.factors.items()) or "the campaign"
        log(f"{label}: {'stopped' if stop else 'one more run'}: {why}")
    if stop:
        return None
    repeat = max(r["repeat"] for r in rows) + 1
    new = PlannedRun(index=len(store.planned()), run_id=run_id(finished.factors, repeat), repeat=repeat,
                     factors=finished.factors, params=finished.params)
    store.append_runs([new])
    return new


def _record(store: Any, key: str, factors: dict[str, Any], runs: int, ok: int, stop: bool, why: str) -> None:
    path = store.root / "repeats.json"
    try:
        cells = json.loads(path.read_text())
    except (OSError, ValueError):
        cells = {}
    cells[key] = {"factors": factors, "runs": runs, "ok": ok, "stopped": stop, "why": why}
    write_json(path, cells)
