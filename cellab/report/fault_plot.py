"""The faults section's figure (issue 41): each UE's outage and return on one time axis, a panel per faulted run
(the panels share the axis): a row per UE, the fault's window as a bar on every UE it hit, and on it the UE's
radio link failure, re-attach, user plane restored (its first byte again) and throughput back, from the run's
`fault_events` (cellab.faults.timeline). Plain data in, a matplotlib Figure out."""

from __future__ import annotations

from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

MAX_RUNS = 8  # panels in the figure; the table lists every run
#: event -> (marker, color, legend label)
MARKS = {"rlf": ("x", "tab:red", "radio link failure"), "reattach": ("^", "tab:green", "re-attach"),
         "user_plane_restored": ("o", "tab:blue", "user plane restored"),
         "throughput_back": ("|", "black", "throughput back (90 %)"),
         "daemon_back": ("s", "tab:purple", "core daemon listening again")}
UE_FAULTS = ("radio_outage", "ue_pause")


def outage_rows(events: list[dict[str, Any]]) -> dict[int, dict[str, list]]:
    """Per UE: its fault windows [(start, end, kind)] and its marks {event: [t_s]} from a run's fault events."""
    starts = {(e["fault"], e["ue"]): e for e in events if e["event"] == "fault_start"}
    out: dict[int, dict[str, list]] = {}
    for e in events:
        if not isinstance(e.get("ue"), int):
            continue
        ue = out.setdefault(e["ue"], {"windows": [], **{k: [] for k in MARKS}})
        if e["event"] == "fault_end" and (e["fault"], e["ue"]) in starts:
            ue["windows"].append((starts[(e["fault"], e["ue"])]["t_s"], e["t_s"], e["kind"]))
        elif e["event"] in MARKS:
            ue[e["event"]].append(e["t_s"])
    return out


def outages(runs: list[tuple[str, list[dict[str, Any]]]]) -> Figure:
    """`runs`: (panel title, the run's fault_events) each."""
    shown = runs[:MAX_RUNS]
    fig, axes = plt.subplots(len(shown), 1, sharex=True, squeeze=False,
                             figsize=(9.0, 0.5 + sum(0.45 * max(1, len(outage_rows(ev))) + 0.5 for _, ev in shown)))
    labelled: set[str] = set()
    for ax, (title, events) in zip(axes[:, 0], shown, strict=True):
        rows = outage_rows(events)
        for y, ue in enumerate(sorted(rows)):
            for start, end, kind in rows[ue]["windows"]:
                own = kind in UE_FAULTS
                label = None if ("own" if own else "cell") in labelled else (
                    "the UE's own fault" if own else "a fault of the whole cell")
                labelled.add("own" if own else "cell")
                ax.barh(y, max(end - start, 0.05), left=start, height=0.5, color="tab:orange" if own else "0.75",
                        label=label)
            for event, (marker, color, text) in MARKS.items():
                times = rows[ue][event]
                if times:
                    ax.plot(times, [y] * len(times), marker, color=color, markersize=8, linestyle="none",
                            label=None if event in labelled else text)
                    labelled.add(event)
        ax.set_yticks(range(len(rows)), [f"UE {ue}" for ue in sorted(rows)])
        ax.set_ylim(-0.7, max(len(rows), 1) - 0.3)
        ax.set_title(title, fontsize=9, loc="left")
        ax.grid(axis="x", alpha=0.3)
    axes[-1, 0].set_xlabel("time from the workload's start (s)")
    fig.legend(loc="upper right", fontsize=8, ncols=3)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    return fig
