"""The report's figures: pure matplotlib (Agg), data in, Figure out. report.py decides what to plot.

Every function takes plain numbers (already grouped and labelled) so it can be tested and reused
without a result folder. Throughput is drawn in Mbit/s, times in seconds, delays in ms.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

BPS_PER_MBIT = 1e6
MAX_PANELS_PER_FIGURE = 9  # more facets than this go to a second figure: panels stay readable
MAX_LINE_POINTS = 4000  # longer series are thinned (keeping extremes): SVGs stay small, saving stays fast
CDF_POINTS = 1000  # a CDF drawn from this many quantiles looks the same as one from every sample
PANEL_W_IN, PANEL_H_IN = 5.0, 3.8


@dataclass
class ScatterPoint:
    scheme: str
    p95_delay_ms: float
    throughput_bps: float


@dataclass
class Panel:
    """One axes: a title and labelled data (points for scatters, samples for CDFs)."""

    title: str
    xlabel: str = ""
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    points: list[ScatterPoint] = field(default_factory=list)


def colors_for(labels: Sequence[str]) -> dict[str, str]:
    """One fixed colour per label, the same in every figure of the report."""
    cmap = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    return {label: matplotlib.colors.to_hex(cmap(i % cmap.N)) for i, label in enumerate(labels)}


def chunks(panels: list[Panel], size: int = MAX_PANELS_PER_FIGURE) -> list[list[Panel]]:
    return [panels[i:i + size] for i in range(0, len(panels), size)] or [[]]


def _grid(n_panels: int, max_cols: int = 3) -> tuple[Figure, list[plt.Axes]]:
    n_cols = min(max(n_panels, 1), max_cols)
    n_rows = math.ceil(max(n_panels, 1) / n_cols)
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(PANEL_W_IN * n_cols, PANEL_H_IN * n_rows), squeeze=False)
    flat = list(axes.flat)
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    return fig, flat[:n_panels]


# --- throughput vs delay ------------------------------------------------------------------------
def throughput_delay(panels: list[Panel], colors: dict[str, str]) -> Figure:
    """Pantheon style: x = 95th-percentile delay, inverted, y = throughput; better is up and right."""
    fig, axes = _grid(len(panels))
    for ax, panel in zip(axes, panels, strict=True):
        _scatter_panel(ax, panel, colors)
    fig.tight_layout()
    return fig


def _scatter_panel(ax: plt.Axes, panel: Panel, colors: dict[str, str]) -> None:
    by_scheme: dict[str, list[ScatterPoint]] = {}
    for p in panel.points:
        by_scheme.setdefault(p.scheme, []).append(p)
    for scheme in [s for s in colors if s in by_scheme]:
        pts = by_scheme[scheme]
        xs = np.array([p.p95_delay_ms for p in pts])
        ys = np.array([p.throughput_bps for p in pts]) / BPS_PER_MBIT
        ax.scatter(xs, ys, s=22, alpha=0.55, color=colors[scheme])
        # the scheme's mean: one big marker, what a reader compares first
        ax.scatter([xs.mean()], [ys.mean()], s=110, color=colors[scheme], edgecolors="black", linewidths=1,
                   label=scheme, zorder=3)
    top_delay_ms = max((p.p95_delay_ms for p in panel.points), default=1.0)
    top_mbit = max((p.throughput_bps for p in panel.points), default=0.0) / BPS_PER_MBIT
    ax.set_xlim(top_delay_ms * 1.15 or 1.0, 0)  # inverted: lower delay to the right
    ax.set_ylim(0, max(top_mbit, 0.1) * 1.2)
    ax.set_xlabel("95th-percentile RTT (ms)")
    ax.set_ylabel("throughput (Mbit/s)")
    ax.set_title(panel.title, fontsize=10)
    ax.grid(alpha=0.3)
    if by_scheme:
        ax.legend(fontsize=7, loc="lower left")


# --- CDFs ---------------------------------------------------------------------------------------
def cdf_points(samples: np.ndarray, max_points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF as (x, F(x)); long samples are drawn from evenly spaced quantiles."""
    xs = np.sort(np.asarray(samples, float))
    if xs.size > max_points:
        probs = np.linspace(0.0, 1.0, max_points)
        return np.quantile(xs, probs), probs
    return xs, np.arange(1, xs.size + 1) / xs.size


def cdfs(panels: list[Panel], colors: dict[str, str]) -> Figure:
    fig, axes = _grid(len(panels))
    for ax, panel in zip(axes, panels, strict=True):
        for label in [lab for lab in colors if lab in panel.samples]:
            xs, ps = cdf_points(panel.samples[label])
            ax.step(xs, ps, where="post", color=colors[label], label=f"{label} (n={panel.samples[label].size})")
        ax.set_ylim(0, 1.02)
        ax.set_xlabel(panel.xlabel)
        ax.set_ylabel("CDF")
        ax.set_title(panel.title, fontsize=10)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


# --- per-run timeline ---------------------------------------------------------------------------
def thin(t_s: np.ndarray, v: np.ndarray, max_points: int = MAX_LINE_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """At most max_points, keeping each bucket's min and max so spikes (RTT, capacity dips) stay visible."""
    if t_s.size <= max_points:
        return t_s, v
    n_buckets = max_points // 2
    edges = np.linspace(0, t_s.size, n_buckets + 1).astype(int)
    keep = []
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        if hi > lo:
            seg = v[lo:hi]
            keep.extend(sorted({lo + int(np.argmin(seg)), lo + int(np.argmax(seg))}))
    idx = np.array(keep)
    return t_s[idx], v[idx]


def _series(timeline: dict, name: str) -> tuple[np.ndarray, np.ndarray] | None:
    entry = timeline.get(name)
    if not isinstance(entry, dict):
        return None
    t_s = np.asarray(entry.get("t_s") or [], float)
    v = np.asarray(entry.get("v") or [], float)
    n = min(t_s.size, v.size)
    if n == 0:
        return None
    ok = np.isfinite(t_s[:n]) & np.isfinite(v[:n])
    return (t_s[:n][ok], v[:n][ok]) if ok.any() else None


def _hold_to(t_s: np.ndarray, v: np.ndarray, t_end_s: float) -> tuple[np.ndarray, np.ndarray]:
    """A setting (attenuation) holds its last value until the run ends, not until its last change."""
    if t_end_s <= t_s[-1]:
        return t_s, v
    return np.append(t_s, t_end_s), np.append(v, v[-1])


def timeline(title: str, series: dict) -> Figure | None:
    """Stacked axes on one time axis: attenuation, capacity vs throughput (and each UE's), the radio's CQI
    from the recorded telemetry, RTT (each only when present)."""
    atten = _series(series, "attenuation_db")
    capacity = _series(series, "capacity_bps")
    throughput = _series(series, "throughput_bps")
    per_ue = {k.split(".", 1)[1]: s for k in sorted(series) if k.startswith("throughput_bps.")
              and (s := _series(series, k))}
    cqi = {k.split(".", 1)[1]: s for k in sorted(series) if k.startswith("cqi.") and (s := _series(series, k))}
    rtt = _series(series, "rtt_ms")
    rows = [r for r, present in (("atten", atten), ("rate", capacity or throughput or per_ue), ("cqi", cqi),
                                 ("rtt", rtt)) if present]
    if not rows:
        return None
    height_in = 1.9 * len(rows) + 0.8
    fig, axes = plt.subplots(len(rows), 1, figsize=(9.0, height_in), sharex=True, squeeze=False)
    # fixed margins in inches instead of tight_layout: a report draws one of these per run
    fig.subplots_adjust(left=0.09, right=0.98, top=1 - 0.35 / height_in, bottom=0.5 / height_in, hspace=0.15)
    axes_by_row = dict(zip(rows, axes[:, 0], strict=True))
    if atten:
        ax = axes_by_row["atten"]
        t_end_s = max(float(ts[-1]) for ts, _ in (x for x in (atten, capacity, throughput, rtt) if x))
        ax.step(*_hold_to(*thin(*atten), t_end_s), where="post", color="tab:purple")
        ax.set_ylabel("attenuation (dB)")
    if "rate" in axes_by_row:
        ax = axes_by_row["rate"]
        if capacity:
            t, v = thin(*capacity)
            ax.plot(t, v / BPS_PER_MBIT, color="tab:gray", label="capacity")
        if throughput:
            t, v = thin(*throughput)
            ax.plot(t, v / BPS_PER_MBIT, color="tab:blue", label="throughput")
        for name, (t, v) in per_ue.items():
            t, v = thin(t, v)
            ax.plot(t, v / BPS_PER_MBIT, linewidth=0.8, label=name)
        ax.set_ylabel("Mbit/s")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper right")
    if cqi:
        ax = axes_by_row["cqi"]
        for name, (t, v) in cqi.items():
            ax.step(*thin(t, v), where="post", linewidth=0.8, label=name)
        ax.set_ylabel("CQI")
        ax.set_ylim(0, 15.5)
        if len(cqi) > 1:
            ax.legend(fontsize=7, loc="upper right", ncol=min(4, len(cqi)))
    if rtt:
        ax = axes_by_row["rtt"]
        ax.plot(*thin(*rtt), color="tab:red", linewidth=0.9)
        ax.set_ylabel("RTT (ms)")
    for ax in axes[:, 0]:
        ax.grid(alpha=0.3)
    axes[-1, 0].set_xlabel("time since workload start (s)")
    axes[0, 0].set_title(title, fontsize=10)
    return fig


# --- SR confusion matrix ------------------------------------------------------------------------
def confusion(counts: np.ndarray, true_labels: list[str], estimate_labels: list[str]) -> Figure:
    fig, ax = plt.subplots(figsize=(1.1 * len(estimate_labels) + 2.5, 0.8 * len(true_labels) + 1.8))
    ax.imshow(counts, cmap="Blues", vmin=0, vmax=max(int(counts.max()), 1), aspect="auto")
    ax.set_xticks(range(len(estimate_labels)), estimate_labels)
    ax.set_yticks(range(len(true_labels)), true_labels)
    ax.set_xlabel("SR-period estimate (ms)")
    ax.set_ylabel("true SR period (ms)")
    half = counts.max() / 2 if counts.size else 0
    for (i, j), n in np.ndenumerate(counts):
        ax.text(j, i, str(int(n)), ha="center", va="center", color="white" if n > half else "black")
    ax.set_title("SR period: truth vs estimate", fontsize=10)
    fig.tight_layout()
    return fig


# --- output -------------------------------------------------------------------------------------
def render(fig: Figure, dpi: int = 100) -> tuple[bytes, bytes]:
    """PNG and SVG bytes of a figure, which is closed afterwards (a 60-run report makes many)."""
    try:
        png, svg = io.BytesIO(), io.BytesIO()
        fig.savefig(png, format="png", dpi=dpi)
        fig.savefig(svg, format="svg", metadata={"Date": None})  # no timestamp: rebuilds are byte-stable
        return png.getvalue(), svg.getvalue()
    finally:
        plt.close(fig)


__all__ = ["Panel", "ScatterPoint", "cdf_points", "cdfs", "chunks", "colors_for", "confusion", "render", "thin",
           "throughput_delay", "timeline"]
