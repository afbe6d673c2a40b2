"""Per-run timelines: stacked axes on one time axis (attenuation, the run's and each UE's; capacity vs throughput
and each UE's; the radio's CQI from the recorded telemetry; RTT, the run's and each UE's), each row only when
present.

All timelines of a report share their axes (time, rate from zero, RTT from zero, attenuation): runs compare at a
glance, and the decorations (axes, ticks, labels, legend) are the same picture for every run of one layout. They
are drawn once: the PNG background is kept and each run's lines and title are drawn on a copy of it (blitting);
the SVG is the background's SVG with each run's lines added from a bare overlay figure. A run then costs its
lines, not a whole figure (a fresh matplotlib figure is ~0.5 s here, sixty of them were most of a report).
"""

from __future__ import annotations

import io
import re
from dataclasses import dataclass, field

import matplotlib
import numpy as np
from PIL import Image

from cellab.report.plots import BPS_PER_MBIT, PNG_COMPRESS, plt, svg_bytes, value_range

MAX_LINE_POINTS = 2000  # longer series are thinned (keeping extremes): a 720-pixel-wide plot shows no more
MAX_FAULT_MARKS = 4  # faults marked per timeline (a shaded span, the re-attach and the throughput-back lines)
CQI_RANGE = (0.0, 15.5)

Series = tuple[np.ndarray, np.ndarray]


def thin(t_s: np.ndarray, v: np.ndarray, max_points: int = MAX_LINE_POINTS) -> Series:
    """At most max_points, keeping each bucket's min and max so spikes (RTT, capacity dips) stay visible."""
    t_s, v = np.asarray(t_s, float), np.asarray(v, float)
    if t_s.size <= max_points:
        return t_s, v
    edges = np.linspace(0, t_s.size, max_points // 2 + 1).astype(int)
    lo, hi = edges[:-1], edges[1:]
    lo, hi = lo[hi > lo], hi[hi > lo]
    lengths = hi - lo
    # each bucket padded to the longest with its own last value: argmin/argmax over one 2-D array
    idx = lo[:, None] + np.minimum(np.arange(int(lengths.max()))[None, :], (lengths - 1)[:, None])
    seg = v[idx]
    chosen = np.unique(np.concatenate([lo + np.argmin(seg, axis=1), lo + np.argmax(seg, axis=1)]))
    return t_s[chosen], v[chosen]


def _floats(values: object) -> np.ndarray:
    """A list of numbers as floats; anything else in it becomes NaN (dropped with its time)."""
    if not isinstance(values, list | tuple | np.ndarray):
        return np.empty(0)
    try:
        out = np.asarray(values, float)
        if out.ndim == 1:
            return out
    except (TypeError, ValueError, OverflowError):
        pass
    return np.array([float(x) if isinstance(x, int | float) and not isinstance(x, bool) and abs(x) < 1e300
                     else np.nan for x in values], float)


def _series(timeline: dict, name: str) -> Series | None:
    entry = timeline.get(name)
    if not isinstance(entry, dict):
        return None
    t_s, v = _floats(entry.get("t_s")), _floats(entry.get("v"))
    n = min(t_s.size, v.size)
    if n == 0:
        return None
    ok = np.isfinite(t_s[:n]) & np.isfinite(v[:n]) & (np.abs(v[:n]) < 1e300)
    if not ok.any():
        return None
    t_s, v = t_s[:n][ok], v[:n][ok]
    order = np.argsort(t_s, kind="stable")  # a series out of time order is drawn in time order
    return t_s[order], v[order]


@dataclass
class TimelineData:
    """One run's timeline series, thinned: what a timeline figure draws (small enough to send to a worker)."""

    atten: Series | None = None
    capacity: Series | None = None
    throughput: Series | None = None
    per_ue: dict[str, Series] = field(default_factory=dict)
    cqi: dict[str, Series] = field(default_factory=dict)
    rtt: Series | None = None
    rtt_per_ue: dict[str, Series] = field(default_factory=dict)
    atten_per_ue: dict[str, Series] = field(default_factory=dict)
    #: (start, end, re-attach or None, throughput back or None) per fault, s from the workload's start
    faults: tuple[tuple[float, float, float | None, float | None], ...] = ()

    @property
    def layout(self) -> tuple:
        """Runs with the same layout are drawn on one figure."""
        return (self.atten is not None, self.capacity is not None, self.throughput is not None,
                tuple(self.per_ue), tuple(self.cqi), self.rtt is not None, tuple(self.rtt_per_ue),
                tuple(self.atten_per_ue))

    def all_series(self) -> list[Series]:
        return [s for s in (self.atten, self.capacity, self.throughput, self.rtt) if s is not None] + [
            *self.per_ue.values(), *self.cqi.values(), *self.rtt_per_ue.values(), *self.atten_per_ue.values()]


def timeline_data(series: object, max_points: int = MAX_LINE_POINTS,
                  faults: list[tuple[float, float, float | None, float | None]] | None = None) -> TimelineData | None:
    """The series a timeline shows (each only when present), thinned to max_points; None when none is."""
    if not isinstance(series, dict):
        return None

    def get(name: str) -> Series | None:
        s = _series(series, name)
        return thin(*s, max_points) if s else None

    names = sorted(k for k in series if isinstance(k, str))

    def each(prefix: str) -> dict[str, Series]:
        """`<prefix>.<name>` series by name (each UE's or agent's)."""
        return {k.split(".", 1)[1]: s for k in names if k.startswith(prefix + ".") and (s := get(k))}

    data = TimelineData(atten=get("attenuation_db"), capacity=get("capacity_bps"), throughput=get("throughput_bps"),
                        per_ue=each("throughput_bps"), cqi=each("cqi"), rtt=get("rtt_ms"),
                        rtt_per_ue=each("rtt_ms"), atten_per_ue=each("attenuation_db"),
                        faults=tuple((faults or [])[:MAX_FAULT_MARKS]))
    return data if data.all_series() else None


@dataclass(frozen=True)
class TimelineLimits:
    """The axes every timeline of a report shares."""

    t_s: tuple[float, float] = (0.0, 1.0)
    atten_db: tuple[float, float] = (0.0, 1.0)
    rate_mbit: tuple[float, float] = (0.0, 1.0)
    rtt_ms: tuple[float, float] = (0.0, 1.0)


def timeline_limits(datas: list[TimelineData]) -> TimelineLimits:
    def values(pick) -> np.ndarray:
        parts = [s[1] for d in datas for s in pick(d) if s is not None]
        return np.concatenate(parts) if parts else np.empty(0)

    times = [s[0] for d in datas for s in d.all_series()]
    t = np.concatenate(times) if times else np.zeros(1)
    t_lo, t_hi = float(t.min()), float(t.max())
    return TimelineLimits(
        t_s=(t_lo, t_hi if t_hi > t_lo else t_lo + 1.0),
        atten_db=value_range(values(lambda d: [d.atten, *d.atten_per_ue.values()])),
        rate_mbit=value_range(values(lambda d: [d.capacity, d.throughput, *d.per_ue.values()]) / BPS_PER_MBIT,
                              zero_based=True),
        rtt_ms=value_range(values(lambda d: [d.rtt, *d.rtt_per_ue.values()]), zero_based=True))


def _hold_to(t_s: np.ndarray, v: np.ndarray, t_end_s: float) -> Series:
    """A setting (attenuation) holds its last value until the run ends, not until its last change."""
    if t_end_s <= t_s[-1]:
        return t_s, v
    return np.append(t_s, t_end_s), np.append(v, v[-1])


class TimelineFigure:
    """The figure of one layout on the shared limits. overlay: only the lines and the title, on a transparent
    figure with the same geometry (its SVG is laid over the full figure's)."""

    def __init__(self, layout: tuple, limits: TimelineLimits, overlay: bool = False):
        has_atten, has_capacity, has_throughput, ues, cqis, has_rtt, rtt_ues, atten_ues = layout
        rows = [r for r, present in (("atten", has_atten or atten_ues), ("rate", has_capacity or has_throughput or ues),
                                     ("cqi", cqis), ("rtt", has_rtt or rtt_ues)) if present]
        height_in = 1.9 * len(rows) + 0.8
        self.fig, axes = plt.subplots(len(rows), 1, figsize=(9.0, height_in), sharex=True, squeeze=False)
        # legends to the right of the axes: each run's lines never cover them
        self.fig.subplots_adjust(left=0.09, right=1 - 1.25 / 9.0, top=1 - 0.35 / height_in, bottom=0.5 / height_in,
                                 hspace=0.15)
        self.axes = dict(zip(rows, axes[:, 0], strict=True))
        self.lines: dict[str, matplotlib.lines.Line2D] = {}
        self.limits = limits

        def line(row: str, key: str, **style: object) -> None:
            self.lines[key], = self.axes[row].plot([], [], **style)

        if has_atten:
            line("atten", "atten", drawstyle="steps-post", color="tab:purple")
        for i, name in enumerate(atten_ues):  # a UE's colour is the same in every row
            line("atten", f"atten.{name}", drawstyle="steps-post", linewidth=0.9, label=name,
                 color=self.ue_color(ues, name, i))
        if has_capacity:
            line("rate", "capacity", color="tab:gray", label="capacity")
        if has_throughput:
            line("rate", "throughput", color="tab:blue", label="throughput")
        for i, name in enumerate(ues):
            line("rate", f"ue.{name}", linewidth=0.8, label=name, color=f"C{(i + 2) % 10}")
        for i, name in enumerate(cqis):
            line("cqi", f"cqi.{name}", drawstyle="steps-post", linewidth=0.8, label=name, color=f"C{i % 10}")
        if has_rtt:
            line("rtt", "rtt", color="tab:red", linewidth=0.9)
        for i, name in enumerate(rtt_ues):
            line("rtt", f"rtt.{name}", linewidth=0.8, label=name, color=self.ue_color(ues, name, i))
        # fault marks, invisible until a run has faults: its span shaded, re-attach dashed, throughput back dotted
        self.marks: list[list[tuple[object, object, object]]] = []
        for _ in range(MAX_FAULT_MARKS):
            self.marks.append([(ax.axvspan(0, 0, color="tab:orange", alpha=0.2, linewidth=0, visible=False),
                                ax.axvline(0, color="tab:green", linestyle="--", linewidth=0.9, visible=False),
                                ax.axvline(0, color="tab:olive", linestyle=":", linewidth=1.1, visible=False))
                               for ax in self.axes.values()])
        ranges = {"atten": limits.atten_db, "rate": limits.rate_mbit, "cqi": CQI_RANGE, "rtt": limits.rtt_ms}
        for row, ax in self.axes.items():
            ax.set_ylim(*ranges[row])
        axes[0, 0].set_xlim(*limits.t_s)
        self.title = axes[0, 0].set_title("", fontsize=10)
        if overlay:
            self.fig.patch.set_visible(False)
            for ax in self.axes.values():
                ax.set_axis_off()
            return
        labels = {"atten": "attenuation (dB)", "rate": "Mbit/s", "cqi": "CQI", "rtt": "RTT (ms)"}
        for row, ax in self.axes.items():
            ax.set_ylabel(labels[row])
            ax.grid(alpha=0.3)
        if "rate" in self.axes:
            self.axes["rate"].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        for row, several in (("cqi", len(cqis) > 1), ("atten", bool(atten_ues)), ("rtt", bool(rtt_ues))):
            if several:
                self.axes[row].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
        axes[-1, 0].set_xlabel("time since workload start (s)")

    @staticmethod
    def ue_color(ues: tuple, name: str, i: int) -> str:
        """The colour of the UE's throughput line when it has one, else its own in this row."""
        return f"C{((ues.index(name) if name in ues else len(ues) + i) + 2) % 10}"

    def set_data(self, title: str, data: TimelineData) -> None:
        t_end = max(float(s[0][-1]) for s in data.all_series())
        if data.atten is not None:
            self.lines["atten"].set_data(*_hold_to(*data.atten, t_end))
        for name, s in data.atten_per_ue.items():
            self.lines[f"atten.{name}"].set_data(*_hold_to(*s, t_end))
        for name, s in data.rtt_per_ue.items():
            self.lines[f"rtt.{name}"].set_data(*s)
        for key, s in (("capacity", data.capacity), ("throughput", data.throughput)):
            if s is not None:
                self.lines[key].set_data(s[0], s[1] / BPS_PER_MBIT)
        for name, (t, v) in data.per_ue.items():
            self.lines[f"ue.{name}"].set_data(t, v / BPS_PER_MBIT)
        for name, s in data.cqi.items():
            self.lines[f"cqi.{name}"].set_data(*s)
        if data.rtt is not None:
            self.lines["rtt"].set_data(*data.rtt)
        for i, per_axis in enumerate(self.marks):
            fault = data.faults[i] if i < len(data.faults) else None
            for span, reattach, back in per_axis:
                span.set_visible(fault is not None)
                reattach.set_visible(fault is not None and fault[2] is not None)
                back.set_visible(fault is not None and fault[3] is not None)
                if fault is None:
                    continue
                start, end = fault[0], max(fault[1], fault[0])
                if hasattr(span, "set_width"):  # a Rectangle (matplotlib >= 3.9), else a Polygon
                    span.set_x(start)
                    span.set_width(end - start)
                else:
                    span.set_xy([[start, 0], [start, 1], [end, 1], [end, 0], [start, 0]])
                if fault[2] is not None:
                    reattach.set_xdata([fault[2], fault[2]])
                if fault[3] is not None:
                    back.set_xdata([fault[3], fault[3]])
        self.title.set_text(title)

    def mark_artists(self) -> list[object]:
        return [artist for per_axis in self.marks for trio in per_axis for artist in trio]

    def close(self) -> None:
        plt.close(self.fig)


_SVG_ID = re.compile(r'(\bid="|url\(#|xlink:href="#)')


class TimelineRenderer:
    """Every run of one layout: the decorations drawn once, each run's lines and title over them."""

    def __init__(self, layout: tuple, limits: TimelineLimits, dpi: int):
        self.full = TimelineFigure(layout, limits)
        self.overlay = TimelineFigure(layout, limits, overlay=True)
        self.dpi = dpi
        moving = [*self.full.lines.values(), *self.full.mark_artists(), self.full.title]
        for artist in moving:
            artist.set_animated(True)  # left out of the background, drawn per run
        self.full.fig.set_dpi(dpi)
        self.canvas = self.full.fig.canvas
        self.canvas.draw()
        self.background = self.canvas.copy_from_bbox(self.full.fig.bbox)
        svg = svg_bytes(self.full.fig).decode()
        cut = svg.rindex("</svg>")
        self.svg_head, self.svg_tail = svg[:cut], svg[cut:]

    def render(self, title: str, data: TimelineData) -> tuple[bytes, bytes]:
        self.full.set_data(title, data)
        self.canvas.restore_region(self.background)
        for artist in [*self.full.mark_artists(), *self.full.lines.values()]:
            if artist.get_visible():
                artist.axes.draw_artist(artist)
        self.full.title.axes.draw_artist(self.full.title)
        png = io.BytesIO()
        Image.fromarray(np.asarray(self.canvas.buffer_rgba())).save(png, format="png", compress_level=PNG_COMPRESS,
                                                                   dpi=(self.dpi, self.dpi))
        self.overlay.set_data(title, data)
        over = svg_bytes(self.overlay.fig).decode()
        body = over[over.index('<g id="figure_1">'):over.rindex("</svg>")]
        body = _SVG_ID.sub(lambda m: m.group(1) + "run-", body)  # its ids apart from the background's
        return png.getvalue(), (self.svg_head + body + self.svg_tail).encode()

    def close(self) -> None:
        self.full.close()
        self.overlay.close()


def timeline(title: str, series: dict, dpi: int = 100) -> tuple[bytes, bytes] | None:
    """One run's timeline as (PNG, SVG) on its own limits; None when it has no series to show."""
    data = timeline_data(series)
    if data is None:
        return None
    renderer = TimelineRenderer(data.layout, timeline_limits([data]), dpi)
    try:
        return renderer.render(title, data)
    finally:
        renderer.close()


__all__ = ["MAX_LINE_POINTS", "TimelineData", "TimelineFigure", "TimelineLimits", "TimelineRenderer", "thin",
           "timeline", "timeline_data", "timeline_limits"]
