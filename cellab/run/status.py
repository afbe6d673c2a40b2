"""`cellab status DIR`: a campaign folder's progress from its store and files, read without writing anything:
runs done, failed, invalid and left per cell of the matrix, each finished run's line, an ETA from the mean run
time, whether a live `cellab run` holds the folder (its holder.lock) and the running run's last seconds from the
telemetry it is writing."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from cellab.errors import CellabError
from cellab.results.holder import holder_of
from cellab.results.store import ResultStore
from cellab.run.view import (
    eta_text,
    factors_text,
    headline_metric,
    last_seconds,
    now_line,
    run_line,
    running_file_lines,
)

COUNTED = ("ok", "failed", "invalid")


def _campaign(store: ResultStore) -> dict[str, Any]:
    try:
        data = yaml.safe_load(store.campaign_path().read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CellabError(f"{store.campaign_path()}: cannot read the campaign ({exc})") from None
    return data if isinstance(data, dict) else {}


def holder_text(root: Path) -> str:
    who = holder_of(root)
    if who is None:
        return "no live `cellab run` holds it"
    try:
        since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(who["started_at"])))
        return f"held by a live `cellab run`: pid {int(who['pid'])} on host {who['host']}, since {since}"
    except (KeyError, TypeError, ValueError):
        return "held by a live `cellab run` that has not said who it is yet"


def cell_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per cell of the matrix (its factors), how many runs are ok, failed, invalid and left."""
    cells: dict[str, Counter] = {}
    for row in rows:
        counts = cells.setdefault(factors_text(row.get("factors") or {}) or "(no factors)", Counter())
        counts[row["status"] if row["status"] in COUNTED else "left"] += 1
    return [f"{cell}: " + ", ".join(f"{counts[s]} {s}" for s in (*COUNTED, "left"))
            for cell, counts in sorted(cells.items())]


def status_lines(root: Path) -> list[str]:
    """Everything `cellab status` prints, in order."""
    store = ResultStore.open(root)
    campaign = _campaign(store)
    rows = store.rows()
    metric = headline_metric(campaign)
    out = [f"campaign {campaign.get('name', root.name)} on lab {campaign.get('lab', '?')}: {root}",
           holder_text(root), eta_text(rows), "", "cells:"]
    out += [f"  {line}" for line in cell_lines(rows)]
    finished = sorted((r for r in rows if r["status"] in (*COUNTED, "aborted")), key=lambda r: r["finished_at"] or 0)
    out += ["", "finished runs:"] + ([f"  {run_line(r, metric)}" for r in finished] or ["  none yet"])
    held = holder_of(root) is not None
    slots = running_file_lines(root) if held else []  # a campaign on Dask: its running slots
    out += ["", "running slots:"] + [f"  {line}" for line in slots] if slots else []
    for row in rows:
        if row["status"] == "running" and not held:
            out += ["", f"run {row['run_id']} was left running by a `cellab run` that ended: --resume runs it again"]
        elif row["status"] == "running":
            running_s = time.time() - row["started_at"] if row.get("started_at") else None
            out += ["", now_line(row["run_id"], row.get("factors") or {}, running_s,
                                 last_seconds(store.run_dir(row["run_id"])))]
    return out
