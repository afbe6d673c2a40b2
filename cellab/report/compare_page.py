"""`cellab compare DIR_A DIR_B [...]` (its command: cellab.report.compare_cli): the comparison of campaigns
(cellab.report.compare) printed, and written as one self-contained HTML page and its JSON into a folder:

    <out>/compare.html   the differences in conditions and software first, then each shared cell's ratios
    <out>/compare.json   the same, for a notebook

The output folder is made when missing; a compare.html or compare.json already there is never overwritten, and
a link at either name is refused (cellab.safepath).
"""

from __future__ import annotations

import json
from pathlib import Path

from jinja2 import Environment, select_autoescape
from rich.console import Console
from rich.markup import escape
from rich.table import Table as RichTable

from cellab.errors import CellabError
from cellab.report.cells import METRIC_UNITS, stratum_text
from cellab.report.compare import Comparison, as_json
from cellab.report.model import Section, Table
from cellab.report.stats import fmt_number, fmt_p, fmt_ratio
from cellab.results.ratios import INTERVAL_METHOD, TEST_METHOD
from cellab.safepath import SafeDir, output_dir

OUTPUT_FILES = ("compare.html", "compare.json")
MAX_PRINTED_DIFFERENCES = 40

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>cellab compare</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } .left { text-align: left; } .nowrap { white-space: nowrap; } .differs { background: #fff4d6; }
</style></head><body>
<h1>cellab compare</h1>
<ul>{% for c in campaigns %}<li>{% if loop.first %}<b>reference</b>: {% endif %}{{ c.label }} · lab {{ c.lab }} · {{ c.runs }} ok runs · <code>{{ c.root }}</code></li>{% endfor %}</ul>
{% for s in sections %}<section id="{{ s.id }}"><h2>{{ s.title }}</h2>
{% for n in s.notes %}<p>{{ n }}</p>{% endfor %}
{% for t in s.tables %}<table>{% if t.caption %}<caption>{{ t.caption }}</caption>{% endif %}
<tr>{% for h in t.header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for c in row %}{% if c is string %}<td>{{ c }}</td>{% else %}<td class="{{ c[1] }}">{{ c[0] }}</td>{% endif %}{% endfor %}</tr>
{% endfor %}</table>{% endfor %}</section>
{% endfor %}</body></html>
"""


def _median(value: float | None, metric: str) -> str:
    unit, scale, digits = METRIC_UNITS.get(metric, ("", 1.0, 3))
    return "–" if value is None else f"{fmt_number(value * scale, digits)}{' ' + unit if unit else ''}"


def summary_line(result: Comparison) -> str:
    """How many of the cells' ratios could be 1 (their interval holds it), and the smallest p."""
    with_interval = [c for c in result.cells if c.ratio.includes(1.0) is not None]
    holding = sum(1 for c in with_interval if c.ratio.includes(1.0))
    ps = [c.ratio.p_value for c in result.cells if c.ratio.p_value is not None]
    text = (f"{holding} of {len(with_interval)} ratios' 95 % intervals include 1"
            if with_interval else "no ratio has an interval (fewer than 2 ok runs a side)")
    return text + (f"; the smallest Mann–Whitney p is {fmt_p(min(ps))}" if ps else "") + (
        f"; {len(result.cells) - len(with_interval)} without an interval" if with_interval and len(with_interval) <
        len(result.cells) else "")


def sections(result: Comparison) -> list[Section]:
    labels = [c.label for c in result.campaigns]
    differs = Section("differences", "What differs between the campaigns")
    if result.differences:
        differs.notes.append("Conditions (the campaign files), the levels of their factors, and software (each run's "
                             "manifest: software, provenance, lab kind, agents) whose values are not the same in "
                             "every campaign; — : the campaign has no such key. Keys that change from run to run "
                             "inside a campaign (times, clock offsets) are left out.")
        differs.tables.append(Table(["kind", "key", *labels], [
            [(d.kind, "left"), (d.key, "left"), *((v, "left differs") for v in d.values)]
            for d in result.differences]))
    else:
        differs.notes.append("None: the same conditions, factor levels and software in every campaign.")
    cells = Section("cells", f"Shared cells: {', '.join(result.shared)}")
    cells.notes.append(f"Each cell of the shared factors that the reference and the campaign both ran: ratio of "
                       f"medians over ok runs (campaign ÷ reference) with its {INTERVAL_METHOD} interval; p: "
                       f"{TEST_METHOD} over the runs. With 2 runs a side the Mann–Whitney p cannot go below 0.33, and "
                       "the bootstrap interval spans little more than the runs themselves.")
    cells.notes.append(summary_line(result).capitalize() + ".")
    for label, pooled in result.pooled.items():
        cells.notes.append(f"{label}: pooled over {', '.join(pooled)} (the other campaigns lack it).")
    for label, only in result.only_in.items():
        if only:
            cells.notes.append(f"Only {label} ran: {'; '.join(stratum_text(c) for c in only)}.")
    cells.tables.append(Table(["campaign vs reference", "cell", "metric", "runs (campaign / reference)",
                               "median (campaign / reference)", "ratio [95 % CI]", "p"], [
        [(c.campaign, "left"), (stratum_text(c.cell), "left"), (c.metric, "left"),
         f"{c.ratio.n_level} / {c.ratio.n_base}",
         f"{_median(c.ratio.median_level, c.metric)} / {_median(c.ratio.median_base, c.metric)}",
         (fmt_ratio(c.ratio), "left nowrap"), fmt_p(c.ratio.p_value)] for c in result.cells]))
    return [differs, cells]


def check_free(target: SafeDir) -> None:
    """Neither output name is taken in the folder (by a file, a folder or a link)."""
    taken = [name for name in OUTPUT_FILES if name in target.names() or target.is_link(name)]
    if taken:
        raise CellabError(f"--out {target.path}: {', '.join(taken)} already there: nothing was overwritten (give a "
                          "new folder)")


def check_output(out: Path) -> None:
    """Refuse a taken output before anything is computed (the folder is made when missing)."""
    with SafeDir.open(output_dir(out, "--out")) as target:
        check_free(target)


def write_compare(result: Comparison, out: Path) -> Path:
    """compare.html and compare.json into `out` (made when missing); nothing there is overwritten."""
    folder = output_dir(out, "--out")
    with SafeDir.open(folder) as target:
        check_free(target)
        campaigns = [{"label": c.label, "root": str(c.root), "runs": len(c.runs),
                      "lab": c.campaign.get("lab", "virtual")} for c in result.campaigns]
        page = Environment(autoescape=select_autoescape(default=True, default_for_string=True)).from_string(
            _TEMPLATE).render(campaigns=campaigns, sections=sections(result))
        target.write("compare.json", json.dumps(as_json(result), indent=2, default=str))
        return target.write("compare.html", page)


def print_comparison(result: Comparison, console: Console) -> None:
    shown = result.differences[:MAX_PRINTED_DIFFERENCES]
    console.print(f"[bold]differences[/] ({len(result.differences)}):" if shown else "[bold]differences[/]: none "
                  "(same conditions, factor levels and software)", highlight=False)
    for d in shown:
        console.print(f"  {d.kind} {escape(d.key)}: " + " | ".join(escape(v) for v in d.values), highlight=False)
    if len(result.differences) > len(shown):
        console.print(f"  ... {len(result.differences) - len(shown)} more in compare.html", highlight=False)
    table = RichTable(title=f"shared cells ({', '.join(result.shared)}): campaign ÷ reference, "
                            f"{result.campaigns[0].label}")
    for column in ("campaign", "cell", "metric", "runs", "ratio [95 % CI]", "p"):
        table.add_column(column)
    for c in result.cells:
        table.add_row(c.campaign, stratum_text(c.cell), c.metric, f"{c.ratio.n_level}/{c.ratio.n_base}",
                      fmt_ratio(c.ratio), fmt_p(c.ratio.p_value))
    console.print(table)
    console.print(summary_line(result), highlight=False)


__all__ = ["check_output", "print_comparison", "sections", "summary_line", "write_compare"]
