"""The campaign report: one self-contained HTML file (plots inline), plots also saved as PNG and SVG."""

from __future__ import annotations

import base64
import io
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from jinja2 import Environment, select_autoescape  # noqa: E402

from cellab.metrics import scalar_metrics  # noqa: E402
from cellab.store import ResultStore, write_atomic  # noqa: E402

TABLE_METRICS = ("throughput_bps", "rtt_mean_ms", "rtt_p95_ms", "retransmits", "sender_srtt_mean_ms")

_TEMPLATE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{{ name }} — cellab report</title>
<style>
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: right; }
th { background: #f0f0f0; } td.left, th.left { text-align: left; }
.failed { background: #fde2e2; } .aborted, .running, .pending { background: #fff4d6; }
figure { display: inline-block; margin: 1em; } img { max-width: 640px; }
</style></head><body>
<h1>{{ name }}</h1>
<p>Lab: <b>{{ lab }}</b> · runs: {{ counts }} · folder: <code>{{ folder }}</code></p>
{% if description %}<p>{{ description }}</p>{% endif %}
<h2>Plots</h2>
{% for fig in figures %}<figure><img alt="{{ fig.title }}" src="data:image/png;base64,{{ fig.png_b64 }}">
<figcaption>{{ fig.title }}</figcaption></figure>{% else %}<p>No finished run has metrics yet.</p>{% endfor %}
<h2>Runs</h2>
<table><tr><th>#</th><th class="left">run id</th><th>repeat</th>
{% for f in factor_names %}<th class="left">{{ f }}</th>{% endfor %}<th class="left">status</th>
{% for m in metric_names %}<th>{{ m }}</th>{% endfor %}<th class="left">error</th></tr>
{% for r in rows %}<tr class="{{ r.status }}"><td>{{ r.idx }}</td><td class="left">{{ r.run_id }}</td><td>{{ r.repeat }}</td>
{% for f in factor_names %}<td class="left">{{ r.factors.get(f, "") }}</td>{% endfor %}<td class="left">{{ r.status }}</td>
{% for m in metric_names %}<td>{{ fmt(r.metrics, m) }}</td>{% endfor %}<td class="left">{{ r.error or "" }}</td></tr>
{% endfor %}</table>
</body></html>
"""


def _fmt(metrics: dict[str, Any] | None, name: str) -> str:
    if not metrics or metrics.get(name) is None:
        return ""
    value = metrics[name]
    if name.endswith("_bps"):
        return f"{value / 1e6:.2f} Mbit/s"
    return f"{value:.2f}" if isinstance(value, float) else str(value)


def _group_key(factors: dict[str, Any], group_by: list[str]) -> str:
    return ", ".join(f"{k}={factors[k]}" for k in group_by) or "all"


def _figures(rows: list[dict[str, Any]], group_by: list[str]) -> list[tuple[str, plt.Figure]]:
    done = [r for r in rows if r["status"] == "ok" and r["metrics"]]
    if not done:
        return []
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in done:
        groups[_group_key(r["factors"], group_by)].append(r)
    figures = []

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    top_mbit = max(r["metrics"].get("throughput_bps", 0) for r in done) / 1e6
    for label, members in sorted(groups.items()):
        xs = [m["metrics"].get("rtt_p95_ms") for m in members]
        ys = [m["metrics"].get("throughput_bps", 0) / 1e6 for m in members]
        pts = [(x, y) for x, y in zip(xs, ys, strict=True) if x is not None]
        if pts:
            ax.scatter(*zip(*pts, strict=True), label=label, s=36)
    ax.set_xlabel("95th-percentile RTT (ms)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_ylim(0, max(top_mbit, 0.1) * 1.2)
    ax.set_xlim(left=max(ax.get_xlim()), right=0)  # Pantheon style: better is up and to the right
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    ax.set_title("Throughput vs delay")
    figures.append(("throughput-vs-delay", fig))

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, members in sorted(groups.items()):
        samples = np.concatenate([np.asarray(m["metrics"].get("rtt_series_ms", []), float) for m in members])
        if samples.size:
            xs = np.sort(samples)
            ax.plot(xs, np.arange(1, xs.size + 1) / xs.size, label=label)
    ax.set_xlabel("RTT (ms)")
    ax.set_ylabel("CDF")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("RTT distribution")
    figures.append(("rtt-cdf", fig))

    fig, ax = plt.subplots(figsize=(6.4, 4.4))
    for label, members in sorted(groups.items()):
        for i, m in enumerate(members):
            series = np.asarray(m["metrics"].get("throughput_series_bps", []), float) / 1e6
            if series.size:
                ax.plot(np.arange(series.size), series, label=label if i == 0 else None, alpha=0.8)
    ax.set_xlabel("time (s)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Throughput over time (per run)")
    figures.append(("throughput-timeline", fig))
    return figures


def write_report(result_dir: Path) -> Path:
    store = ResultStore.open(Path(result_dir))
    import yaml

    campaign = yaml.safe_load(store.campaign_path().read_text())
    rows = store.rows()
    factor_names = sorted(campaign.get("factors", {}))
    group_by = factor_names  # one colour per factor combination; repeats share it
    plot_dir = store.root / "report"
    plot_dir.mkdir(exist_ok=True)
    figures = []
    for name, fig in _figures(rows, group_by):
        fig.tight_layout()
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110)
        write_atomic(plot_dir / f"{name}.png", buf.getvalue())
        svg = io.BytesIO()
        fig.savefig(svg, format="svg")
        write_atomic(plot_dir / f"{name}.svg", svg.getvalue())
        plt.close(fig)
        figures.append({"title": name.replace("-", " "), "png_b64": base64.b64encode(buf.getvalue()).decode()})
    counts: dict[str, int] = defaultdict(int)
    for r in rows:
        counts[r["status"]] += 1
    metric_names = [m for m in TABLE_METRICS if any(r["metrics"] and m in r["metrics"] for r in rows)]
    env = Environment(autoescape=select_autoescape(default=True))
    page = env.from_string(_TEMPLATE).render(
        name=campaign.get("name", store.root.name), lab=campaign.get("lab", "virtual"),
        description=campaign.get("description", ""), folder=str(store.root),
        counts=", ".join(f"{k} {v}" for k, v in sorted(counts.items())), figures=figures,
        factor_names=factor_names, metric_names=metric_names, rows=rows, fmt=_fmt)
    path = store.root / "report.html"
    write_atomic(path, page)
    summary = [{"run_id": r["run_id"], "status": r["status"], "factors": r["factors"],
                "metrics": scalar_metrics(r["metrics"] or {})} for r in rows]
    write_atomic(plot_dir / "summary.json", json.dumps(summary, indent=2, default=str))
    return path


__all__ = ["write_report"]
