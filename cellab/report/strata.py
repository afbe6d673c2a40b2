"""Comparisons within levels of the other varied factors (stratified), and the plain-words warning when a
comparison has too few runs for its test ever to reach significance.

A campaign that varies `cc` and `channel` compares BBR against Cubic within channel=static and within
channel=mobile (cellab.results.comparisons.stratified_comparisons: the same rows the store keeps); the pooled
comparison (every channel together) stays in the table above, labelled as pooled. With few runs a side the
two-sided Mann–Whitney U test has a floor: 3 against 3 runs can never give p below 0.1, however far apart they
are (cellab.results.ratios.smallest_p_value); the note says so and how many runs would do.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from cellab.report.cells import ratio_of_row, stratum_text
from cellab.report.model import Run, Section, Table
from cellab.report.stats import fmt_number, fmt_p, fmt_ratio
from cellab.results.comparisons import stratified_comparisons
from cellab.results.ratios import MIN_RUNS, runs_for_p, smallest_p_value

ALPHA = 0.05  # the significance level the warning speaks of
COMPARED = (("throughput_bps", "throughput", "Mbit/s", 1e-6, 2), ("rtt_p95_ms", "p95 RTT", "ms", 1.0, 1))


def few_runs_note(pairs: list[tuple[int, int]]) -> str | None:
    """A plain-words note for the (runs of the level, runs of the baseline) pairs whose test cannot reach p < ALPHA
    whatever the data (pairs under MIN_RUNS a side already say "too few runs")."""
    floors = sorted({(n_level, n_base, smallest_p_value(n_level, n_base)) for n_level, n_base in pairs
                     if n_level >= MIN_RUNS and n_base >= MIN_RUNS and smallest_p_value(n_level, n_base) >= ALPHA})
    if not floors:
        return None
    counts = "; ".join(f"{a} against {b} runs: never below {p:.2g}" for a, b, p in floors)
    need = runs_for_p(ALPHA)
    return (f"Too few repeats for the test to ever reach significance: with these runs the two-sided Mann–Whitney "
            f"U p-value has a floor however different the runs are ({counts}); p < {ALPHA:g} needs at least {need} "
            f"runs a side. Ask for them with `repeat: {need}` or more, or let the campaign decide with "
            f"`repeat: {{min: {need}, max: …, comparison: NAME, ci_fraction: …}}` (or `metric:` instead of "
            "`comparison:`; docs/campaign.md, `until`). Until then read the ratio and its interval, not p.")


def stratified_section(runs: list[Run], campaign_factors: dict[str, Any]) -> Section | None:
    """The stratified comparison table; None when the campaign varies fewer than two factors."""
    rows = stratified_comparisons(campaign_factors, runs)
    if not rows:
        return None
    grouped: dict[tuple[str, str, str, str], dict[str, dict[str, Any]]] = defaultdict(dict)
    for row in rows:
        grouped[(row["factor"], row["level"], row["baseline"], row["stratum"])][row["metric"]] = row
    header = ["factor", "level vs baseline", "within", "runs (level / baseline)"]
    for _, what, unit, _, _ in COMPARED:
        header += [f"{what} median ({unit}, level / baseline)", f"{what} ratio [95 % CI]", f"{what} p"]
    table_rows, pairs = [], []
    for (factor, level, baseline, stratum), by_metric in grouped.items():
        within = stratum_text(stratum)
        first = next(iter(by_metric.values()))
        pairs.append((first["n_level"], first["n_base"]))
        cells: list[Any] = [(factor, "left"), (f"{level} vs {baseline}", "left"), (within, "left"),
                            f"{first['n_level']} / {first['n_base']}"]
        for metric, _, _, scale, digits in COMPARED:
            row = by_metric.get(metric)
            if row is None:
                cells += ["", "", ""]
                continue
            medians = " / ".join(fmt_number(v * scale, digits) if v is not None else "–"
                                 for v in (row["median_level"], row["median_base"]))
            cells += [medians, (fmt_ratio(ratio_of_row(row)), "left nowrap"), fmt_p(row["p_value"])]
        table_rows.append(cells)
    section = Section("stratified", "Comparisons within each level of the other factors", notes=[
        "The same comparisons as above, each within one cell of the other varied factors (stratified): the "
        "level's runs against the baseline's runs of that cell only, so a factor that moves both (the channel "
        "under a congestion control) does not blur the difference. Ratio, interval and p as above; the same rows "
        "are in results.sqlite, table comparisons (kind factor, stratum the cell)."])
    note = few_runs_note(pairs)
    if note:
        section.notes.append(note)
    section.tables.append(Table(header, table_rows))
    return section


__all__ = ["ALPHA", "few_runs_note", "stratified_section"]
