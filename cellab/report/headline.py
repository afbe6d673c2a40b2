"""A campaign's answer in one or two lines: what `cellab run` and `make demo` end with and the report opens with.

- An SR campaign (SR probes, or the SR period as a factor): the share of runs whose SR-period estimate was right,
  with its 95 % Wilson interval; then the accuracy per true period.
- A shoot-out (the scheme, cc or receiver varied): the scheme with the lowest p95 delay among those whose
  throughput stays within its interval of the baseline's (the throughput ratio's 95 % interval reaches 1: no
  measurable loss of throughput), with both ratios and their intervals; then every scheme's two ratios.
- A sweep (any other varied factor): each factor's last level against its first, throughput and p95 delay.
- Nothing varied: the medians over the runs.

The numbers are the report's (the same comparisons, the same Wilson interval), kept beside the lines in
report/comparisons.json under `headline`, so a notebook or a test can check them against the runs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from cellab.report.model import SCHEME_FACTORS, Run, ValueOrder, is_number
from cellab.report.sr_scores import sr_confusion, sr_probed
from cellab.report.stats import fmt_number, wilson
from cellab.report.tables import COMPARED, comparisons, varied_factors

WIDE_INTERVAL = 0.4  # a throughput ratio's interval wider than this proves little: the headline says so
WIDE_NOTE = "; the throughput interval is wide: more repeats would narrow it"


@dataclass
class Headline:
    kind: str  # "sr", "shoot-out", "sweep", "runs", "none"
    lines: list[str]
    numbers: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "lines": self.lines, "numbers": self.numbers}


def sr_probes_asked(campaign: dict[str, Any]) -> bool:
    """The campaign's workload sends SR probes (then a run without an SR estimate counts as a miss)."""
    workload = campaign.get("workload")
    return isinstance(workload, dict) and bool(workload.get("sr_probes"))


def campaign_headline(runs: list[Run], campaign: dict[str, Any]) -> Headline:
    """The headline of a folder's runs (cellab.report.page.load_runs), its comparisons computed as the report's."""
    factors = campaign.get("factors") or {}
    entries = comparisons([r for r in runs if r.ok], factors, ValueOrder(factors))
    return headline(runs, campaign, entries, sr_asked=sr_probes_asked(campaign))


def headline(runs: list[Run], campaign: dict[str, Any], entries: list[dict[str, Any]], *, sr_asked: bool) -> Headline:
    """runs: every run of the folder (the report's); entries: the report's comparisons (comparisons.json's)."""
    done = [r for r in runs if r.ok]
    factors = campaign.get("factors") or {}
    varied = varied_factors(factors)
    if not done:
        out = Headline("none", [f"No run finished ok (of {len(runs)}): no answer yet."])
    elif sr_asked or "sr_period_ms" in varied:
        out = _sr(done, campaign, sr_asked)
    elif any(f in varied for f in SCHEME_FACTORS):
        out = _shootout(next(f for f in SCHEME_FACTORS if f in varied), entries)
    elif varied:
        out = _sweep(varied, entries)
    else:
        out = _medians(done)
    left_out = _left_out(runs)
    if left_out and out.lines:
        out.lines[-1] += f" ({left_out})"
    return out


def _sr(done: list[Run], campaign: dict[str, Any], sr_asked: bool) -> Headline:
    matrix = sr_confusion(sr_probed(done, sr_asked), campaign.get("fixed") or {})
    if matrix is None:
        return Headline("sr", ["SR period: no run made an estimate to score."], {"correct": 0, "runs": 0})
    acc = wilson(matrix.correct, matrix.total)
    numbers = {"correct": acc.correct, "runs": acc.total, "share": acc.share, "wilson_low": acc.low,
               "wilson_high": acc.high, "confidence": 0.95,
               "per_true_period_ms": {t: {"correct": a.correct, "runs": a.total} for t in matrix.true_labels
                                      for a in [matrix.row_accuracy(t)]}}
    lines = [f"SR period estimated right in {acc.correct} of {acc.total} runs ({_pct(acc.share)}, 95 % Wilson "
             f"interval {_pct(acc.low)}–{_pct(acc.high)})."]
    per = [f"{t} ms {v['correct']}/{v['runs']}" for t, v in numbers["per_true_period_ms"].items()]
    if len(per) > 1:
        lines.append("Right per true period: " + ", ".join(per) + ".")
    return Headline("sr", lines, numbers)


def _shootout(factor: str, entries: list[dict[str, Any]]) -> Headline:
    mine = [e for e in entries if e["factor"] == factor]
    if not mine:
        return Headline("shoot-out", [f"{factor}: no comparison (no run has throughput or p95 RTT)."])
    baseline = mine[0]["baseline"]
    ratios = {e["level"]: (e["throughput_bps"], e["rtt_p95_ms"]) for e in mine}
    numbers: dict[str, Any] = {"factor": factor, "baseline": baseline,
                               "schemes": {level: {"throughput_ratio": _ratio(tp), "rtt_p95_ratio": _ratio(rtt)}
                                           for level, (tp, rtt) in ratios.items()}}
    kept = {level: (tp, rtt) for level, (tp, rtt) in ratios.items()
            if _get(tp, "high") is not None and _get(tp, "high") >= 1 and _get(rtt, "ratio") is not None}
    best = min(kept, key=lambda level: _get(kept[level][1], "ratio"), default=None)
    if best is not None and _get(kept[best][1], "ratio") < 1:
        tp, rtt = kept[best]
        numbers["best"] = best
        runs = next(e for e in mine if e["level"] == best)
        first = (f"Best on p95 delay at {baseline}'s throughput: {best}, p95 RTT {_fmt(rtt)} of {baseline}'s at "
                 f"throughput {_fmt(tp)} ({runs['runs_level']} vs {runs['runs_baseline']} runs"
                 f"{WIDE_NOTE if _get(tp, 'high') - _get(tp, 'low') > WIDE_INTERVAL else ''}).")
    elif not any(_get(tp, "high") is not None for tp, _ in ratios.values()):
        numbers["best"] = None
        first = (f"Too few runs for intervals: no scheme can be shown to keep {baseline}'s throughput "
                 f"({_runs_note(mine)}).")
    else:
        numbers["best"] = baseline
        first = (f"No scheme beat {baseline} on p95 delay while keeping its throughput (within the throughput "
                 "ratio's 95 % interval).")
    all_ratios = "; ".join(f"{level} {_fmt(tp, interval=False)} / {_fmt(rtt, interval=False)}"
                           for level, (tp, rtt) in ratios.items())
    return Headline("shoot-out", [first, f"Against {baseline} (throughput / p95 RTT, median ratios): {all_ratios}."],
                    numbers)


def _sweep(varied: list[str], entries: list[dict[str, Any]]) -> Headline:
    lines, numbers = [], {}
    for factor in varied[:2]:
        mine = [e for e in entries if e["factor"] == factor]
        if not mine:
            continue
        last = mine[-1]
        tp, rtt = last["throughput_bps"], last["rtt_p95_ms"]
        numbers[factor] = {"from": last["baseline"], "to": last["level"], "throughput_ratio": _ratio(tp),
                           "rtt_p95_ratio": _ratio(rtt)}
        lines.append(f"{factor} {last['baseline']} → {last['level']}: throughput {_fmt(tp)}, p95 RTT {_fmt(rtt)}"
                     f"{_p(tp)}.")
    return Headline("sweep", lines or ["No comparison: no run has throughput or p95 RTT."], numbers)


def _medians(done: list[Run]) -> Headline:
    parts, numbers = [], {"runs": len(done)}
    for metric, what, unit, scale in COMPARED:
        values = sorted(float(r.metrics[metric]) for r in done if is_number(r.metrics.get(metric)))
        if values:
            median = _median(values)
            numbers[metric] = median
            parts.append(f"{what} {fmt_number(median * scale, 2 if unit == 'Mbit/s' else 1)} {unit}")
    if not parts:
        return Headline("runs", [f"{len(done)} runs ok; none has throughput or p95 RTT."], numbers)
    return Headline("runs", [f"Median over {len(done)} runs: " + ", ".join(parts) + "."], numbers)


# --- helpers ------------------------------------------------------------------------------------
def _get(ratio: Any, key: str) -> float | None:
    value = ratio.get(key) if isinstance(ratio, dict) else getattr(ratio, key, None)
    return float(value) if is_number(value) else None


def _ratio(ratio: Any) -> dict[str, float | None]:
    return {"ratio": _get(ratio, "ratio"), "low": _get(ratio, "low"), "high": _get(ratio, "high"),
            "p_value": _get(ratio, "p_value")}


def _fmt(ratio: Any, *, interval: bool = True) -> str:
    value = _get(ratio, "ratio")
    if value is None:
        return "n/a"
    low, high = _get(ratio, "low"), _get(ratio, "high")
    if not interval or low is None or high is None:
        return f"×{fmt_number(value)}"
    return f"×{fmt_number(value)} [{fmt_number(low)}, {fmt_number(high)}]"


def _p(ratio: Any) -> str:
    p = _get(ratio, "p_value")
    return "" if p is None else f" (throughput p {p:.2g})"


def _pct(share: float | None) -> str:
    return "n/a" if share is None or not math.isfinite(share) else f"{100 * share:.0f} %"


def _runs_note(entries: list[dict[str, Any]]) -> str:
    sizes = sorted({e["runs_level"] for e in entries} | {entries[0]["runs_baseline"]})
    return f"{', '.join(map(str, sizes))} runs per scheme; 2 per side needed"


def _median(values: list[float]) -> float:
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def _left_out(runs: list[Run]) -> str:
    counts: dict[str, int] = {}
    for r in runs:
        if not r.ok:
            counts[r.shown_status] = counts.get(r.shown_status, 0) + 1
    if not counts:
        return ""
    return ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) + f" of {len(runs)} runs not counted"


__all__ = ["Headline", "campaign_headline", "headline", "sr_probes_asked"]
