"""The report's figures: pure matplotlib (Agg), data in, Figure out. The report decides what to plot.

Every function takes plain numbers (already grouped and labelled) so it can be tested and reused
without a result folder. Throughput is drawn in Mbit/s, times in seconds, delays in ms.

Axes are honest: the panels of one comparison share their axes, rates start at zero, and no axis spans
less than ±5 % of its data's median (a throughput CDF of 19.10–19.18 Mbit/s must not look like a spread).
A panel without data says so instead of disappearing.
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

from cellab.report.model import BPS_PER_MBIT  # noqa: E402, F401  (the timelines' and sections' unit too)

MAX_PANELS_PER_FIGURE = 9  # more facets than this go to a second figure: panels stay readable
CDF_POINTS = 400  # a CDF drawn from this many quantiles looks the same as one from every sample (a panel is ~400 px)
PANEL_W_IN, PANEL_H_IN = 5.0, 3.8
MIN_REL_SPAN = 0.10  # an axis spans at least ±5 % of its data's median
PNG_COMPRESS = 3  # zlib level: PNGs a little larger than the default 6, written about twice as fast


@dataclass
class ScatterPoint:
    scheme: str
    p95_delay_ms: float
    throughput_bps: float


@dataclass
class Panel:
    """One axes: a title and labelled data (points for scatters, samples for CDFs); `note` is shown when the
    panel has no data; `zero_based`: the axis starts at 0 (rates)."""

    title: str
    xlabel: str = ""
    samples: dict[str, np.ndarray] = field(default_factory=dict)
    points: list[ScatterPoint] = field(default_factory=list)
    note: str = ""
    zero_based: bool = False

    @property
    def empty(self) -> bool:
        return not self.points and not any(np.size(v) for v in self.samples.values())


def colors_for(labels: Sequence[str]) -> dict[str, str]:
    """One fixed colour per label, the same in every figure of the report."""
    cmap = plt.get_cmap("tab10" if len(labels) <= 10 else "tab20")
    return {label: matplotlib.colors.to_hex(cmap(i % cmap.N)) for i, label in enumerate(labels)}


def chunks(panels: list[Panel], size: int = MAX_PANELS_PER_FIGURE) -> list[list[Panel]]:
    return [panels[i:i + size] for i in range(0, len(panels), size)] or [[]]


def value_range(values: np.ndarray, zero_based: bool = False) -> tuple[float, float]:
    """Axis limits for values: from 0 for rates, at least ±5 % of the median wide, a small margin each side."""
    values = np.asarray(values, float)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return (0.0, 1.0)
    lo, hi = float(values.min()), float(values.max())
    if zero_based and lo >= 0:
        lo = 0.0
    center = float(np.median(values))
    min_span = MIN_REL_SPAN * abs(center) or 1.0
    if hi - lo < min_span:
        pad = (min_span - (hi - lo)) / 2
        lo, hi = lo - pad, hi + pad
        if zero_based and lo < 0 <= values.min():
            lo, hi = 0.0, hi - lo
    margin = 0.03 * (hi - lo)
    return (lo if zero_based and lo == 0 else lo - margin, hi + margin)


def _grid(n_panels: int, max_cols: int = 3, share_x: bool = True, share_y: bool = True, legend_row: bool = False
          ) -> tuple[Figure, list[plt.Axes]]:
    """Panels on shared axes, with fixed margins in inches (no tight_layout: it draws the figure twice);
    legend_row: room above the panels for a figure legend."""
    n = max(n_panels, 1)
    n_cols = min(n, max_cols)
    n_rows = math.ceil(n / n_cols)
    width, height = PANEL_W_IN * n_cols, PANEL_H_IN * n_rows
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, height), squeeze=False,
                             sharex=share_x, sharey=share_y)
    left, right, top, bottom = 0.75, 0.2, 0.4 + (0.3 if legend_row else 0.0), 0.65
    gap_w = 0.3 if share_y else 0.8
    gap_h = 0.45 if share_x else 0.95
    panel_w = (width - left - right - gap_w * (n_cols - 1)) / n_cols
    panel_h = (height - top - bottom - gap_h * (n_rows - 1)) / n_rows
    fig.subplots_adjust(left=left / width, right=1 - right / width, top=1 - top / height, bottom=bottom / height,
                        wspace=gap_w / panel_w, hspace=gap_h / panel_h)
    flat = list(axes.flat)
    for ax in flat[n_panels:]:
        ax.set_visible(False)
    for i, ax in enumerate(flat[:n_panels]):
        if share_x and i + n_cols >= n_panels:  # nothing visible below: this panel carries the x axis
            ax.xaxis.set_tick_params(labelbottom=True)
    return fig, flat[:n_panels]


def _label(ax: plt.Axes, title: str, xlabel: str | None, ylabel: str | None) -> None:
    """Title and axis labels at fixed places: matplotlib would otherwise measure every tick label of every
    shared panel to place them, a third of a multi-panel figure's drawing time."""
    ax.set_title(title, fontsize=10, y=1.0)
    if xlabel is not None:
        ax.set_xlabel(xlabel)
        ax.xaxis.set_label_coords(0.5, -0.1)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
        ax.yaxis.set_label_coords(-0.1, 0.5)


def _no_data(ax: plt.Axes, note: str) -> None:
    ax.text(0.5, 0.5, note or "no data", transform=ax.transAxes, ha="center", va="center", fontsize=9,
            color="#666", wrap=True)


def _shows_x(axes: list[plt.Axes], i: int, n_cols: int, share_x: bool) -> bool:
    return not share_x or i + n_cols >= len(axes)


# --- throughput vs delay ------------------------------------------------------------------------
def throughput_delay(panels: list[Panel], colors: dict[str, str]) -> Figure:
    """Pantheon style: x = 95th-percentile delay, inverted, y = throughput; better is up and right. Every
    panel on the same axes: from zero delay and zero throughput to the largest of the figure."""
    fig, axes = _grid(len(panels), legend_row=True)
    points = [p for panel in panels for p in panel.points]
    top_delay_ms = max((p.p95_delay_ms for p in points), default=1.0)
    top_mbit = max((p.throughput_bps for p in points), default=0.0) / BPS_PER_MBIT
    n_cols = min(max(len(panels), 1), 3)
    for i, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
        _scatter_panel(ax, panel, colors)
        _label(ax, panel.title, "95th-percentile RTT (ms)" if _shows_x(axes, i, n_cols, True) else None,
               "throughput (Mbit/s)" if i % n_cols == 0 else None)
    shown = [s for s in colors if any(p.scheme == s for p in points)]
    if shown:  # one legend for the figure: every panel uses the same colours
        handles = [plt.Line2D([], [], marker="o", linestyle="", markersize=8, markerfacecolor=colors[s],
                              markeredgecolor="black", label=s) for s in shown]
        fig.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 1.0), fontsize=8,
                   ncol=min(len(shown), 6), frameon=False)
    if axes:
        axes[0].set_xlim(top_delay_ms * 1.15 or 1.0, 0)  # inverted: lower delay to the right; shared
        axes[0].set_ylim(0, max(top_mbit, 0.1) * 1.2)
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
                   zorder=3)
    ax.grid(alpha=0.3)
    if not by_scheme:
        _no_data(ax, panel.note)


# --- CDFs ---------------------------------------------------------------------------------------
def cdf_points(samples: np.ndarray, max_points: int = CDF_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF as (x, F(x)); long samples are drawn from evenly spaced quantiles."""
    xs = np.sort(np.asarray(samples, float))
    if xs.size > max_points:
        probs = np.linspace(0.0, 1.0, max_points)
        return np.quantile(xs, probs), probs
    return xs, np.arange(1, xs.size + 1) / xs.size


def cdfs(panels: list[Panel], colors: dict[str, str], share_x: bool = True) -> Figure:
    """One CDF panel per facet (share_x: the same quantity in every panel, on one x axis)."""
    fig, axes = _grid(len(panels), share_x=share_x)
    n_cols = min(max(len(panels), 1), 3)
    for i, (ax, panel) in enumerate(zip(axes, panels, strict=True)):
        for label in [lab for lab in colors if lab in panel.samples and np.size(panel.samples[lab])]:
            xs, ps = cdf_points(panel.samples[label])
            ax.step(xs, ps, where="post", color=colors[label], label=f"{label} (n={panel.samples[label].size})")
        _label(ax, panel.title, panel.xlabel if _shows_x(axes, i, n_cols, share_x) else None,
               "CDF" if i % n_cols == 0 else None)
        ax.grid(alpha=0.3)
        if panel.empty:
            _no_data(ax, panel.note)
        else:
            ax.legend(fontsize=7, loc="lower right")
        if not share_x:
            ax.set_xlim(*value_range(_all_samples([panel]), panel.zero_based))
    if axes:
        axes[0].set_ylim(0, 1.02)
        if share_x:
            axes[0].set_xlim(*value_range(_all_samples(panels), any(p.zero_based for p in panels)))
    return fig


def _all_samples(panels: list[Panel]) -> np.ndarray:
    parts = [np.asarray(v, float) for p in panels for v in p.samples.values() if np.size(v)]
    return np.concatenate(parts) if parts else np.empty(0)


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
# text as text (not glyph outlines: smaller, drawn in a third of the time); ids from a fixed salt and no
# timestamp: a rebuilt SVG is byte for byte the same
SVG_RC = {"svg.fonttype": "none", "svg.hashsalt": "cellab-report"}


def svg_bytes(fig: Figure) -> bytes:
    out = io.BytesIO()
    with plt.rc_context(SVG_RC):
        fig.savefig(out, format="svg", metadata={"Date": None})
    return out.getvalue()


def render(fig: Figure, dpi: int = 100, close: bool = True) -> tuple[bytes, bytes]:
    """PNG and SVG bytes of a figure, closed afterwards unless it is reused (a 60-run report makes many)."""
    try:
        png = io.BytesIO()
        fig.savefig(png, format="png", dpi=dpi, pil_kwargs={"compress_level": PNG_COMPRESS})
        return png.getvalue(), svg_bytes(fig)
    finally:
        if close:
            plt.close(fig)


__all__ = ["Panel", "ScatterPoint", "cdf_points", "cdfs", "chunks", "colors_for", "confusion", "render",
           "throughput_delay", "value_range"]
