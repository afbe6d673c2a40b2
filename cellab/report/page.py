"""The campaign report: one self-contained HTML file (plots inline as PNG), plots also saved as PNG and SVG.

    <dir>/report.html              open it anywhere, offline: no external URL, no JavaScript
    <dir>/report/<figure>.png      every figure, also as .svg
    <dir>/report/summary.json      the scalar metrics of every run
    <dir>/report/comparisons.json  each varied factor's levels against its baseline, and the SR accuracy

The report leads with the campaign's answer: for an SR-estimation campaign (sr_probes, or the SR period as a
factor) the accuracy with its Wilson interval and the confusion matrix; otherwise the comparison table (each
level against the factor's first level: ratio of medians with a bootstrap interval, Mann–Whitney p). Then the
conditions (fixed parameters with units, workload, which RTT is shown and how it was sampled), then each
section whose data exists (docs/metrics.md): throughput vs p95 delay per scheme, CDFs, lab vs commercial with
Kolmogorov–Smirnov distances, the run table, per-UE rows, one timeline per run.

Pieces: report_stats (statistics), report_model (runs, sections), report_sections (figure sections),
report_tables (table sections), report_figures (drawing in parallel), store_check.read_folder (reading the
folder, each file once), safepath (output created, never followed through a link). `cellab report DIR`
rebuilds it from the result folder at any time.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape

from cellab.report import plots
from cellab.report.cells import cell_sections
from cellab.report.cluster import cluster_section
from cellab.results.metrics import scalar_metrics
from cellab.report.faults import fault_section
from cellab.report.figures import FigureSet
from cellab.report.flagged import flag_section
from cellab.report.headline import headline, sr_probes_asked as _sr_probes_asked
from cellab.report.model import (SCHEME_FACTORS, Run, Section, Table, ValueOrder, samples,
                                 scheme_label)
from cellab.report.sections import (MAX_INLINE_TIMELINES, cdf_section, network_section, scatter_panels, sr_section,
                                    throughput_delay_section, timeline_section)
from cellab.report.runs import load_runs
from cellab.report.sr_scores import sr_confusion, sr_probed
from cellab.report.stats import ks_2samp, wilson
from cellab.report.strata import stratified_section
from cellab.report.tables import (comparison_section, conditions_section, runs_section, ue_section,
                                  varied_factors)
from cellab.safepath import SafeDir
from cellab.report.damage import refuse_damaged
from cellab.results.store_check import read_folder

OUTPUT_FILES = ("report.html",)
REPORT_FILES = ("summary.json", "comparisons.json")


def _assign_facets(runs: list[Run], factor_names: list[str]) -> list[str]:
    """The facet factors: varied factors besides cc and receiver with two or more values among the runs."""
    names = [f for f in factor_names if f not in SCHEME_FACTORS
             and len({str(r.factors.get(f)) for r in runs if f in r.factors}) > 1]
    for r in runs:
        r.facet = ", ".join(f"{f}={r.factors.get(f, '-')}" for f in names) or "all"
    return names


def _facet_order(runs: list[Run], order: ValueOrder, names: list[str]) -> list[str]:
    def key(run: Run) -> tuple:
        return tuple(order.key(f, run.factors.get(f)) for f in names)
    return list(dict.fromkeys(r.facet for r in sorted(runs, key=key)))


def _scheme_order(runs: list[Run], order: ValueOrder) -> list[str]:
    def key(run: Run) -> tuple:
        return tuple(order.key(f, run.factors.get(f)) for f in SCHEME_FACTORS) + (run.scheme,)
    return list(dict.fromkeys(r.scheme for r in sorted(runs, key=key)))


def sr_question(campaign: dict[str, Any]) -> bool:
    """The campaign asks how well the SR period is estimated: it sends SR probes or varies the SR period."""
    return _sr_probes_asked(campaign) or "sr_period_ms" in varied_factors(campaign.get("factors") or {})


def _sr_summary(done: list[Run], campaign: dict[str, Any]) -> dict[str, Any] | None:
    fixed = campaign.get("fixed") or {}
    matrix = sr_confusion(sr_probed(done, _sr_probes_asked(campaign)), fixed)
    if matrix is None:
        return None
    acc = wilson(matrix.correct, matrix.total)
    return {"correct": acc.correct, "runs": acc.total, "share": acc.share, "wilson_low": acc.low,
            "wilson_high": acc.high, "confidence": 0.95}


# --- the page -----------------------------------------------------------------------------------
_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ name }} — cellab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
nav a { margin-right: 1em; }
table { border-collapse: collapse; font-size: 0.85em; margin: 0.5em 0 1.5em; }
caption { text-align: left; font-weight: bold; padding: 0.3em 0; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } .left { text-align: left; } .nowrap { white-space: nowrap; }
td.hit { background: #dff0d8; font-weight: bold; }
.status-failed, .status-unreadable { background: #fde2e2; }
.status-aborted, .status-running, .status-pending, .status-flagged { background: #fff4d6; }
dl { display: grid; grid-template-columns: max-content auto; gap: 0.2em 1em; font-size: 0.9em; }
dt { font-weight: bold; } dd { margin: 0; }
figure { display: inline-block; margin: 0.5em 1em 1em 0; vertical-align: top; }
img { max-width: 100%; } figcaption { font-size: 0.85em; color: #555; } .missing { color: #a00; }
</style></head><body>
<h1>{{ name }}</h1>
{% for line in headline %}<p class="headline"><b>{{ line }}</b></p>
{% endfor %}<p>Lab: <b>{{ lab }}</b> · runs: {{ counts }} · folder: <code>{{ folder }}</code></p>
{% if description %}<p>{{ description }}</p>{% endif %}
{% if insecure %}<p class="warn"><b>Insecure cluster:</b> {{ insecure }}</p>{% endif %}
<nav>{% for s in sections %}<a href="#{{ s.id }}">{{ s.title }}</a>{% endfor %}</nav>
{% if not has_plots %}<p>No plots: no finished run has the metrics they need yet.</p>{% endif %}
{% macro table(t) %}<table>{% if t.caption %}<caption>{{ t.caption }}</caption>{% endif %}
<tr>{% for h in t.header %}<th>{{ h }}</th>{% endfor %}</tr>
{% for row in t.rows %}<tr>{% for c in row %}{% if c is string %}<td>{{ c }}</td>{% else %}<td class="{{ c[1] }}">{{ c[0] }}</td>{% endif %}{% endfor %}</tr>
{% endfor %}</table>{% endmacro %}
{% for s in sections %}<section id="{{ s.id }}"><h2>{{ s.title }}</h2>
{% if s.items %}<dl>{% for term, text in s.items %}<dt>{{ term }}</dt><dd>{{ text }}</dd>{% endfor %}</dl>{% endif %}
{% for n in s.notes %}<p>{{ n }}</p>{% endfor %}
{% for l in s.links %}{% if loop.first %}<ul>{% endif %}<li><a href="{{ l[0] }}">{{ l[1] }}</a></li>{% if loop.last %}</ul>{% endif %}{% endfor %}
{% for t in s.tables %}{{ table(t) }}{% endfor %}
{% for f in s.figures %}{% if f.error %}<p class="missing">{{ f.title }}: this figure could not be drawn ({{ f.error }}).</p>
{% else %}<figure><img alt="{{ f.title }}" src="data:image/png;base64,{{ f.png_b64 }}">
<figcaption>{{ f.title }} · <a href="report/{{ f.name }}.png">PNG</a> · <a href="report/{{ f.name }}.svg">SVG</a></figcaption></figure>
{% endif %}{% endfor %}</section>
{% endfor %}
</body></html>
"""


def _outputs(root: Path) -> tuple[SafeDir, SafeDir]:
    """The folder and its report/ subfolder, opened without following links; every output name checked before
    anything is written (a link there is refused, naming it)."""
    out = SafeDir.open(root)
    try:
        for name in OUTPUT_FILES:
            out.check_writable(name)
        figures = out.subdir("report")
        try:
            for name in REPORT_FILES:
                figures.check_writable(name)
        except BaseException:
            figures.close()
            raise
    except BaseException:
        out.close()
        raise
    return out, figures


def _write_figures(plot_dir: SafeDir, files: dict[str, bytes]) -> None:
    """This build's figures; a rebuild must not leave figures of runs or sections that no longer exist."""
    for old in plot_dir.names():
        if old.endswith((".png", ".svg")) and old not in files:
            plot_dir.remove(old)
    for name, data in files.items():
        plot_dir.write(name, data, durable=False)  # a figure is rebuilt from the folder at any time


def _insecure(root: Path) -> str:
    """What to say when the runs travelled over a cluster without TLS (`cellab run --cluster tcp://... --insecure`
    writes cluster.json); empty otherwise or when the file is unreadable."""
    try:
        info = json.loads((root / "cluster.json").read_text())
    except (OSError, ValueError):
        return ""
    if not isinstance(info, dict) or info.get("insecure") is not True:
        return ""
    return (f"the runs' tasks and results travelled over {str(info.get('address'))[:200]} without TLS "
            "(--insecure): no encryption, no authentication of the workers")


def write_report(result_dir: Path, *, workers: int | None = None) -> Path:
    """Build report.html and report/ from a result folder; workers: processes drawing figures (default: one
    per CPU, CELLAB_REPORT_WORKERS)."""
    folder = read_folder(Path(result_dir))
    refuse_damaged(folder)
    campaign = folder.campaign
    campaign_factors = campaign.get("factors") or {}
    fixed = campaign.get("fixed") or {}
    runs = load_runs(folder)
    factor_names = list(dict.fromkeys([*campaign_factors, *sorted({f for r in runs for f in r.factors})]))
    order = ValueOrder(campaign_factors)
    done = [r for r in runs if r.ok]
    facet_names = _assign_facets(done, factor_names)
    facets = _facet_order(done, order, facet_names)
    colors = plots.colors_for(_scheme_order(done, order))

    root_dir, plot_dir = _outputs(folder.root)
    with root_dir, plot_dir:
        figures = FigureSet()
        sr = sr_section(done, fixed, figures, _sr_probes_asked(campaign), order, varied_factors(campaign_factors))
        comparison, entries = comparison_section(done, campaign_factors, order)
        stratified = stratified_section(done, campaign_factors) if comparison is not None else None
        lead = [sr, comparison, stratified] if sr_question(campaign) else [comparison, stratified, sr]
        conditions = conditions_section(campaign, done, [p.params for p in folder.plan], order)
        plotted = [fault_section(done, runs, order, figures), throughput_delay_section(done, facets, colors, figures),
                   cdf_section(done, facets, colors, figures), network_section(done, order, figures)]
        tail = [cluster_section(folder.root), runs_section(runs, [f for f in factor_names if f != "scheme"]), ue_section(folder.ue_runs, done),
                timeline_section(done, figures, MAX_INLINE_TIMELINES)]
        answers = [s for s in lead if s is not None]  # the campaign's question first, then its conditions
        cells = cell_sections(folder.root, campaign, done, runs)  # named comparisons; each cell's repeats
        sections = [s for s in [*answers[:1], conditions, flag_section(done), *answers[1:], *cells, *plotted, *tail]
                    if s is not None]
        figures.render(workers)

        answer = headline(runs, campaign, entries, sr_asked=_sr_probes_asked(campaign))
        counts = Counter(r.shown_status for r in runs)
        env = Environment(autoescape=select_autoescape(default=True, default_for_string=True))
        page = env.from_string(_TEMPLATE).render(
            name=campaign.get("name", folder.root.name), lab=campaign.get("lab", "virtual"),
            description=campaign.get("description", ""), folder=str(folder.root), insecure=_insecure(folder.root),
            counts=", ".join(f"{k} {v}" for k, v in sorted(counts.items())), sections=sections,
            has_plots=any(s.figures for s in sections), headline=answer.lines)
        summary = [{"run_id": r.run_id, "status": r.status, "scheme": r.scheme, "factors": r.factors,
                    "metrics": scalar_metrics(r.metrics), "flags": r.flags,
                    **({"unreadable": r.unreadable} if r.unreadable else {})}
                   for r in runs]
        stats = {"baseline": "each varied factor's first level in the campaign", "unit": "runs",
                 "ratio": "median(level) / median(baseline)", "interval": "95 % bootstrap, percentile, fixed seed",
                 "p_value": "two-sided Mann-Whitney U", "comparisons": entries, "sr_accuracy": _sr_summary(done, campaign),
                 "headline": answer.as_dict()}
        _write_figures(plot_dir, figures.files)
        plot_dir.write("summary.json", json.dumps(summary, indent=2, default=str))
        plot_dir.write("comparisons.json", json.dumps(stats, indent=2, default=str))
        return root_dir.write("report.html", page)


__all__ = ["Run", "Section", "Table", "ValueOrder", "ks_2samp", "load_runs", "samples", "scatter_panels",
           "scheme_label", "sr_confusion", "write_report"]
