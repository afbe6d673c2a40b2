"""The report's figures, drawn in parallel: sections ask for figures (a kind and its data), this module draws
them all at once in worker processes (matplotlib Agg) and hands back PNG and SVG bytes.

Workers get plain data (panels, thinned timelines), never the runs, and draw the per-run timelines of one
layout on one reused figure. A figure that cannot be drawn becomes a note on the page, not a failed report.
"""

from __future__ import annotations

import base64
import math
import multiprocessing
import os
import sys
import threading
import warnings
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

from cellab.report import fault_plot, plots
from cellab.report.timeline import TimelineRenderer

PARALLEL_MIN_JOBS = 4  # fewer figures are drawn in this process: starting workers would cost more
MAX_WORKERS = 8
WORKERS_ENV = "CELLAB_REPORT_WORKERS"  # 1: draw everything in this process


@dataclass
class FigureOut:
    """One figure of the page; png_b64 is filled once drawn (None: saved but not inline)."""

    name: str
    title: str
    inline: bool = True
    png_b64: str | None = None
    error: str | None = None  # why it could not be drawn


@dataclass
class FigureJob:
    kind: str  # a key of DRAW
    args: tuple
    dpi: int
    out: FigureOut
    kwargs: dict[str, Any] = field(default_factory=dict)

    @property
    def cost(self) -> float:
        """About how many timeline figures' worth of time it takes to draw."""
        if self.kind in ("throughput_delay", "cdfs"):
            return 1.0 + 0.6 * len(self.args[0])
        return 0.3 if self.kind == "timeline" else 1.0


# a worker process keeps its timeline renderers from batch to batch (their decorations cost a full figure)
_RENDERERS: dict[tuple, TimelineRenderer] = {}


def _timeline(title: str, data: Any, limits: Any, dpi: int) -> tuple[bytes, bytes]:
    key = (data.layout, limits, dpi)
    renderer = _RENDERERS.get(key)
    if renderer is None:
        renderer = _RENDERERS[key] = TimelineRenderer(data.layout, limits, dpi)
    return renderer.render(title, data)


def _close_renderers() -> None:
    while _RENDERERS:
        _RENDERERS.popitem()[1].close()


DRAW = {"throughput_delay": plots.throughput_delay, "cdfs": plots.cdfs, "confusion": plots.confusion,
        "outages": fault_plot.outages}


def render_batch(jobs: list[tuple[str, tuple, dict, int]]) -> list[tuple[bytes, bytes] | str]:
    """(kind, args, kwargs, dpi) -> (PNG, SVG) each, or the error text; runs in a worker or in-process."""
    out: list[tuple[bytes, bytes] | str] = []
    for kind, args, kwargs, dpi in jobs:
        try:
            if kind == "timeline":
                out.append(_timeline(*args, dpi))
            else:
                out.append(plots.render(DRAW[kind](*args, **kwargs), dpi))
        except Exception as exc:  # noqa: BLE001 - one undrawable figure must not take the report down
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def _render_here(jobs: list[tuple[str, tuple, dict, int]]) -> list[tuple[bytes, bytes] | str]:
    try:
        return render_batch(jobs)
    finally:
        _close_renderers()  # this process goes on: its figures must not


def default_workers() -> int:
    env = os.environ.get(WORKERS_ENV, "")
    if env.isdigit() and int(env) >= 1:
        return int(env)
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cpus = os.cpu_count() or 1
    return max(1, min(cpus, MAX_WORKERS))


def _context() -> multiprocessing.context.BaseContext:
    """fork when this process has one thread (`cellab report`): the workers inherit the imported modules (no
    start-up cost). With other threads alive (`cellab run`: the bus, Dask, logging), a lock one of them holds at
    the fork would stay held in the child for ever, so a fork server that imports the drawing code once."""
    if (sys.platform == "linux" and "fork" in multiprocessing.get_all_start_methods()
            and threading.active_count() == 1):
        return multiprocessing.get_context("fork")
    method = "forkserver" if "forkserver" in multiprocessing.get_all_start_methods() else "spawn"
    ctx = multiprocessing.get_context(method)
    if method == "forkserver":
        ctx.set_forkserver_preload(["cellab.report.figures"])
    return ctx


def _batches(jobs: list[FigureJob], workers: int) -> list[list[int]]:
    """Job indexes in batches, the costliest first: each multi-panel figure alone, the timelines in runs of
    one layout (a worker draws a layout's decorations once), small enough that the workers finish together."""
    singles = [[i] for i, j in enumerate(jobs) if j.kind != "timeline"]
    timeline = sorted((i for i, j in enumerate(jobs) if j.kind == "timeline"), key=lambda i: str(jobs[i].args[1].layout))
    size = max(1, math.ceil(len(timeline) / (workers * 2)))
    batches = singles + [timeline[k:k + size] for k in range(0, len(timeline), size)]
    return sorted(batches, key=lambda b: -sum(jobs[i].cost for i in b))


def render_all(jobs: list[FigureJob], workers: int | None = None) -> list[tuple[bytes, bytes] | str]:
    """Every job's (PNG, SVG), in job order; in parallel when there are enough of them."""
    workers = default_workers() if workers is None else max(1, workers)
    plain = [(j.kind, j.args, j.kwargs, j.dpi) for j in jobs]
    if workers == 1 or len(jobs) < PARALLEL_MIN_JOBS:
        return _render_here(plain)
    batches = _batches(jobs, workers)
    results: list[tuple[bytes, bytes] | str | None] = [None] * len(jobs)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork with other threads: see _context
            with ProcessPoolExecutor(max_workers=min(workers, len(batches)), mp_context=_context()) as pool:
                futures = [(batch, pool.submit(render_batch, [plain[i] for i in batch])) for batch in batches]
                for batch, future in futures:
                    for i, result in zip(batch, future.result(), strict=True):
                        results[i] = result
    except (BrokenProcessPool, OSError):  # a worker died (memory?) or none could start: draw the rest here
        missing = [i for i, r in enumerate(results) if r is None]
        for i, result in zip(missing, _render_here([plain[i] for i in missing]), strict=True):
            results[i] = result
    return results  # type: ignore[return-value]


class FigureSet:
    """The figures the sections asked for; drawn together by render()."""

    def __init__(self) -> None:
        self.jobs: list[FigureJob] = []
        self.files: dict[str, bytes] = {}  # file name -> bytes, once drawn

    def add(self, name: str, title: str, kind: str, *args: Any, inline: bool = True, dpi: int = 100,
            **kwargs: Any) -> FigureOut:
        if any(j.out.name == name for j in self.jobs):
            raise ValueError(f"two figures named {name}")
        out = FigureOut(name, title, inline)
        self.jobs.append(FigureJob(kind, args, dpi, out, kwargs))
        return out

    def render(self, workers: int | None = None) -> None:
        for job, result in zip(self.jobs, render_all(self.jobs, workers), strict=True):
            if isinstance(result, str):
                job.out.error = result
                job.out.inline = False
                continue
            png, svg = result
            self.files[f"{job.out.name}.png"] = png
            self.files[f"{job.out.name}.svg"] = svg
            if job.out.inline:
                job.out.png_b64 = base64.b64encode(png).decode()


__all__ = ["FigureOut", "FigureSet", "default_workers", "render_all", "render_batch"]
